# Convolution, NCHW (1-D and 2-D are run as 3-D with leading spatial size 1).
#
# General conv, per image n and group g, in the transposed GEMM formulation so the weight is the packed B operand:
#     Y[n, g]^T (P x Cout_g) = col^T (P x Kc) @ W[g]^T (Kc x Cout_g)      P = Do*Ho*Wo, Kc = Cin_g*kd*kh*kw
# col (Kc x P) is the im2col of X[n, g] in a workspace (skipped for 1x1 stride-1 unpadded convs, where col is X[n, g]
# itself); the GEMM reads it as a transposed A and writes Y[n, g] in NCHW order (C row stride 1, column stride P),
# with the bias fused in the epilogue. W is packed per group with sgemm_pack_b_raw (trans_b: W[g] is Cout_g x Kc).
# Convs with one input channel per group (depthwise) use a direct loop instead: as a GEMM they would have N = 1.


cdef struct ConvGeom:
    Py_ssize_t C, D, H, W          # input channels and spatial size (per image)
    Py_ssize_t cout, group
    Py_ssize_t kd, kh, kw
    Py_ssize_t sd, sh, sw          # strides
    Py_ssize_t dd, dh, dw          # dilations
    Py_ssize_t pd, ph, pw          # pads at the beginning (the end pads only shape the output)
    Py_ssize_t Do, Ho, Wo


cdef void _im2col_row(const float* x, const ConvGeom* g, Py_ssize_t r, float* dst) noexcept nogil:
    """Row r = ((c*kd + a)*kh + b)*kw + e of the im2col matrix: x[c] shifted by tap (a, b, e), 0 outside."""
    cdef Py_ssize_t e = r % g.kw, b = (r // g.kw) % g.kh, a = (r // (g.kw * g.kh)) % g.kd
    cdef Py_ssize_t c = r // (g.kw * g.kh * g.kd)
    cdef Py_ssize_t od, oh, ow, idd, ih, off, lo, hi
    cdef float* d2
    cdef const float* src
    for od in range(g.Do):
        idd = od * g.sd - g.pd + a * g.dd
        for oh in range(g.Ho):
            ih = oh * g.sh - g.ph + b * g.dh
            d2 = dst + (od * g.Ho + oh) * g.Wo
            if idd < 0 or idd >= g.D or ih < 0 or ih >= g.H:
                memset(d2, 0, g.Wo * sizeof(float))
                continue
            src = x + ((c * g.D + idd) * g.H + ih) * g.W
            off = e * g.dw - g.pw      # input column of ow is ow*sw + off
            if g.sw == 1 and off >= 0 and off + g.Wo <= g.W:
                memcpy(d2, src + off, g.Wo * sizeof(float))
                continue
            lo = 0 if off >= 0 else min((g.sw - 1 - off) // g.sw, g.Wo)
            hi = min((g.W - 1 - off) // g.sw + 1, g.Wo) if g.W - 1 - off >= 0 else 0
            hi = max(hi, lo)
            for ow in range(lo):
                d2[ow] = 0.0
            for ow in range(lo, hi):
                d2[ow] = src[ow * g.sw + off]
            for ow in range(hi, g.Wo):
                d2[ow] = 0.0


cdef void im2col3d_raw(const float* x, Py_ssize_t C, const ConvGeom* g, float* col, int nth) noexcept nogil:
    """col[(c, a, b, e), (od, oh, ow)] := x[c, od*sd - pd + a*dd, oh*sh - ph + b*dh, ow*sw - pw + e*dw] (0 outside).
    Rows are independent: with nth > 1 they are split over threads (the copy would otherwise stay serial while the
    GEMM after it runs on every thread)."""
    cdef Py_ssize_t P = g.Do * g.Ho * g.Wo, rows = C * g.kd * g.kh * g.kw, r
    cdef ConvNchwJob job
    job.x, job.g, job.col, job.P = x, g, col, P
    parallel_for(rows, nth, _im2col_task, &job)


cdef struct ConvNchwJob:
    # the NCHW conv kernels' arguments on the thread pool
    const float* x
    const float* w
    const float* bias
    const float* bp
    float* y
    float* col
    float* bufs
    const float* masks
    const ConvGeom* g
    const DwBuf* d
    const Act* act
    Py_ssize_t P, buf_stride, L, group, per_thread, col_len
    bint relu


cdef void _im2col_task(void* p, Py_ssize_t r, int tid) noexcept nogil:
    cdef ConvNchwJob* j = <ConvNchwJob*>p
    _im2col_row(j.x, j.g, r, j.col + r * j.P)


cdef inline bint _conv_is_pointwise(const ConvGeom* g) noexcept nogil:
    return (g.kd == 1 and g.kh == 1 and g.kw == 1 and g.sd == 1 and g.sh == 1 and g.sw == 1
            and g.pd == 0 and g.ph == 0 and g.pw == 0 and g.Do == g.D and g.Ho == g.H and g.Wo == g.W)


cdef inline bint _conv_is_1d(const ConvGeom* g) noexcept nogil:
    """A 1-D conv (D = H = 1, no padding there) that is not pointwise: its im2col is read in place (_conv_1d_implicit)."""
    return (g.D == 1 and g.H == 1 and g.kd == 1 and g.kh == 1 and g.pd == 0 and g.ph == 0 and g.Do == 1
            and g.Ho == 1 and not _conv_is_pointwise(g))


cdef void _conv_1d_implicit(const float* xg, const ConvGeom* g, Py_ssize_t Cg, ImplicitA* ia) noexcept nogil:
    """The im2col of one image and group of a 1-D conv as an implicit A (no col buffer, packed straight from x):
        A[p, c*kw + e] = x[c, p*sw - pw + e*dw]      (0 outside the row)
    is ImplicitA's channel-last conv over a one-channel "image" whose rows are x's Cg channels (H = Cg, W = L, C = 1)
    with a Cg x kw kernel, no row stride or padding, and one output row: its k = (b*kw + e)*1 + 0 is the NCW weight's
    flattened (c, e) index, so the weight packed for the im2col path serves as it is."""
    ia.x = xg
    ia.H, ia.W, ia.C, ia.Cg = Cg, g.W, 1, 1
    ia.kh, ia.kw, ia.sh, ia.sw, ia.dh, ia.dw, ia.ph, ia.pw = Cg, g.kw, 1, g.sw, 1, g.dw, 0, g.pw
    ia.Ho, ia.Wo, ia.p0 = 1, g.Wo, 0


cdef void _conv_one(Py_ssize_t n, Py_ssize_t gi, const float* x, const float* wp, const float* bias, float* y,
                    const Act* act, const ConvGeom* g, float* col, float* work, int nth) noexcept nogil:
    """Y[n, group gi] for one image and group (col: im2col workspace, unused for pointwise convs)."""
    cdef Py_ssize_t Cg = g.C // g.group, Coutg = g.cout // g.group
    cdef Py_ssize_t Kc = Cg * g.kd * g.kh * g.kw, P = g.Do * g.Ho * g.Wo, DHW = g.D * g.H * g.W
    cdef const float* xg = x + (n * g.C + gi * Cg) * DHW
    cdef const float* a
    cdef ImplicitA ia
    if _conv_is_1d(g):
        _conv_1d_implicit(xg, g, Cg, &ia)
        sgemm_packed_ex(P, Coutg, Kc, 1.0, NULL, 0, 0, &ia, wp + gi * sgemm_pack_b_len(Kc, Coutg), 0.0,
                        y + (n * g.cout + gi * Coutg) * P, 1, P,
                        (bias + gi * Coutg) if bias != NULL else NULL, NULL, NULL, act, work, nth)
        return
    if _conv_is_pointwise(g):
        a = xg
    else:
        im2col3d_raw(xg, Cg, g, col, nth)
        a = col
    sgemm_packed_raw(P, Coutg, Kc, 1.0, a, 1, P, wp + gi * sgemm_pack_b_len(Kc, Coutg), 0.0,
                     y + (n * g.cout + gi * Coutg) * P, 1, P,
                     (bias + gi * Coutg) if bias != NULL else NULL, NULL, act, work, nth)


cdef void _dw_plane(const float* xc, const float* wc, float bias, float* yc, bint relu,
                    const ConvGeom* gp) noexcept nogil:
    """One output plane of a depthwise conv: y := bias + sum over taps of w[tap] * (shifted x), row by row, each tap
    applied over the range of ow where it reads inside x (contiguous and vectorisable when the W stride is 1)."""
    cdef ConvGeom g = gp[0]   # local copy: the fields stay in registers
    cdef Py_ssize_t od, oh, ow, a, b, e, idd, ih, off, lo, hi
    cdef float wv
    cdef float* yrow
    cdef const float* xrow
    for od in range(g.Do):
        for oh in range(g.Ho):
            yrow = yc + (od * g.Ho + oh) * g.Wo
            for ow in range(g.Wo):
                yrow[ow] = bias
            for a in range(g.kd):
                idd = od * g.sd - g.pd + a * g.dd
                if idd < 0 or idd >= g.D:
                    continue
                for b in range(g.kh):
                    ih = oh * g.sh - g.ph + b * g.dh
                    if ih < 0 or ih >= g.H:
                        continue
                    xrow = xc + (idd * g.H + ih) * g.W
                    for e in range(g.kw):
                        wv = wc[(a * g.kh + b) * g.kw + e]
                        off = e * g.dw - g.pw          # input column of ow is ow*sw + off
                        lo = 0 if off >= 0 else (g.sw - 1 - off) // g.sw
                        hi = (g.W - 1 - off) // g.sw + 1 if g.W - 1 - off >= 0 else 0
                        hi = min(hi, g.Wo)
                        if g.sw == 1:
                            for ow in range(lo, hi):
                                yrow[ow] = yrow[ow] + wv * xrow[ow + off]
                        else:
                            for ow in range(lo, hi):
                                yrow[ow] = yrow[ow] + wv * xrow[ow * g.sw + off]
            if relu:
                for ow in range(g.Wo):
                    yrow[ow] = yrow[ow] if yrow[ow] > 0 else 0.0


# Depthwise with depth kernel 1 (1-D, 2-D, and 3-D with kd == 1), one thread per input plane (the channel multiplier's
# output planes share it); the bounds-checked loop _dw_plane above handles kd > 1. Two paths, both built on flattened
# runs: over a whole block of rows, tap (b, e) reads ONE contiguous stretch of its source at a fixed offset, so gcc
# vectorises the loop across row ends instead of running short per-row loops.
#
# 1. Stride 1 with Wo == W ('same' width, the MobileNet case): x is read in place, no copy. Flattened,
#        y[i] = bias + sum_(b, e) w[b, e] * x[i + (b*dh - ph)*W + e*dw - pw]
#    over the rows whose kernel rows all lie inside x; at the first / last pw / pe columns of a row the taps read the
#    neighbouring row instead of padding. 3x3 kernels (the 9 weights in registers) drop those kernel columns with a
#    per-output column-mask word (a select, so an inf there cannot leak as nan), and run the top / bottom rows the
#    same way with a zero row standing in for the kernel rows outside x; other kernels recompute the border columns
#    with bounds checks. Only a handful of border points per plane are computed one by one.
# 2. Everything else: a padded, phase-split copy of the input plane (the "dw buffer", per thread), split into sh*sw
#    sub-planes by row and column phase, each Hq x Wq:
#        sub[pr, pc][r, j] = x[r*sh + pr - ph, j*sw + pc - pw]          (0 outside x)
#    Tap (b, e) of output (oh, ow) reads sub[tb % sh, te % sw][oh + tb // sh, ow + te // sw] (tb = b*dh, te = e*dw):
#    with the output at the sub-plane pitch (t[oh*Wq + ow], a block of rows that stays in L1), every tap is one
#    contiguous run with no bounds checks, for any pads, stride and dilation. The Wq - Wo extra columns per row are
#    dropped when t is copied into y (fused relu). 3x3 stride 2 has its own loop over the four sub-planes; other 3x3s
#    keep the 9 weights in registers; other kernels add 3 taps per pass.
# Each path adds the bias first and the taps in a fixed order per output, so results do not depend on the thread count.

from libc.stdlib cimport calloc

cdef extern from *:
    # t never overlaps the dw buffer it is computed from: without restrict gcc gives up vectorising the 9-tap loop
    # (more pointer pairs than its runtime alias checks cover).
    ctypedef float* float_restrict "float * __restrict__"
    # Inlined into its caller, the 3x3 loop below runs out of registers (gcc spills its pointers): keep it apart.
    ctypedef int int_noinline "__attribute__((noinline)) int"


cdef enum:
    DW_BLOCK = 768                # floats of t per block of output rows (stays in L1 with its sources)
    DW_BLOCK_DIRECT = 1024        # floats per run of the masked direct path (3 masks of this size stay in L1)
    DW_MASK_MAX = 2048            # longest run of the masked direct path (int32 column masks)
    DW_BUF_MAX = 1 << 23          # floats per thread of a dw buffer (32 MB); larger ones use the bounds-checked loop


cdef struct DwBuf:
    Py_ssize_t Hq, Wq, SP          # sub-plane rows, columns (= the row pitch of t) and size Hq * Wq
    Py_ssize_t T                   # offset of t (one block of output rows at pitch Wq) in the per-thread buffer
    Py_ssize_t plane               # floats per thread (sub-planes, slack, t; rounded to 16)


cdef inline DwBuf _dw_buf_geom(const ConvGeom* g) noexcept nogil:
    cdef DwBuf d
    cdef Py_ssize_t Hp = (g.Ho - 1) * g.sh + (g.kh - 1) * g.dh + 1, Wp = (g.Wo - 1) * g.sw + (g.kw - 1) * g.dw + 1
    d.Hq = (Hp + g.sh - 1) // g.sh
    d.Wq = (Wp + g.sw - 1) // g.sw
    d.SP = d.Hq * d.Wq
    # the dropped columns of the last rows read up to Wq - 1 floats past the last sub-plane: zeroed slack before t
    d.T = (g.sh * g.sw * d.SP + d.Wq + 15) // 16 * 16
    d.plane = (d.T + max(DW_BLOCK, d.Wq) + 15) // 16 * 16
    return d


cdef inline Py_ssize_t _dw_buf_floats(const ConvGeom* g) noexcept nogil:
    """Floats of one dw buffer, or -1 when it would be too large (DW_BUF_MAX) or its size overflows."""
    cdef double est = (<double>(g.Ho - 1) * g.sh + (g.kh - 1) * g.dh + g.sh) * ((<double>(g.Wo - 1) * g.sw
                      + (g.kw - 1) * g.dw + g.sw)) + <double>g.Ho * ((g.Wo - 1) * g.sw + (g.kw - 1) * g.dw + g.sw)
    if est > DW_BUF_MAX:
        return -1
    return _dw_buf_geom(g).plane


cdef void _dw_fill(const float* xp, const ConvGeom* g, const DwBuf* d, float* buf) noexcept nogil:
    """buf := the padded, phase-split copy of the input plane xp (H x W): all sh*sw sub-planes, every element."""
    cdef Py_ssize_t pr, pc, r, r2, ih, off, lo, hi, j, Wq = d.Wq, sh = g.sh, sw = g.sw
    cdef float* dst
    cdef float* dst1
    cdef const float* src
    cdef Py_ssize_t jlo, jhi
    if sw == 2:
        # both column phases of a row in one pass: dst[j] = X(2j - pw), dst1[j] = X(2j + 1 - pw); inside
        # [jlo, jhi) both read inside the row (a plain deinterleave, vectorised), the few others are checked
        jlo = min((g.pw + 1) // 2, Wq)
        # (cdivision: C division truncates toward 0, so a negative numerator -- W == 1 with pw == 0 -- must not
        # reach the division; no j has both columns inside then)
        jhi = max(jlo, min((g.W - 2 + g.pw) // 2 + 1, Wq)) if g.W - 2 + g.pw >= 0 else jlo
        for r in range(d.Hq * sh):
            r2 = r // sh if sh != 2 else r >> 1      # no division per row in the common stride-2 case
            pr = r - r2 * sh
            dst = buf + (pr * 2) * d.SP + r2 * Wq
            dst1 = dst + d.SP
            ih = r - g.ph
            if ih < 0 or ih >= g.H:
                memset(dst, 0, Wq * sizeof(float))
                memset(dst1, 0, Wq * sizeof(float))
                continue
            src = xp + ih * g.W - g.pw          # src[c] = x[ih, c - pw] for padded column c
            for j in range(jlo):
                dst[j] = src[2 * j] if 0 <= 2 * j - g.pw < g.W else 0.0
                dst1[j] = src[2 * j + 1] if 0 <= 2 * j + 1 - g.pw < g.W else 0.0
            for j in range(jlo, jhi):
                dst[j] = src[2 * j]
                dst1[j] = src[2 * j + 1]
            for j in range(jhi, Wq):
                dst[j] = src[2 * j] if 0 <= 2 * j - g.pw < g.W else 0.0
                dst1[j] = src[2 * j + 1] if 0 <= 2 * j + 1 - g.pw < g.W else 0.0
        return
    for pc in range(sw):
        off = pc - g.pw                  # dst[j] = src[j*sw + off] where 0 <= j*sw + off < W
        lo = 0 if off >= 0 else min((sw - 1 - off) // sw, Wq)
        hi = min((g.W - 1 - off) // sw + 1, Wq) if g.W - 1 - off >= 0 else 0
        hi = max(hi, lo)
        for pr in range(sh):
            for r2 in range(d.Hq):
                dst = buf + (pr * sw + pc) * d.SP + r2 * Wq
                ih = r2 * sh + pr - g.ph
                if ih < 0 or ih >= g.H:
                    for j in range(Wq):
                        dst[j] = 0.0
                    continue
                src = xp + ih * g.W + off
                for j in range(lo):
                    dst[j] = 0.0
                if sw == 1:
                    for j in range(lo, hi):
                        dst[j] = src[j]
                elif sw == 2:
                    for j in range(lo, hi):
                        dst[j] = src[2 * j]
                else:
                    for j in range(lo, hi):
                        dst[j] = src[j * sw]
                for j in range(hi, Wq):
                    dst[j] = 0.0


cdef inline void _dw_taps9(float_restrict t, const float* const* p, const float* w, float bias,
                           Py_ssize_t n) noexcept nogil:
    """t[i] := bias + sum_k w[k] * p[k][i], k = 0..8 (in that order)."""
    cdef const float* p0 = p[0]
    cdef const float* p1 = p[1]
    cdef const float* p2 = p[2]
    cdef const float* p3 = p[3]
    cdef const float* p4 = p[4]
    cdef const float* p5 = p[5]
    cdef const float* p6 = p[6]
    cdef const float* p7 = p[7]
    cdef const float* p8 = p[8]
    cdef float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8]
    cdef Py_ssize_t i
    for i in range(n):
        t[i] = (bias + w0 * p0[i] + w1 * p1[i] + w2 * p2[i] + w3 * p3[i] + w4 * p4[i] + w5 * p5[i]
                + w6 * p6[i] + w7 * p7[i] + w8 * p8[i])


cdef inline void _dw_taps9_masked(float_restrict t, const float* const* p, const float* w, float bias,
                                  const int* mb, Py_ssize_t n) noexcept nogil:
    """t[i] := bias + sum over kernel columns e of (bit e of mb[i] clear ? sum_b w[3b + e] * p[3b + e][i] : 0): 3x3
    taps in the flattened plane, kernel column e dropped where it falls outside the row (bit e of mb[i] set)."""
    cdef const float* p0 = p[0]
    cdef const float* p1 = p[1]
    cdef const float* p2 = p[2]
    cdef const float* p3 = p[3]
    cdef const float* p4 = p[4]
    cdef const float* p5 = p[5]
    cdef const float* p6 = p[6]
    cdef const float* p7 = p[7]
    cdef const float* p8 = p[8]
    cdef float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8]
    cdef float s0, s1, s2
    cdef int m
    cdef Py_ssize_t i
    for i in range(n):
        m = mb[i]
        s0 = w0 * p0[i] + w3 * p3[i] + w6 * p6[i]
        s1 = w1 * p1[i] + w4 * p4[i] + w7 * p7[i]
        s2 = w2 * p2[i] + w5 * p5[i] + w8 * p8[i]
        t[i] = bias + (s0 if (m & 1) == 0 else <float>0.0) + (s1 if (m & 2) == 0 else <float>0.0) \
            + (s2 if (m & 4) == 0 else <float>0.0)


cdef int_noinline _dw_rows3_masked(float_restrict t, const float* r0, const float* r1, const float* r2,
                                   const float* w, float bias, const int* mb, Py_ssize_t n) noexcept nogil:
    """_dw_taps9_masked for column dilation 1 (p[3b + e] = r_b + e): every load is one of four pointers plus a
    constant, so the loop keeps all its pointers in registers."""
    cdef float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8]
    cdef float s0, s1, s2
    cdef int m
    cdef Py_ssize_t i
    for i in range(n):
        m = mb[i]
        s0 = w0 * r0[i] + w3 * r1[i] + w6 * r2[i]
        s1 = w1 * r0[i + 1] + w4 * r1[i + 1] + w7 * r2[i + 1]
        s2 = w2 * r0[i + 2] + w5 * r1[i + 2] + w8 * r2[i + 2]
        t[i] = bias + (s0 if (m & 1) == 0 else <float>0.0) + (s1 if (m & 2) == 0 else <float>0.0) \
            + (s2 if (m & 4) == 0 else <float>0.0)
    return 0


cdef int_noinline _dw_s2_3x3(float_restrict t, const float* A, const float* B, const float* C, const float* D,
                             const float* A2, const float* B2, const float* w, float bias, Py_ssize_t n) noexcept nogil:
    """_dw_taps9 for a 3x3 kernel at stride 2 (dilation 1) from the four phase sub-planes: rows 0 / 2 of the kernel
    read sub-planes (0, 0) and (0, 1) (A, B; A2, B2 one sub-plane row lower), row 1 reads (1, 0) and (1, 1) (C, D)."""
    cdef float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3], w4 = w[4], w5 = w[5], w6 = w[6], w7 = w[7], w8 = w[8]
    cdef Py_ssize_t i
    for i in range(n):
        t[i] = (bias + w0 * A[i] + w1 * B[i] + w2 * A[i + 1] + w3 * C[i] + w4 * D[i] + w5 * C[i + 1]
                + w6 * A2[i] + w7 * B2[i] + w8 * A2[i + 1])
    return 0


cdef inline void _dw_taps3(float_restrict t, const float* p0, const float* p1, const float* p2, float w0, float w1,
                           float w2, Py_ssize_t n) noexcept nogil:
    """t[i] += w0 * p0[i] + w1 * p1[i] + w2 * p2[i] (added in that order)."""
    cdef Py_ssize_t i
    for i in range(n):
        t[i] = t[i] + w0 * p0[i] + w1 * p1[i] + w2 * p2[i]


cdef inline void _dw_tap1(float_restrict t, const float* p0, float w0, Py_ssize_t n) noexcept nogil:
    """t[i] += w0 * p0[i]."""
    cdef Py_ssize_t i
    for i in range(n):
        t[i] = t[i] + w0 * p0[i]


cdef void _dw_plane_buf(const float* buf, const DwBuf* d, const float* wc, float bias, float* yc, bint relu,
                        const ConvGeom* g) noexcept nogil:
    """One output plane (Ho x Wo) of a depthwise conv with depth kernel 1, from the dw buffer of its input plane.
    Taps are added in (b, e) order after the bias on every path. Output rows go in blocks of R through t (R * Wq
    floats, stays in L1), then into y without the dropped columns."""
    cdef Py_ssize_t Wq = d.Wq, Wo = g.Wo, KS = g.kh * g.kw, k, kk, b, e, tb, te, i, oh, oh0, R, n
    cdef const float* p[9]
    cdef float* t = <float*>buf + d.T
    cdef float* dst
    cdef float v
    cdef bint s2_3x3 = g.kh == 3 and g.kw == 3 and g.sh == 2 and g.sw == 2 and g.dh == 1 and g.dw == 1
    oh0 = 0
    while oh0 < g.Ho:
        R = min(max(1, DW_BLOCK // Wq), g.Ho - oh0)
        n = R * Wq
        if KS != 9:
            for i in range(n):
                t[i] = bias
        k = 0
        kk = 0
        for b in range(g.kh):
            tb = b * g.dh
            for e in range(g.kw):
                te = e * g.dw
                p[k] = buf + ((tb % g.sh) * g.sw + te % g.sw) * d.SP + (oh0 + tb // g.sh) * Wq + te // g.sw
                k += 1
                kk += 1
                if KS == 9:
                    if k == 9 and s2_3x3:
                        _dw_s2_3x3(t, p[0], p[1], p[3], p[4], p[6], p[7], wc, bias, n)
                    elif k == 9:
                        _dw_taps9(t, p, wc, bias, n)
                elif k == 3:
                    _dw_taps3(t, p[0], p[1], p[2], wc[kk - 3], wc[kk - 2], wc[kk - 1], n)
                    k = 0
        if KS != 9:
            for i in range(k):
                _dw_tap1(t, p[i], wc[KS - k + i], n)
        for oh in range(R):
            dst = yc + (oh0 + oh) * Wo
            if relu:
                for i in range(Wo):
                    v = t[oh * Wq + i]
                    dst[i] = v if v > 0 else 0.0
            else:
                for i in range(Wo):
                    dst[i] = t[oh * Wq + i]
        oh0 += R


cdef extern from "_native/depthwise3x3.h":
    enum:
        DW3_SIMD "ONNXEP_DW3_SIMD"
    void dw3x3_plane "onnxep_dw3x3_plane"(const float* x, Py_ssize_t H, Py_ssize_t W, const float* w, float bias,
                                          float* y, Py_ssize_t Ho, Py_ssize_t Wo, Py_ssize_t sh, Py_ssize_t sw,
                                          Py_ssize_t ph, Py_ssize_t pw, int relu) noexcept nogil


cdef inline bint _dw3_ok(const ConvGeom* g) noexcept nogil:
    """The intrinsics 3x3 plane kernel applies: AVX-512, 2-D, 3x3, no dilation, column stride 1 or 2."""
    return (DW3_SIMD and g.D == 1 and g.Do == 1 and g.kd == 1 and g.pd == 0 and g.kh == 3 and g.kw == 3
            and g.dh == 1 and g.dw == 1 and (g.sw == 1 or g.sw == 2))


cdef struct Dw3Job:
    const float* x
    const float* w
    const float* bias
    float* y
    bint relu
    const ConvGeom* g


cdef void _dw3_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    """Output plane t = n*cout + oc through onnxep_dw3x3_plane."""
    cdef Dw3Job* j = <Dw3Job*>p
    cdef const ConvGeom* g = j.g
    cdef Py_ssize_t n = t // g.cout, oc = t - n * g.cout
    dw3x3_plane(j.x + (n * g.C + oc // (g.cout // g.group)) * g.H * g.W, g.H, g.W, j.w + oc * 9,
                j.bias[oc] if j.bias != NULL else 0.0, j.y + t * g.Ho * g.Wo, g.Ho, g.Wo, g.sh, g.sw, g.ph, g.pw,
                j.relu)


cdef void _dw3_all(Py_ssize_t N, const float* x, const float* w, const float* bias, float* y, bint relu,
                   const ConvGeom* g, int nth) noexcept nogil:
    """Every output plane (n, oc) through onnxep_dw3x3_plane, planes taken dynamically by nth threads."""
    cdef Dw3Job job
    job.x, job.w, job.bias, job.y, job.relu, job.g = x, w, bias, y, relu, g
    parallel_for(N * g.cout, nth, _dw3_task, &job)


cdef inline bint _dw_direct_ok(const ConvGeom* g) noexcept nogil:
    """Stride 1 with 'same' width (Wo == W): x itself has the pitch of y, no padded copy is needed."""
    return g.sh == 1 and g.sw == 1 and g.Wo == g.W and g.Ho >= 1


cdef void _dw_row_checked(const float* xc, const float* wc, float bias, float* yrow, Py_ssize_t oh, Py_ssize_t ow0,
                          Py_ssize_t ow1, const ConvGeom* g) noexcept nogil:
    """yrow[ow] for ow in [ow0, ow1) of output row oh (stride 1, 2-D plane xc): bias, then the taps that read inside x,
    in (b, e) order."""
    cdef Py_ssize_t b, e, ih, ow, lo, hi, off
    cdef const float* xrow
    cdef float wv
    for ow in range(ow0, ow1):
        yrow[ow] = bias
    for b in range(g.kh):
        ih = oh - g.ph + b * g.dh
        if ih < 0 or ih >= g.H:
            continue
        xrow = xc + ih * g.W
        for e in range(g.kw):
            off = e * g.dw - g.pw              # input column of ow is ow + off
            lo = max(ow0, -off)
            hi = min(ow1, g.W - off)
            wv = wc[b * g.kw + e]
            for ow in range(lo, hi):
                yrow[ow] = yrow[ow] + wv * xrow[ow + off]


cdef inline Py_ssize_t _dw_mask_len(const ConvGeom* g) noexcept nogil:
    """Run length L of the masked 3x3 direct path: whole rows, about DW_BLOCK_DIRECT floats."""
    return max(<Py_ssize_t>1, DW_BLOCK_DIRECT // g.W) * g.W


cdef void _dw_masks(const ConvGeom* g, Py_ssize_t L, int* mb) noexcept nogil:
    """mb[j] := bit e set where kernel column e of output column (pw' + j) % W reads outside the row, for j < L (runs
    start at column pw' = min(pw, Wo), where the direct path's flattened runs start)."""
    cdef Py_ssize_t e, j, col, c0 = min(g.pw, g.Wo)     # output column of run position j (no division per element)
    cdef int m
    if c0 == g.W:                     # pw >= W: the runs start at column 0 of the next row
        c0 = 0
    for j in range(L):
        m = 0
        for e in range(3):
            col = c0 + e * g.dw - g.pw
            if col < 0 or col >= g.W:
                m = m | (1 << e)
        mb[j] = m
        c0 += 1
        if c0 == g.W:
            c0 = 0


cdef inline float _dw_point(const float* xc, const float* wc, float bias, Py_ssize_t oh, Py_ssize_t ow,
                            const ConvGeom* g) noexcept nogil:
    """y[oh, ow] of a 2-D plane: bias, then the taps that read inside x, in (b, e) order."""
    cdef Py_ssize_t b, e, ih, iw
    cdef float v = bias
    for b in range(g.kh):
        ih = oh - g.ph + b * g.dh
        if 0 <= ih < g.H:
            for e in range(g.kw):
                iw = ow - g.pw + e * g.dw
                if 0 <= iw < g.W:
                    v = v + wc[b * g.kw + e] * xc[ih * g.W + iw]
    return v


cdef inline void _dw_masked_run(float* t, const float* r0, const float* r1, const float* r2, const float* wc,
                                float bias, const int* masks, Py_ssize_t n, const ConvGeom* g) noexcept nogil:
    """t[i] for a run starting at output column min(pw, Wo): kernel row b reads r_b[i + e*dw]."""
    cdef const float* p[9]
    cdef Py_ssize_t e
    if g.dw == 1:
        _dw_rows3_masked(t, r0, r1, r2, wc, bias, masks, n)
        return
    for e in range(3):
        p[e] = r0 + e * g.dw
        p[3 + e] = r1 + e * g.dw
        p[6 + e] = r2 + e * g.dw
    _dw_taps9_masked(t, p, wc, bias, masks, n)


cdef void _dw_fix_row(const float* xc, const float* wc, float bias, float* yc, const int* masks,
                      const float* zeros, Py_ssize_t oh, bint interior, Py_ssize_t cl, Py_ssize_t cr,
                      const ConvGeom* g) noexcept nogil:
    """Row oh of _dw_plane_direct outside its runs: an interior row only needs its border columns; a top / bottom row
    is a single-row masked run (3x3) or a bounds-checked row."""
    cdef Py_ssize_t W = g.W, Wo = g.Wo, b, ih, ow
    cdef const float* r[3]
    if not interior:
        if masks != NULL and Wo - cr - cl > 0:
            for b in range(3):
                ih = oh + b * g.dh - g.ph
                r[b] = xc + ih * W + cl - g.pw if 0 <= ih < g.H else zeros
            _dw_masked_run(yc + oh * Wo + cl, r[0], r[1], r[2], wc, bias, masks, Wo - cr - cl, g)
        else:
            _dw_row_checked(xc, wc, bias, yc + oh * Wo, oh, 0, Wo, g)
            return
    for ow in range(cl):
        yc[oh * Wo + ow] = _dw_point(xc, wc, bias, oh, ow, g)
    for ow in range(max(cl, Wo - cr), Wo):
        yc[oh * Wo + ow] = _dw_point(xc, wc, bias, oh, ow, g)


cdef void _dw_plane_direct(const float* xc, const float* wc, float bias, float* yc, const int* masks, Py_ssize_t L,
                           const float* zeros, const ConvGeom* g) noexcept nogil:
    """One output plane of a stride-1 depthwise conv with Wo == W, read straight from the input plane xc: flattened,
    y[i] = bias + sum w[b, e] * x[i + (b*dh - ph)*W + e*dw - pw] is one contiguous run over all rows whose taps stay
    inside x; there it is right except in the pw / pe border columns (which read the neighbouring row): those are
    recomputed with bounds checks, and so are the top / bottom rows.
    3x3 kernels (masks != NULL) instead drop the out-of-row kernel columns with the masks (see _dw_masks), in runs of
    L = a whole number of rows; their top / bottom rows are single-row runs with `zeros` (>= Wo + 2*dw zero floats)
    standing in for the kernel rows outside x. Only the pw / pe border columns of the first and last rows of the runs
    are left to the bounds-checked code."""
    cdef Py_ssize_t W = g.W, Wo = g.Wo, KS = g.kh * g.kw, cl = min(g.pw, Wo), cr, oh_lo, oh_hi, i0, i1, n
    cdef Py_ssize_t b, e, k, kk, i, oh, ow, ih
    cdef const float* p[9]
    cdef const float* r[3]
    cdef float* t
    cr = max(<Py_ssize_t>0, min((g.kw - 1) * g.dw - g.pw, Wo))
    oh_lo = min(g.ph, g.Ho)
    oh_hi = max(oh_lo, min(g.H - 1 - (g.kh - 1) * g.dh + g.ph + 1, g.Ho))
    if oh_hi > oh_lo:
        i0 = oh_lo * W + cl
        i1 = (oh_hi - 1) * W + Wo - cr
        n = i1 - i0
        if masks != NULL and n > 0:
            i = i0
            while i < i1:
                _dw_masked_run(yc + i, xc + i - g.ph * W - g.pw, xc + i + (g.dh - g.ph) * W - g.pw,
                               xc + i + (2 * g.dh - g.ph) * W - g.pw, wc, bias, masks, min(L, i1 - i), g)
                i += L
        elif n > 0:
            t = yc + i0
            if KS != 9:
                for i in range(n):
                    t[i] = bias
            k = 0
            kk = 0
            for b in range(g.kh):
                for e in range(g.kw):
                    p[k] = xc + i0 + (b * g.dh - g.ph) * W + e * g.dw - g.pw
                    k += 1
                    kk += 1
                    if KS == 9:
                        if k == 9:
                            _dw_taps9(t, p, wc, bias, n)
                    elif k == 3:
                        _dw_taps3(t, p[0], p[1], p[2], wc[kk - 3], wc[kk - 2], wc[kk - 1], n)
                        k = 0
            if KS != 9:
                for i in range(k):
                    _dw_tap1(t, p[i], wc[KS - k + i], n)
    if masks == NULL:
        for oh in range(oh_lo, oh_hi):
            _dw_fix_row(xc, wc, bias, yc, masks, zeros, oh, True, cl, cr, g)
    elif oh_hi > oh_lo:
        _dw_fix_row(xc, wc, bias, yc, masks, zeros, oh_lo, True, cl, cr, g)
        if oh_hi - 1 > oh_lo:
            _dw_fix_row(xc, wc, bias, yc, masks, zeros, oh_hi - 1, True, cl, cr, g)
    for oh in range(oh_lo):
        _dw_fix_row(xc, wc, bias, yc, masks, zeros, oh, False, cl, cr, g)
    for oh in range(oh_hi, g.Ho):
        _dw_fix_row(xc, wc, bias, yc, masks, zeros, oh, False, cl, cr, g)


cdef void _dw_slices(Py_ssize_t t, const float* x, const float* w, const float* bias, float* y, bint relu,
                     const ConvGeom* g, const DwBuf* d, float* buf, const float* masks, Py_ssize_t L) noexcept nogil:
    """All output planes fed by input plane t = n*C + c (channels c*mult .. c*mult + mult-1, every output depth)."""
    cdef Py_ssize_t mult = g.cout // g.group, n = t // g.C, c = t % g.C, HW = g.H * g.W, P2 = g.Ho * g.Wo
    cdef Py_ssize_t KS = g.kh * g.kw, od, idd, k, oc, i
    cdef float bv
    cdef float* yp
    cdef bint direct = _dw_direct_ok(g)
    for od in range(g.Do):
        idd = od * g.sd - g.pd
        if 0 <= idd < g.D and not direct:
            _dw_fill(x + (t * g.D + idd) * HW, g, d, buf)
        for k in range(mult):
            oc = c * mult + k
            bv = bias[oc] if bias != NULL else 0.0
            yp = y + ((n * g.cout + oc) * g.Do + od) * P2
            if 0 <= idd < g.D and direct:
                _dw_plane_direct(x + (t * g.D + idd) * HW, w + oc * KS, bv, yp, <const int*>masks, L,
                                 masks + DW_MASK_MAX, g)
                if relu:
                    for i in range(P2):
                        yp[i] = yp[i] if yp[i] > 0 else 0.0
            elif 0 <= idd < g.D:
                _dw_plane_buf(buf, d, w + oc * KS, bv, yp, relu, g)
            else:                      # the whole depth slice reads padding
                if relu and bv < 0:
                    bv = 0.0
                for i in range(P2):
                    yp[i] = bv


cdef void conv_depthwise_raw(Py_ssize_t N, const float* x, const float* w, const float* bias, float* y, bint relu,
                             const ConvGeom* g, float* bufs, Py_ssize_t buf_stride, const float* masks, Py_ssize_t L,
                             int nth) noexcept nogil:
    """Direct conv for one input channel per group: y[n, oc] from x[n, oc // (cout/group)] and w[oc] (kd*kh*kw).
    bufs: nth dw buffers of buf_stride floats each (zeroed once), or NULL to use the bounds-checked loop; masks: the
    3 x L column masks of the masked 3x3 direct path (_dw_masks), or NULL."""
    cdef Py_ssize_t mult = g.cout // g.group, KS = g.kd * g.kh * g.kw, P = g.Do * g.Ho * g.Wo
    cdef Py_ssize_t DHW = g.D * g.H * g.W, t, n, oc
    cdef DwBuf d
    cdef ConvNchwJob job
    job.x, job.w, job.bias, job.y, job.relu, job.g, job.bufs, job.masks = x, w, bias, y, relu, g, bufs, masks
    job.buf_stride, job.L = buf_stride, L
    if bufs != NULL:
        d = _dw_buf_geom(g)
        job.d = &d
        parallel_for(N * g.C, nth, _dw_slices_task, &job)
        return
    parallel_for(N * g.cout, nth, _dw_plane_task, &job)


cdef void _dw_slices_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef ConvNchwJob* j = <ConvNchwJob*>p
    _dw_slices(t, j.x, j.w, j.bias, j.y, j.relu, j.g, j.d, j.bufs + <Py_ssize_t>tid * j.buf_stride, j.masks, j.L)


cdef void _dw_plane_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef ConvNchwJob* j = <ConvNchwJob*>p
    cdef const ConvGeom* g = j.g
    cdef Py_ssize_t n = t // g.cout, oc = t % g.cout
    _dw_plane(j.x + (n * g.C + oc // (g.cout // g.group)) * g.D * g.H * g.W, j.w + oc * g.kd * g.kh * g.kw,
              j.bias[oc] if j.bias != NULL else 0.0, j.y + t * g.Do * g.Ho * g.Wo, j.relu, g)


# ----------------------------------------------------------------------------------------------- Python wrappers

cdef ConvGeom _conv_geom(tuple xshape, Py_ssize_t cout, Py_ssize_t group, tuple kernel, tuple strides,
                         tuple dilations, tuple pads, tuple out_spatial) except *:
    cdef ConvGeom g
    if len(xshape) != 5 or len(kernel) != 3 or len(strides) != 3 or len(dilations) != 3 or len(pads) != 3 \
            or len(out_spatial) != 3:
        raise ValueError("conv: xshape must have 5 entries (N, C, D, H, W) and kernel/strides/dilations/pads/"
                         "out_spatial 3 each")
    g.C, g.D, g.H, g.W = xshape[1], xshape[2], xshape[3], xshape[4]
    g.cout, g.group = cout, group
    g.kd, g.kh, g.kw = kernel
    g.sd, g.sh, g.sw = strides
    g.dd, g.dh, g.dw = dilations
    g.pd, g.ph, g.pw = pads
    g.Do, g.Ho, g.Wo = out_spatial
    if group < 1 or g.C % group or cout % group:
        raise ValueError(f"conv: group={group} must divide C={g.C} and cout={cout}")
    if min(g.kd, g.kh, g.kw, g.sd, g.sh, g.sw, g.dd, g.dh, g.dw) < 1 or min(g.pd, g.ph, g.pw) < 0:
        raise ValueError(f"conv: kernel/strides/dilations must be >= 1 and pads >= 0, got kernel={kernel} "
                         f"strides={strides} dilations={dilations} pads={pads}")
    if min(g.Do, g.Ho, g.Wo) < 0:
        raise ValueError(f"conv: negative output size {out_spatial}")
    return g


def conv_pack_weight_size(Py_ssize_t cout, Py_ssize_t kc, Py_ssize_t group):
    """float32 elements of a conv weight (cout x kc per group, kc = Cin_g*kernel size) packed per group."""
    if group < 1 or cout % group or kc < 0:
        raise ValueError(f"conv_pack_weight_size: bad cout={cout}, kc={kc}, group={group}")
    return group * sgemm_pack_b_len(kc, cout // group)


def conv_pack_weight(const float[::1] w, Py_ssize_t cout, Py_ssize_t group, float[::1] out):
    """out := w (cout x kc, flattened) packed per group as the B operand (W[g]^T, kc x cout/group)."""
    cdef Py_ssize_t kc, coutg, gi, blen
    if group < 1 or cout < 1 or cout % group or w.shape[0] % cout:
        raise ValueError(f"conv_pack_weight: {w.shape[0]} weights do not split into cout={cout}, group={group}")
    kc = w.shape[0] // cout
    coutg = cout // group
    blen = sgemm_pack_b_len(kc, coutg)
    if out.shape[0] != group * blen:
        raise ValueError(f"conv_pack_weight: out has {out.shape[0]} elements, expected {group * blen}")
    if kc == 0:
        return
    with nogil:
        for gi in range(group):
            sgemm_pack_b_raw(kc, coutg, &w[gi * coutg * kc], 1, kc, &out[gi * blen])


def conv_f32(const float[::1] x, tuple xshape, const float[::1] w_packed, Py_ssize_t cout, Py_ssize_t group,
             tuple kernel, tuple strides, tuple dilations, tuple pads, tuple out_spatial,
             const float[::1] bias, float[::1] y, bint relu=False, int nthreads=0, activation=None):
    """y := act(conv(x, W) [+ bias]), NCDHW (act: see make_act; Relu when relu is set); W packed by conv_pack_weight. xshape = (N, C, D, H, W); kernel,
    strides, dilations, begin pads and out_spatial are (d, h, w) triples."""
    cdef ConvGeom g = _conv_geom(xshape, cout, group, kernel, strides, dilations, pads, out_spatial)
    cdef Act act = make_act(activation, relu)
    cdef Py_ssize_t N = xshape[0], Cg, Coutg, Kc, P
    cdef int rc
    cdef const float* bp = NULL
    cdef const float* xp
    cdef const float* bptr
    cdef float* yp
    Cg = g.C // group
    Coutg = cout // group
    Kc = Cg * g.kd * g.kh * g.kw
    P = g.Do * g.Ho * g.Wo
    if x.shape[0] != N * g.C * g.D * g.H * g.W:
        raise ValueError(f"conv_f32: x has {x.shape[0]} elements, shape {xshape} needs more or fewer")
    if y.shape[0] != N * cout * P:
        raise ValueError(f"conv_f32: y has {y.shape[0]} elements, expected {N * cout * P}")
    if w_packed.shape[0] != group * sgemm_pack_b_len(Kc, Coutg):
        raise ValueError(f"conv_f32: packed weight has {w_packed.shape[0]} elements, expected "
                         f"{group * sgemm_pack_b_len(Kc, Coutg)} ({SGEMM_FORMAT})")
    if bias is not None and bias.shape[0] != cout:
        raise ValueError(f"conv_f32: bias has {bias.shape[0]} elements, expected {cout}")
    if N * group == 0 or P == 0 or Coutg == 0:
        return
    if Kc > 0:
        bp = &w_packed[0]
    xp = &x[0] if x.shape[0] else NULL
    bptr = &bias[0] if bias is not None else NULL
    yp = &y[0]
    with nogil:
        rc = conv_nchw_exec(&g, N, xp, bp, bptr, yp, &act, nthreads)
    if rc != 0:
        raise MemoryError("conv_f32: cannot allocate the im2col workspace")


cdef int conv_nchw_exec(const ConvGeom* g, Py_ssize_t N, const float* xp, const float* bp, const float* bptr,
                        float* yp, const Act* act, int nthreads) noexcept nogil:
    """conv_f32's computation, its sizes checked by the caller (also the run loop's RL_CONV_NCHW): 0, or -1 when the
    workspace cannot be allocated (nothing written)."""
    cdef Py_ssize_t group = g.group, Cg = g.C // g.group, Coutg = g.cout // g.group, Kc, P, col_len, work_len
    cdef Py_ssize_t per_thread, t, total = N * g.group
    cdef int nth, nth_gemm
    cdef float* ws
    cdef ConvNchwJob job
    Kc = Cg * g.kd * g.kh * g.kw
    P = g.Do * g.Ho * g.Wo
    if total == 0 or P == 0 or Coutg == 0:
        return 0
    col_len = 0 if _conv_is_pointwise(g) or _conv_is_1d(g) else Kc * P
    # Small per-group GEMMs run one per thread over (image, group); big ones run one after another, each threaded.
    nth = conv_threads(P, Coutg, Kc, nthreads)
    if nth == 1 and total > 1 and <double>2.0 * P * Coutg * Kc * total >= CONV_MT_FLOPS:
        nth = <int>min(<Py_ssize_t>_nthreads(nthreads), total)
        nth_gemm = 1
    else:
        nth_gemm = nth
        nth = 1
    work_len = sgemm_work_len(nth_gemm)
    per_thread = col_len + work_len
    ws = <float*>malloc(nth * per_thread * sizeof(float))
    if ws == NULL:
        return -1
    if nth == 1:
        for t in range(total):
            _conv_one(t // group, t % group, xp, bp, bptr, yp, act, g, ws, ws + col_len, nth_gemm)
    else:
        job.x, job.bp, job.bias, job.y, job.act, job.g, job.col = xp, bp, bptr, yp, act, g, ws
        job.group, job.per_thread, job.col_len = group, per_thread, col_len
        parallel_for(total, nth, _conv_one_task, &job)
    free(ws)
    return 0


def conv_nchw_step_args(tuple xshape, Py_ssize_t cout, Py_ssize_t group, tuple kernel, tuple strides,
                        tuple dilations, tuple pads, tuple out_spatial):
    """The run loop's RL_CONV_NCHW integers for conv_f32's arguments (no activation): N, C, D, H, W, cout, group,
    then the kernel, strides, dilations, begin pads and output size triples (checked as conv_f32 checks them)."""
    cdef ConvGeom g = _conv_geom(xshape, cout, group, kernel, strides, dilations, pads, out_spatial)
    return [xshape[0], g.C, g.D, g.H, g.W, g.cout, g.group, g.kd, g.kh, g.kw, g.sd, g.sh, g.sw, g.dd, g.dh, g.dw,
            g.pd, g.ph, g.pw, g.Do, g.Ho, g.Wo]


cdef void _conv_one_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef ConvNchwJob* j = <ConvNchwJob*>p
    cdef float* mine = j.col + <Py_ssize_t>tid * j.per_thread
    _conv_one(t // j.group, t % j.group, j.x, j.bp, j.bias, j.y, j.act, j.g, mine, mine + j.col_len, 1)


def conv_depthwise_f32(const float[::1] x, tuple xshape, const float[::1] w, Py_ssize_t cout, Py_ssize_t group,
                       tuple kernel, tuple strides, tuple dilations, tuple pads, tuple out_spatial,
                       const float[::1] bias, float[::1] y, bint relu=False, int nthreads=0):
    """y := conv(x, w) [+ bias] [relu] for one input channel per group (C == group); w is (cout, 1, kd, kh, kw)."""
    cdef ConvGeom g = _conv_geom(xshape, cout, group, kernel, strides, dilations, pads, out_spatial)
    cdef Py_ssize_t N = xshape[0], P = g.Do * g.Ho * g.Wo
    cdef int nth
    if g.C != group:
        raise ValueError(f"conv_depthwise_f32: needs C == group, got C={g.C}, group={group}")
    if x.shape[0] != N * g.C * g.D * g.H * g.W or y.shape[0] != N * cout * P:
        raise ValueError(f"conv_depthwise_f32: x has {x.shape[0]} / y has {y.shape[0]} elements, shapes need "
                         f"{N * g.C * g.D * g.H * g.W} / {N * cout * P}")
    if w.shape[0] != cout * g.kd * g.kh * g.kw:
        raise ValueError(f"conv_depthwise_f32: w has {w.shape[0]} elements, expected {cout * g.kd * g.kh * g.kw}")
    if bias is not None and bias.shape[0] != cout:
        raise ValueError(f"conv_depthwise_f32: bias has {bias.shape[0]} elements, expected {cout}")
    if N * cout * P == 0:
        return
    # a depthwise flop costs more than a GEMM flop (copies, borders): threads pay off from a quarter of GEMM's threshold
    nth = conv_threads_flops(<double>8.0 * N * cout * P * g.kd * g.kh * g.kw, nthreads)
    nth = <int>min(<Py_ssize_t>nth, N * g.C)
    cdef const float* bptr = &bias[0] if bias is not None else NULL
    if dw_nchw_via_nhwc_ok(&g):
        dw_nchw_via_nhwc(N, &x[0], &w[0], bptr, &y[0], relu, &g, nth)
        return
    if _dw3_ok(&g):
        with nogil:
            _dw3_all(N, &x[0], &w[0], bptr, &y[0], relu, &g, <int>min(<Py_ssize_t>_nthreads(nthreads), N * cout)
                     if nth > 1 else 1)
        return
    cdef Py_ssize_t plane = _dw_buf_floats(&g) if g.kd == 1 else -1
    cdef Py_ssize_t L = 0
    if plane > 0 and _dw_direct_ok(&g):
        plane = 16                     # reads x in place: the buffers go unused
        if g.kh == 3 and g.kw == 3 and _dw_mask_len(&g) <= DW_MASK_MAX:
            L = _dw_mask_len(&g)
            plane = DW_MASK_MAX + g.Wo + 2 * g.dw + 16    # one copy of the masks and a zero row (shared)
    cdef float* bufs = NULL
    if plane > 0:
        # About one padded input plane and one output plane per thread; above DW_BUF_MAX floats (huge pads or
        # strides) the bounds-checked loop runs instead, with no allocation.
        bufs = <float*>calloc(plane if L else nth * plane, sizeof(float))
        if bufs == NULL:
            raise MemoryError(f"conv_depthwise_f32: cannot allocate {nth * plane * 4} bytes of padded planes")
    try:
        with nogil:
            if L:
                _dw_masks(&g, L, <int*>bufs)
            conv_depthwise_raw(N, &x[0], &w[0], bptr, &y[0], relu, &g, bufs, plane, bufs if L else NULL, L, nth)
    finally:
        free(bufs)
