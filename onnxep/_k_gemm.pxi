# SGEMM (packed B panels, BLIS style) and its packing functions.
#
#   C := act(alpha * op(A) @ B' + beta * C  [+ bias_col[j] | + bias_row[i]]  [+ R])
#
# B' is B packed once (the pre-packed weight format): K is cut into ceil(K/KC) blocks of almost equal size (_sgemm_kc);
# for each block of rows of B (starting at row k0), the columns are cut into NR-wide panels stored one after another,
# each panel kc x NR row-major and zero-padded past N. Block k0 starts at float offset k0 * Np (Np = N rounded up to
# NR), panel jp of it at k0 * Np + jp * NR * kc.
# A is packed per MC x KC block into MR-row panels (kc x MR column-major, zero-padded past M) in a per-thread workspace.
# The MR x NR micro-kernel multiplies one A panel by one B panel. In the avx512 (12 x 32) and avx2 (6 x 16) variants
# it is C intrinsics (onnxep_sgemm_uk below: accumulators in registers, one body per row count, masked column tails,
# the epilogue fused into the store); the generic variant keeps C loops (sgemm_ukernel) that gcc vectorises, storing
# through sgemm_store, which also serves C with strided columns when C must be read. Tiles of C (row block x a slab
# of NR panels) are independent: OpenMP splits them over threads in one parallel region, and every element of C is
# computed by one thread with the same K order whatever the thread count, so results do not depend on nthreads.

cdef extern from "_native/sgemm.h":
    ctypedef struct Act "onnxep_act":
        int kind
        float a
        float b
    enum:
        ACT_NONE "ONNXEP_ACT_NONE"
        ACT_RELU "ONNXEP_ACT_RELU"
        ACT_CLIP "ONNXEP_ACT_CLIP"
        ACT_LEAKY_RELU "ONNXEP_ACT_LEAKY_RELU"
        ACT_SIGMOID "ONNXEP_ACT_SIGMOID"
        ACT_HARD_SIGMOID "ONNXEP_ACT_HARD_SIGMOID"
        ACT_TANH "ONNXEP_ACT_TANH"
        ACT_HARD_SWISH "ONNXEP_ACT_HARD_SWISH"
        ACT_GELU "ONNXEP_ACT_GELU"
    float act1 "onnxep_act1"(const Act* act, float v) noexcept nogil
    enum:
        SGEMM_MR "ONNXEP_SGEMM_MR"
        SGEMM_NR "ONNXEP_SGEMM_NR"
        SGEMM_KC "ONNXEP_SGEMM_KC"
        SGEMM_MC "ONNXEP_SGEMM_MC"
        SGEMM_SIMD "ONNXEP_SGEMM_SIMD"
    void sgemm_ukernel_simd "onnxep_sgemm_uk"(Py_ssize_t mr, Py_ssize_t kc, Py_ssize_t nr, const float* a,
                                              const float* b, float* c, Py_ssize_t rsc, float alpha, float beta,
                                              const float* bias_col, const float* bias_row, const float* res,
                                              const Act* act, const float* pf) noexcept nogil
    void sgemm_row_simd "onnxep_sgemm_row"(Py_ssize_t kc, Py_ssize_t ncols, const float* a, const float* b, float* c,
                                           float alpha, float beta, const float* bias_col, const float* bias_row,
                                           const float* res, const Act* act, int pf) noexcept nogil
    void pack_rows_t "onnxep_pack_rows_t"(float* d, const float* const* srcs, Py_ssize_t n) noexcept nogil
    const float* ZEROS "onnxep_zeros"
    long cache_bytes "onnxep_cache_bytes"(int level, long dflt) noexcept nogil
    int uk_fast_on "onnxep_uk_fast_on"

from libc.stdlib cimport malloc, free, qsort

cdef extern from *:
    void __builtin_prefetch(const void* addr) noexcept nogil

cdef extern from "_native/transpose.h":
    # dst[a*ldb + b] := src[b*lda + a], a < na, b < nb (strides in elements of esz bytes; _k_transpose.pxi's too)
    void _gemm_tr_tile "onnxep_tr_tile"(int esz, const uint8_t* src, Py_ssize_t lda, uint8_t* dst, Py_ssize_t ldb,
                                        Py_ssize_t na, Py_ssize_t nb) noexcept nogil

# A tile of one row (batch-1 decoding's GEMMs) runs each K block's panels through one onnxep_sgemm_row call (on);
# sgemm_row_path(False): a micro-kernel call per panel, as for more rows (in-process A/B, tests; same bits)
cdef int _row_path_on = 1


def sgemm_row_path(on=None):
    """Whether a one-row tile of the SIMD SGEMM runs through onnxep_sgemm_row (see _row_path_on); `on` sets it.
    Returns the setting before the call."""
    global _row_path_on
    cdef int before = _row_path_on
    if on is not None:
        _row_path_on = 1 if on else 0
    return bool(before)


def sgemm_store_fast(on=None):
    """Whether the SIMD micro-kernels' epilogue takes its per-tile fast path (sgemm.h onnxep_uk_store_fast: full tiles
    of whole vectors, column bias, no / Relu / Clip activation, residual or not; on by default; same bits either
    way); `on` sets it. Returns the setting before the call (tests, in-process A/B)."""
    global uk_fast_on
    cdef int before = uk_fast_on
    if on is not None:
        uk_fast_on = 1 if on else 0
    return bool(before)


cdef enum:
    SGEMM_NC_MAX = 4096           # widest column slab (in columns) one tile covers
    SGEMM_MT_B_BYTES = 524288     # ... unless it has at most MR rows and B is this big (sgemm_threads)
    SGEMM_CT_COLS = 480           # columns of the scratch C tile used for strided-column C (multiple of 8, 16, 32)
    SGEMM_WORK_PER_THREAD = SGEMM_MC * SGEMM_KC + SGEMM_MC * SGEMM_CT_COLS

MR = SGEMM_MR
NR = SGEMM_NR
KC = SGEMM_KC
MC = SGEMM_MC
#: Names everything the packed-B layout depends on (the first half of the shared weight cache key).
SGEMM_FORMAT = (f"sgemm-b-panels:isa={ONNXEP_ISA_NAME.decode()}:mr={SGEMM_MR}:nr={SGEMM_NR}:kc={SGEMM_KC}"
                ":ksplit=even")


cdef inline Py_ssize_t _round_up(Py_ssize_t x, Py_ssize_t m) noexcept nogil:
    return (x + m - 1) // m * m


cdef inline Py_ssize_t _sgemm_kc(Py_ssize_t K, Py_ssize_t pc) noexcept nogil:
    """Length of the K block starting at pc: K is cut into ceil(K/KC) blocks of almost equal size (the first K % nb
    one longer), so no block is a thin remainder (e.g. K = 576 is 3 x 192, not 256 + 256 + 64)."""
    cdef Py_ssize_t nb = (K + SGEMM_KC - 1) // SGEMM_KC
    cdef Py_ssize_t base = K // nb, rem = K % nb
    return base + 1 if pc < rem * (base + 1) else base


cdef inline Py_ssize_t sgemm_pack_b_len(Py_ssize_t K, Py_ssize_t N) noexcept nogil:
    """Floats of packed B for a K x N matrix."""
    return K * _round_up(N, SGEMM_NR)


cdef void _sgemm_pack_b_panel(Py_ssize_t K, Py_ssize_t N, const float* b, Py_ssize_t rsb, Py_ssize_t csb,
                              float* out, Py_ssize_t pc, Py_ssize_t kc, Py_ssize_t jp) noexcept nogil:
    """Panel jp of the K block (pc, kc) of packed B (see sgemm_pack_b_raw)."""
    cdef Py_ssize_t Np = _round_up(N, SGEMM_NR), n0 = jp * SGEMM_NR, nr, k, j
    cdef float* p = out + pc * Np + jp * SGEMM_NR * kc
    cdef const float* src
    nr = min(<Py_ssize_t>SGEMM_NR, N - n0)
    for k in range(kc):
        src = b + (pc + k) * rsb + n0 * csb
        if csb == 1 and nr == SGEMM_NR:
            memcpy(p, src, SGEMM_NR * sizeof(float))
        elif csb == 1:
            for j in range(nr):
                p[j] = src[j]
        else:
            for j in range(nr):
                p[j] = src[j * csb]
        for j in range(nr, SGEMM_NR):
            p[j] = 0.0
        p += SGEMM_NR


cdef void sgemm_pack_b_raw(Py_ssize_t K, Py_ssize_t N, const float* b, Py_ssize_t rsb, Py_ssize_t csb,
                           float* out, int nth=1) noexcept nogil:
    """out := B (B[k, n] = b[k*rsb + n*csb]) in KC-block / NR-panel layout, zero-padded (nth threads over panels)."""
    cdef Py_ssize_t npanels = _round_up(N, SGEMM_NR) // SGEMM_NR, nblocks, t, pc, kc, base, rem, blk
    if K <= 0 or N <= 0:
        return
    nblocks = (K + SGEMM_KC - 1) // SGEMM_KC
    if nth <= 1 or nblocks * npanels < 2:
        pc = 0
        while pc < K:
            kc = _sgemm_kc(K, pc)
            for t in range(npanels):
                _sgemm_pack_b_panel(K, N, b, rsb, csb, out, pc, kc, t)
            pc += kc
        return
    cdef PackBJob job
    job.K, job.N, job.b, job.rsb, job.csb, job.out, job.npanels = K, N, b, rsb, csb, out, npanels
    job.base, job.rem = K // nblocks, K % nblocks
    parallel_for(nblocks * npanels, nth, _pack_b_task, &job)


cdef struct PackBJob:
    Py_ssize_t K, N, rsb, csb, npanels, base, rem
    const float* b
    float* out


cdef void _pack_b_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef PackBJob* j = <PackBJob*>p
    cdef Py_ssize_t blk = t // j.npanels
    # block blk of the even split (_sgemm_kc) starts at blk*base + min(blk, rem)
    _sgemm_pack_b_panel(j.K, j.N, j.b, j.rsb, j.csb, j.out, blk * j.base + min(blk, j.rem),
                        j.base + (1 if blk < j.rem else 0), t % j.npanels)


cdef void sgemm_pack_a_raw(Py_ssize_t mc, Py_ssize_t kc, const float* a, Py_ssize_t rsa, Py_ssize_t csa,
                           float* out) noexcept nogil:
    """out := the mc x kc block A[i, k] = a[i*rsa + k*csa] as MR-row panels (kc x MR each), zero-padded."""
    cdef Py_ssize_t ip, mr, i, k
    cdef float* p
    cdef const float* src
    if rsa == 1:  # A stored transposed (K x M): read each k's mc contiguous values once, scatter to the panels
        for k in range(kc):
            src = a + k * csa
            if k + 4 < kc:  # rows of A are csa floats apart (pages apart for conv): fetch ahead of the copy
                for i in range(0, mc, 16):
                    __builtin_prefetch(src + 4 * csa + i)
            ip = 0
            while ip + SGEMM_MR <= mc:  # full panels: a fixed-size copy
                memcpy(out + ip * kc + k * SGEMM_MR, src + ip, SGEMM_MR * sizeof(float))
                ip += SGEMM_MR
            if ip < mc:
                mr = mc - ip
                p = out + ip * kc + k * SGEMM_MR
                for i in range(mr):
                    p[i] = src[ip + i]
                for i in range(mr, SGEMM_MR):
                    p[i] = 0.0
        return
    cdef const float* srcs[SGEMM_MR]
    if csa == 1 and kc <= SGEMM_KC:  # rows of A contiguous along k: MR rows transposed at once (ZEROS past mc)
        ip = 0
        while ip < mc:
            mr = min(<Py_ssize_t>SGEMM_MR, mc - ip)
            for i in range(SGEMM_MR):
                srcs[i] = (a + (ip + i) * rsa) if i < mr else ZEROS
            pack_rows_t(out + ip * kc, srcs, kc)
            ip += mr
        return
    ip = 0
    while ip < mc:
        mr = min(<Py_ssize_t>SGEMM_MR, mc - ip)
        p = out + ip * kc
        for k in range(kc):
            src = a + ip * rsa + k * csa
            for i in range(mr):
                p[i] = src[i * rsa]
            for i in range(mr, SGEMM_MR):
                p[i] = 0.0
            p += SGEMM_MR
        ip += mr


cdef struct ImplicitA:
    # The A operand of a conv over channel-last (NHWC) input, read in place (implicit im2col, no col buffer):
    #     A[p, k] = x[n, oh*sh - ph + b*dh, ow*sw - pw + e*dw, c]   (0 outside x)
    # for output pixel p = (n*Ho + oh)*Wo + ow and k = (b*kw + e)*Cg + c: tap-major, channel-minor, so every run of
    # Cg values of k is one contiguous stretch of a pixel's channels. x is offset to the group's first channel.
    const float* x
    Py_ssize_t H, W, C          # input height, width and channel stride of a pixel (all channels, every group)
    Py_ssize_t Cg               # channels per tap (the group's input channels)
    Py_ssize_t kh, kw, sh, sw, dh, dw, ph, pw
    Py_ssize_t Ho, Wo
    Py_ssize_t p0               # row i of A is output pixel p0 + i (a GEMM over a block of the pixels)


cdef struct PanelRows:
    # where the rows of one MR-row panel of an implicit A start: output pixel (oh*sh - ph, ow*sw - pw) of its image
    Py_ssize_t mr
    Py_ssize_t ih0[SGEMM_MR]
    Py_ssize_t iw0[SGEMM_MR]
    const float* img[SGEMM_MR]


cdef inline void panel_rows(const ImplicitA* ia, Py_ssize_t p0, Py_ssize_t mr, PanelRows* pr) noexcept nogil:
    """The rows p0 .. p0+mr-1 of A (output pixels)."""
    cdef Py_ssize_t HoWo = ia.Ho * ia.Wo, i, p, n, r, oh
    pr.mr = mr
    for i in range(mr):
        p = ia.p0 + p0 + i
        n = p // HoWo
        r = p - n * HoWo
        oh = r // ia.Wo
        pr.ih0[i] = oh * ia.sh - ia.ph
        pr.iw0[i] = (r - oh * ia.Wo) * ia.sw - ia.pw
        pr.img[i] = ia.x + n * ia.H * ia.W * ia.C


cdef inline Py_ssize_t implicit_run(const ImplicitA* ia, const PanelRows* pr, Py_ssize_t k, Py_ssize_t kend,
                                    const float** srcs) noexcept nogil:
    """The run of A's columns k .. k+ln-1 (ln returned, k+ln <= kend) that every row of the panel reads as one
    contiguous stretch: the rest of tap k's channels, or -- one group, no column dilation, every row inside -- the
    rest of kernel row b (adjacent pixels). srcs[i] := row i's source (ZEROS outside x and for i >= mr)."""
    cdef Py_ssize_t Cg = ia.Cg, tap = k // Cg, c, b, e, ln, lm, e_last, i, ih, iw
    c = k - tap * Cg
    b = tap // ia.kw
    e = tap - b * ia.kw
    ln = min(Cg - c, kend - k)
    if ia.dw == 1 and ia.C == Cg and ln < kend - k:
        lm = min((b + 1) * ia.kw * Cg - k, kend - k)
        e_last = e + (c + lm - 1) // Cg
        for i in range(pr.mr):
            ih = pr.ih0[i] + b * ia.dh
            if not (0 <= ih < ia.H and pr.iw0[i] + e >= 0 and pr.iw0[i] + e_last < ia.W):
                lm = ln
                break
        ln = lm
    for i in range(SGEMM_MR):
        ih = pr.ih0[i] + b * ia.dh
        iw = pr.iw0[i] + e * ia.dw
        if i < pr.mr and 0 <= ih < ia.H and 0 <= iw < ia.W:
            srcs[i] = pr.img[i] + (ih * ia.W + iw) * ia.C + c
        else:
            srcs[i] = ZEROS
    return ln


cdef enum:
    PACK_WIN = 1024     # floats of _pack_a_implicit_c1's window (a panel's reads of one image row); wider: no window


cdef void _pack_a_implicit_c1(const ImplicitA* ia, Py_ssize_t i0, Py_ssize_t mc, Py_ssize_t pc, Py_ssize_t kc,
                              float* out) noexcept nogil:
    """pack_a_implicit for a one-channel input (C = Cg = 1: k = b*kw + e is a tap, one float per pixel; also the 1-D
    NCW conv of _k_conv.pxi, whose channels are the rows of such an image). The runs of implicit_run would be one
    float long at the borders: instead, when a panel's rows are adjacent pixels of one output row, its columns of
    kernel row b all read x[ih, iw0 + e*dw + i*sw] (e < kw, i < mr), a window of (mr-1)*sw + (kw-1)*dw + 1 floats
    from iw0. A panel whose window lies inside the row copies each column straight from x (stride 1: one fixed-size
    MR-float copy); one whose window crosses a border copies it once per kernel row into `win`, zeros outside x, so
    its columns are border-free copies too. The same floats as reading x column by column (wav2vec2's 16-tap
    8-padded positional conv: the per-column border checks were half its time)."""
    cdef PanelRows pr
    cdef Py_ssize_t ip = 0, k, b, e, i, mr, ih, iw, lo, hi, span, wb
    cdef bint adjacent, windowed
    cdef float* d
    cdef const float* base
    cdef float win[PACK_WIN]
    while ip < mc:
        mr = min(<Py_ssize_t>SGEMM_MR, mc - ip)
        panel_rows(ia, i0 + ip, mr, &pr)
        adjacent = True
        for i in range(1, mr):
            if pr.img[i] != pr.img[0] or pr.ih0[i] != pr.ih0[0] or pr.iw0[i] != pr.iw0[0] + i * ia.sw:
                adjacent = False
                break
        span = (mr - 1) * ia.sw + (ia.kw - 1) * ia.dw + 1
        # the window pays only where the panel's reads cross a border of the row (inside: direct copies from x)
        windowed = adjacent and span <= PACK_WIN and (pr.iw0[0] < 0 or pr.iw0[0] + span > ia.W)
        d = out + ip * kc
        b = pc // ia.kw
        e = pc - b * ia.kw
        wb = -1                 # the kernel row whose window `win` holds
        for k in range(kc):
            if windowed:
                if wb != b:
                    wb = b
                    ih = pr.ih0[0] + b * ia.dh
                    iw = pr.iw0[0]
                    lo = min(max(-iw, <Py_ssize_t>0), span)              # win[t] reads x[ih, iw + t]: t in [lo, hi)
                    hi = max(min(ia.W - iw, span), lo)
                    if not 0 <= ih < ia.H:
                        lo = hi = 0
                    for i in range(lo):
                        win[i] = 0.0
                    if hi > lo:
                        memcpy(win + lo, pr.img[0] + ih * ia.W + iw + lo, (hi - lo) * sizeof(float))
                    for i in range(hi, span):
                        win[i] = 0.0
                if ia.sw == 1 and mr == SGEMM_MR:   # a fixed-size copy (gcc: one or two vector moves)
                    for i in range(SGEMM_MR):
                        d[i] = win[e * ia.dw + i]
                else:
                    for i in range(mr):
                        d[i] = win[e * ia.dw + i * ia.sw]
            elif adjacent:
                ih = pr.ih0[0] + b * ia.dh
                iw = pr.iw0[0] + e * ia.dw
                if 0 <= ih < ia.H and iw >= 0 and iw + (mr - 1) * ia.sw < ia.W:
                    base = pr.img[0] + ih * ia.W
                    if ia.sw == 1 and mr == SGEMM_MR:   # a fixed-size copy (gcc: one or two vector moves)
                        for i in range(SGEMM_MR):
                            d[i] = base[iw + i]
                    else:
                        for i in range(mr):
                            d[i] = base[iw + i * ia.sw]
                elif 0 <= ih < ia.H:
                    base = pr.img[0] + ih * ia.W
                    lo = 0 if iw >= 0 else min((ia.sw - 1 - iw) // ia.sw, mr)
                    hi = min((ia.W - 1 - iw) // ia.sw + 1, mr) if ia.W - 1 - iw >= 0 else 0
                    hi = max(hi, lo)
                    for i in range(lo):
                        d[i] = 0.0
                    for i in range(lo, hi):
                        d[i] = base[iw + i * ia.sw]
                    for i in range(hi, mr):
                        d[i] = 0.0
                else:
                    for i in range(mr):
                        d[i] = 0.0
            else:
                for i in range(mr):
                    ih = pr.ih0[i] + b * ia.dh
                    iw = pr.iw0[i] + e * ia.dw
                    d[i] = pr.img[i][ih * ia.W + iw] if (0 <= ih < ia.H and 0 <= iw < ia.W) else 0.0
            for i in range(mr, SGEMM_MR):
                d[i] = 0.0
            d += SGEMM_MR
            e += 1
            if e == ia.kw:
                e = 0
                b += 1
        ip += SGEMM_MR


cdef void pack_a_implicit(const ImplicitA* ia, Py_ssize_t i0, Py_ssize_t mc, Py_ssize_t pc, Py_ssize_t kc,
                          float* out) noexcept nogil:
    """out := the mc x kc block of A (rows i0.., columns pc..) of ia as MR-row panels (kc x MR each, zero-padded),
    the same layout as sgemm_pack_a_raw."""
    cdef PanelRows pr
    cdef const float* srcs[SGEMM_MR]
    cdef Py_ssize_t ip = 0, k, ln
    if ia.C == 1 and ia.Cg == 1:
        _pack_a_implicit_c1(ia, i0, mc, pc, kc, out)
        return
    while ip < mc:
        panel_rows(ia, i0 + ip, min(<Py_ssize_t>SGEMM_MR, mc - ip), &pr)
        k = pc
        while k < pc + kc:
            ln = implicit_run(ia, &pr, k, pc + kc, srcs)
            pack_rows_t(out + ip * kc + (k - pc) * SGEMM_MR, srcs, ln)
            k += ln
        ip += SGEMM_MR


cdef void _sgemm_ukernel_full(Py_ssize_t kc, const float* a, const float* b, float* out) noexcept nogil:
    """out[i*NR + j] := sum_k a[k*MR + i] * b[k*NR + j]: one MR x NR register block (fixed-size loops that gcc
    vectorises along NR under the variant's ISA flags)."""
    cdef float acc[SGEMM_MR * SGEMM_NR]
    cdef Py_ssize_t k, i, j
    cdef float ai
    for i in range(SGEMM_MR * SGEMM_NR):
        acc[i] = 0.0
    for k in range(kc):
        for i in range(SGEMM_MR):
            ai = a[i]
            for j in range(SGEMM_NR):
                acc[i * SGEMM_NR + j] += ai * b[j]
        a += SGEMM_MR
        b += SGEMM_NR
    for i in range(SGEMM_MR * SGEMM_NR):
        out[i] = acc[i]


cdef void _sgemm_ukernel_row(Py_ssize_t kc, const float* a, const float* b, float* out) noexcept nogil:
    """out[j] := sum_k a[k*MR] * b[k*NR + j]: one row of an A panel times a B panel."""
    cdef float acc[SGEMM_NR]
    cdef Py_ssize_t k, j
    cdef float ak
    for j in range(SGEMM_NR):
        acc[j] = 0.0
    for k in range(kc):
        ak = a[k * SGEMM_MR]
        for j in range(SGEMM_NR):
            acc[j] += ak * b[j]
        b += SGEMM_NR
    for j in range(SGEMM_NR):
        out[j] = acc[j]


cdef inline void sgemm_ukernel(Py_ssize_t kc, Py_ssize_t mr, const float* a, const float* b,
                               float* out) noexcept nogil:
    """The micro-kernel: out[i*NR + j] := sum_k a[k*MR + i] * b[k*NR + j] for i < mr (rows past mr: unspecified).
    A panel with few valid rows (small M, M tails) goes row by row instead of computing MR rows of zero padding.
    Both paths add the products in the same k order, so the result does not depend on which one ran."""
    cdef Py_ssize_t i
    if mr * 3 <= SGEMM_MR:
        for i in range(mr):
            _sgemm_ukernel_row(kc, a + i, b, out + i * SGEMM_NR)
    else:
        _sgemm_ukernel_full(kc, a, b, out)


cdef void sgemm_store(const float* acc, Py_ssize_t mr, Py_ssize_t nr, float* c, Py_ssize_t rsc, Py_ssize_t csc,
                      float alpha, float beta, const float* bias_col, const float* bias_row, const Act* act,
                      const float* res=NULL) noexcept nogil:
    """C[:mr, :nr] := act(alpha*acc + beta*C [+ bias] [+ R]) (C not read when beta == 0); R (res) has C's strides."""
    cdef Py_ssize_t i, j
    cdef float v
    cdef float* ci
    cdef float* cj
    if csc == 1:    # element by element, so R may be C itself (each R element is read before that C element is written)
        for i in range(mr):
            ci = c + i * rsc
            for j in range(nr):
                v = alpha * acc[i * SGEMM_NR + j]
                if beta != 0.0:
                    v = v + beta * ci[j]
                if bias_col != NULL:
                    v = v + bias_col[j]
                if bias_row != NULL:
                    v = v + bias_row[i]
                if res != NULL:
                    v = v + res[i * rsc + j]
                if act != NULL and act.kind != ACT_NONE:
                    v = act1(act, v)
                ci[j] = v
        return
    # strided columns (e.g. conv writing NCHW output): column by column, contiguous along i when rsc == 1
    for j in range(nr):
        cj = c + j * csc
        for i in range(mr):
            v = alpha * acc[i * SGEMM_NR + j]
            if beta != 0.0:
                v = v + beta * cj[i * rsc]
            if bias_col != NULL:
                v = v + bias_col[j]
            if bias_row != NULL:
                v = v + bias_row[i]
            if res != NULL:
                v = v + res[j * csc + i * rsc]
            if act != NULL:
                v = act1(act, v)
            cj[i * rsc] = v


cdef void _sgemm_tile(Py_ssize_t ic, Py_ssize_t mc, Py_ssize_t jp0, Py_ssize_t jp1,
                      Py_ssize_t N, Py_ssize_t K, float alpha,
                      const float* a, Py_ssize_t rsa, Py_ssize_t csa, const ImplicitA* ia, const float* bp,
                      float beta, float* c, Py_ssize_t rsc, Py_ssize_t csc,
                      const float* bias_col, const float* bias_row, const float* res, const Act* act,
                      float* work, bint shared) noexcept nogil:
    """Rows ic:ic+mc, NR panels jp0:jp1 of C, over all of K. `work`: SGEMM_WORK_PER_THREAD floats. A is read from
    (a, rsa, csa), or through `ia` (implicit im2col) when that is not NULL; res (C's strides, csc == 1) is added in
    the epilogue. (Reading an implicit A in place through per-panel row pointers instead of packing it was tried:
    10-30% slower on ResNet-50's convs on the dev machine, so A is always packed.) `shared`: other threads run tiles
    of the same call.

    A tile of one row streams B once with two FMA chains, bound by memory (batch-1 decoding): each K block goes
    through one onnxep_sgemm_row call, which fetches the next panel into L2 only when `shared`. In-process A/B
    on the dev machine (Zen 5), GPT-2 / SmolLM-135M one decoding step: the fetch costs 8% of a 1-thread step and
    saves 2-3% of a 2-thread one (onnxep_sgemm_uk's pf, the per-panel form, everywhere before).

    When C's columns are strided (csc != 1, e.g. conv writing NCHW) and beta == 0, the tile is accumulated in a
    contiguous scratch tile and written to C once at the end: storing every KC block straight to strided C costs
    more than the GEMM itself (measured ~2x on a 3136 x 64 x 576 conv GEMM)."""
    cdef float acc[SGEMM_MR * SGEMM_NR]
    cdef Py_ssize_t Np = _round_up(N, SGEMM_NR), pc, kc, jp, ip, n0, nr, mr, ldt, ldc, i, j, ncols
    cdef bint first, last
    cdef bint scratch = csc != 1 and beta == 0.0
    cdef float beta_k
    cdef float* abuf = work
    cdef float* ct = work + SGEMM_MC * SGEMM_KC
    cdef float* cdst
    cdef const float* bpanel
    cdef const float* bnext
    ldt = (jp1 - jp0) * SGEMM_NR
    pc = 0
    while pc < K:
        kc = _sgemm_kc(K, pc)
        first = pc == 0
        last = pc + kc >= K
        beta_k = beta if first else 1.0
        if ia != NULL:
            pack_a_implicit(ia, ic, mc, pc, kc, abuf)
        else:
            sgemm_pack_a_raw(mc, kc, a + ic * rsa + pc * csa, rsa, csa, abuf)
        if SGEMM_SIMD and mc == 1 and _row_path_on and csc == 1:
            n0 = jp0 * SGEMM_NR
            sgemm_row_simd(kc, min(jp1 * SGEMM_NR, N) - n0, abuf, bp + pc * Np + n0 * kc, c + ic * rsc + n0,
                           alpha, beta_k,
                           (bias_col + n0) if (last and bias_col != NULL) else NULL,
                           (bias_row + ic) if (last and bias_row != NULL) else NULL,
                           (res + ic * rsc + n0) if (last and res != NULL) else NULL,
                           act if last else NULL, shared)
            pc += kc
            continue
        for jp in range(jp0, jp1):
            n0 = jp * SGEMM_NR
            nr = min(<Py_ssize_t>SGEMM_NR, N - n0)
            bpanel = bp + pc * Np + jp * SGEMM_NR * kc
            if jp + 1 < jp1:    # the next panel, fetched into L2 while the first A panel runs over this one
                bnext = bpanel + SGEMM_NR * kc
            elif not last:      # the first panel of the next K block
                bnext = bp + (pc + kc) * Np + jp0 * SGEMM_NR * _sgemm_kc(K, pc + kc)
            else:
                bnext = NULL
            ip = 0
            while ip < mc:
                mr = min(<Py_ssize_t>SGEMM_MR, mc - ip)
                if SGEMM_SIMD and (scratch or csc == 1):  # intrinsics micro-kernel, epilogue fused
                    if scratch:
                        cdst = ct + ip * ldt + (n0 - jp0 * SGEMM_NR)
                        ldc = ldt
                    else:
                        cdst = c + (ic + ip) * rsc + n0
                        ldc = rsc
                    sgemm_ukernel_simd(mr, kc, nr, abuf + ip * kc, bpanel, cdst, ldc, alpha, beta_k,
                                       (bias_col + n0) if (last and bias_col != NULL) else NULL,
                                       (bias_row + ic + ip) if (last and bias_row != NULL) else NULL,
                                       (res + (ic + ip) * rsc + n0) if (last and res != NULL) else NULL,
                                       act if last else NULL, bnext if ip == 0 else NULL)
                    ip += mr
                    continue
                sgemm_ukernel(kc, mr, abuf + ip * kc, bpanel, acc)
                if scratch:
                    cdst = ct + ip * ldt + (n0 - jp0 * SGEMM_NR)
                    sgemm_store(acc, mr, nr, cdst, ldt, 1, alpha, beta_k,
                                (bias_col + n0) if (last and bias_col != NULL) else NULL,
                                (bias_row + ic + ip) if (last and bias_row != NULL) else NULL,
                                act if last else NULL)
                else:
                    sgemm_store(acc, mr, nr, c + (ic + ip) * rsc + n0 * csc, rsc, csc,
                                alpha, beta_k,
                                (bias_col + n0) if (last and bias_col != NULL) else NULL,
                                (bias_row + ic + ip) if (last and bias_row != NULL) else NULL,
                                act if last else NULL,
                                (res + (ic + ip) * rsc + n0 * csc) if (last and res != NULL) else NULL)
                ip += mr
        pc += kc
    if scratch:
        ncols = min(jp1 * SGEMM_NR, N) - jp0 * SGEMM_NR
        if rsc == 1:    # C's rows contiguous (a conv writing NCW / NCHW): a tiled transpose of the scratch tile
            _gemm_tr_tile(4, <const uint8_t*>ct, ldt, <uint8_t*>(c + ic + jp0 * SGEMM_NR * csc), csc, ncols, mc)
        else:
            for j in range(ncols):
                cdst = c + ic * rsc + (jp0 * SGEMM_NR + j) * csc
                for i in range(mc):
                    cdst[i * rsc] = ct[i * ldt + j]


cdef inline Py_ssize_t sgemm_work_len(int nth) noexcept nogil:
    """Floats of workspace sgemm_packed_raw needs for nth threads (per thread: packed A block + scratch C tile)."""
    return <Py_ssize_t>nth * SGEMM_WORK_PER_THREAD


cdef int sgemm_threads(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, int nthreads) noexcept nogil:
    """Threads a call of this size uses: one below the flop threshold, else _nthreads(nthreads). A few rows against
    a B of SGEMM_MT_B_BYTES or more (a batch-1 fully connected layer) is bound by reading B, often from memory: it
    takes every thread whatever its flops (ShuffleNet's 1x544 @ 544x1000, B cold: 146 us on one thread, see the
    README's GEMV note)."""
    cdef int nth = _nthreads(nthreads)
    if nth <= 1 or (M <= SGEMM_MR and <double>4.0 * N * K >= SGEMM_MT_B_BYTES):
        return nth
    return nth if gemm_splits(<double>2.0 * M * N * K, nth) else 1


cdef bint gemm_splits(double flops, int nth) noexcept nogil:
    """Whether a GEMM-family call (GEMM, batched GEMM, attention) of `flops` on nth threads (as _nthreads gave) splits:
    from SGEMM_MT_FLOPS (measured first, par_calibrate) while a worker is awake, from GEMM_WAKE_FLOPS while every
    worker sleeps (onnxep_pool_awake, which then wakes them for the next call)."""
    if nth <= 1:
        return 0
    if _par_tries < PAR_TRIES:
        par_calibrate(0)
    if flops < SGEMM_MT_FLOPS:
        return 0
    if flops >= GEMM_WAKE_FLOPS or _mt_set:
        return 1
    return pool_awake() != 0


cdef enum:
    PAR_PROBE_CALLS = 48        # par_calibrate: timed 2-item calls (after 8 past the first a worker joined)
    PAR_PROBE_ITEM_NS = 2000    # ... each item busy this long


cdef void _par_probe_item(void* p, Py_ssize_t i, int tid) noexcept nogil:
    """An item busy for PAR_PROBE_ITEM_NS; a worker's (tid > 0) sets the flag p points to."""
    if tid > 0:
        (<int*>p)[0] = 1
    _probe_spin(PAR_PROBE_ITEM_NS)


cdef int _cmp_double(const void* a, const void* b) noexcept nogil:
    cdef double x = (<const double*>a)[0], y = (<const double*>b)[0]
    return (x > y) - (x < y)


cdef int par_calibrate(bint force) noexcept nogil:
    """Measures PAR_CALL_NS and PAR_FLOP_NS and sets CONV_MT_FLOPS and SGEMM_MT_FLOPS from them (_k_threads.pxi); at
    most PAR_TRIES times per process unless forced. Returns 1 when it measured, 0 when it kept what it had. Not
    thread-safe against itself: two first calls at once measure twice, each setting consistent figures."""
    global PAR_CALL_NS, PAR_FLOP_NS, CONV_MT_FLOPS, SGEMM_MT_FLOPS, _par_tries, _mt_set
    cdef double ex[PAR_PROBE_CALLS]
    cdef double rate = 0.0
    cdef int k, n = 0, flag, joined = 0
    cdef long t0, t1
    cdef float* buf
    cdef float* a
    cdef float* bp
    cdef float* c
    cdef float* work
    cdef Act act
    if not force and _par_tries > PAR_TRIES - 1:
        return 0
    _par_tries += 1
    # calls until 8 after the first one a worker joined (a new worker starts on this CPU and runs only once the
    # scheduler moves it: 0.8-7 ms on this VM with other jobs running), then PAR_PROBE_CALLS timed ones; 10 ms at most
    t1 = _now_ns()
    while n < PAR_PROBE_CALLS and _now_ns() - t1 < 10000000:
        flag = 0
        t0 = _now_ns()
        parallel_for(2, 2, _par_probe_item, &flag)
        t0 = _now_ns() - t0
        if joined < 8:
            joined += 1 if (flag or joined > 0) else 0
        elif flag:
            ex[n] = <double>(t0 - PAR_PROBE_ITEM_NS)
            n += 1
    if n < PAR_PROBE_CALLS // 4:
        return 0
    qsort(ex, n, sizeof(double), _cmp_double)
    # one thread's rate: a 48 x 32 x 128 SGEMM on packed operands in L1, best of 9 (the micro-kernel's speed here)
    buf = <float*>malloc((48 * 128 + sgemm_pack_b_len(128, 32) + 48 * 32 + sgemm_work_len(1)) * sizeof(float))
    if buf == NULL:
        return 0
    a, bp = buf, buf + 48 * 128
    c = bp + sgemm_pack_b_len(128, 32)
    work = c + 48 * 32
    for k in range(48 * 128):
        a[k] = <float>((k % 7) - 3) * 0.125
    sgemm_pack_b_raw(128, 32, a, 32, 1, bp)
    act.kind, act.a, act.b = ACT_NONE, 0.0, 0.0
    for k in range(10):
        t0 = _now_ns()
        sgemm_packed_raw(48, 32, 128, 1.0, a, 128, 1, bp, 0.0, c, 32, 1, NULL, NULL, &act, work, 1)
        if k > 0:
            rate = max(rate, 2.0 * 48 * 32 * 128 / max(<double>(_now_ns() - t0), 1.0))
    free(buf)
    PAR_CALL_NS = min(max(ex[n // 4], 100.0), 50000.0)
    PAR_FLOP_NS = min(max(rate, 1.0), 10000.0)
    CONV_MT_FLOPS = SGEMM_MT_FLOPS = 2.0 * PAR_CALL_NS * PAR_FLOP_NS
    _par_tries = PAR_TRIES + 1
    _mt_set = 0
    return 1


cdef int conv_threads_flops(double flops, int nthreads) noexcept nogil:
    """Threads a conv call of `flops` (2 * multiply-adds, fp32 equivalent) uses: one below CONV_MT_FLOPS (measured
    once per process by par_calibrate, at the first call that could use several threads), else _nthreads(nthreads)."""
    cdef int nth = _nthreads(nthreads)
    if nth <= 1:
        return 1
    if _par_tries < PAR_TRIES:
        par_calibrate(0)
    return 1 if flops < CONV_MT_FLOPS else nth


cdef inline int conv_threads(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, int nthreads) noexcept nogil:
    """sgemm_threads for a conv's GEMM (M pixels, N output channels, K = taps x input channels): its rule for a few
    rows against a big weight, else conv_threads_flops."""
    if M <= SGEMM_MR and <double>4.0 * N * K >= SGEMM_MT_B_BYTES:
        return _nthreads(nthreads)
    return conv_threads_flops(<double>2.0 * M * N * K, nthreads)


# The GEMM's tiles, whose tiling a simulated schedule chose (_sgemm_slab_mt), run under the claims that finish them
# sooner (_tile_schedule): the pool's thread ranges, or one counter (parallel_for_shared) where the ranges would leave
# a thread idle -- ViT's 197 rows as row blocks of 96 and 101 by two slabs: the ranges give thread 0 both slabs of
# the first block, the counter one of each. tile_claims_shared(False): thread ranges for all (in-process A/B, tests).
cdef int _tiles_shared_on = 1


def tile_claims_shared(on=None):
    """Whether tile jobs may claim from one counter where the thread ranges would finish later (see
    _tiles_shared_on); `on` sets it. Returns the setting before the call."""
    global _tiles_shared_on
    cdef int before = _tiles_shared_on
    if on is not None:
        _tiles_shared_on = 1 if on else 0
    return bool(before)


ctypedef Py_ssize_t (*tile_cost_fn)(const void* ctx, Py_ssize_t t) noexcept nogil

cdef enum:
    # the narrowest slab (NR panels) whose tiles may go to one counter: there both threads pack every row block's A
    # (from L3, or gathered again from the image for a conv), which narrower tiles do not repay (in-process, 2
    # threads, 4-panel slabs on ResNet-50's 14x14 outputs: 1x1 1024 -> 256 1.15x the time, 3x3 / 2 256 -> 256 1.07x;
    # ViT's 197 rows, 12- and 48-panel slabs: 0.93-0.96x)
    SGEMM_SHARED_MIN_SLAB = 8
    TILE_SHARED_GAIN_PCT = 2    # one counter only when the ranges' schedule finishes at least this much later: the
                                # ranges keep each thread on its own rows (their L2), which the model does not count.
                                # ViT's 197 rows, blocks of 96 and 101: 2.5% in the model, 0.96-0.99x the time


cdef Py_ssize_t _tile_span(tile_cost_fn cost, const void* ctx, Py_ssize_t n, int nth, bint ranges) noexcept nogil:
    """When the last of nth threads is done with n items of cost(ctx, t): with ranges as the pool claims them
    (threads.h onnxep_run_affine: thread k from its own range n*k/nth .. n*(k+1)/nth in runs of a quarter of what is
    left there, then from the others' in order), else each item in order to the first thread free (one counter)."""
    cdef Py_ssize_t fin[64]
    cdef Py_ssize_t nxt[64]
    cdef Py_ssize_t end[64]
    cdef Py_ssize_t c, i, span = 0
    cdef int k, kmin, q, r, nthr = nth if nth < 64 else 64
    cdef bint idle[64]
    for k in range(nthr):
        fin[k] = 0
        idle[k] = False
        nxt[k] = n * k // nthr
        end[k] = n * (k + 1) // nthr
    if not ranges:
        for i in range(n):
            kmin = 0
            for k in range(1, nthr):
                if fin[k] < fin[kmin]:
                    kmin = k
            fin[kmin] += cost(ctx, i)
    else:
        while True:
            kmin = -1
            for k in range(nthr):
                if not idle[k] and (kmin < 0 or fin[k] < fin[kmin]):
                    kmin = k
            if kmin < 0:
                break
            r = -1
            for q in range(nthr):
                if nxt[(kmin + q) % nthr] < end[(kmin + q) % nthr]:
                    r = (kmin + q) % nthr
                    break
            if r < 0:
                idle[kmin] = True
                continue
            c = max(<Py_ssize_t>1, (end[r] - nxt[r]) // 4)
            for i in range(nxt[r], nxt[r] + c):
                fin[kmin] += cost(ctx, i)
            nxt[r] += c
    for k in range(nthr):
        span = max(span, fin[k])
    return span


cdef Py_ssize_t _tile_schedule(tile_cost_fn cost, const void* ctx, Py_ssize_t n, int nth, bint may_share,
                               bint* shared) noexcept nogil:
    """The span of n tiles on nth threads under the claims they will run under, and those claims (*shared): the
    pool's (its thread ranges while threads.h allows them), or, when may_share, one counter (parallel_for_shared)
    where that finishes at least TILE_SHARED_GAIN_PCT sooner."""
    cdef bint ranges = _pool_affine_flag != 0 and nth <= ONNXEP_AFF_MAX
    cdef Py_ssize_t own = _tile_span(cost, ctx, n, nth, ranges), one
    shared[0] = False
    if not ranges or not may_share or not _tiles_shared_on:
        return own
    one = _tile_span(cost, ctx, n, nth, False)
    if 100 * one <= (100 - TILE_SHARED_GAIN_PCT) * own:
        shared[0] = True
        return one
    return own


# The splits of small outputs for several threads (sgemm_packed_ex's row block per thread,
# _dconv_blocks_mt, the direct path's folded pointwise rows): on; small_split() turns them off for in-process A/B
# measurements and tests
cdef int _small_split_on = 1


def small_split(on=None):
    """Whether small conv / GEMM outputs are cut into a work item per thread (see _small_split_on); `on` sets it.
    Returns the setting before the call."""
    global _small_split_on
    cdef int before = _small_split_on
    if on is not None:
        _small_split_on = 1 if on else 0
    return bool(before)


def par_costs(bint measure=False):
    """(PAR_CALL_NS, PAR_FLOP_NS, CONV_MT_FLOPS): the conv break-even's terms in this variant (par_calibrate);
    measure=True measures them again first (bench/bench_threads.py, tests), with up to 5 more probes when one ends
    without a measurement (its worker not running within 10 ms: this variant's first worker starting on a busy
    machine; a CI run once read the figures from before the call)."""
    cdef int tries = 0
    with nogil:
        if measure:
            while par_calibrate(1) == 0 and tries < 5:
                tries += 1
    return PAR_CALL_NS, PAR_FLOP_NS, CONV_MT_FLOPS


cdef void sgemm_packed_raw(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha,
                           const float* a, Py_ssize_t rsa, Py_ssize_t csa, const float* bp,
                           float beta, float* c, Py_ssize_t rsc, Py_ssize_t csc,
                           const float* bias_col, const float* bias_row, const Act* act,
                           float* work, int nth) noexcept nogil:
    """C := act(alpha*A@B + beta*C [+ bias]) with B packed by sgemm_pack_b_raw; A[i, k] = a[i*rsa + k*csa].
    `work` holds sgemm_work_len(nth) floats; nth threads at most (1: no parallel region)."""
    sgemm_packed_ex(M, N, K, alpha, a, rsa, csa, NULL, bp, beta, c, rsc, csc, bias_col, bias_row, NULL, act,
                    work, nth)


cdef inline Py_ssize_t _row_deal(Py_ssize_t M, Py_ssize_t mtiles, Py_ssize_t* mq) noexcept nogil:
    """Deals M's MR-row tiles to mtiles row blocks for _row_block: sets *mq, the tiles of each of the first blocks,
    and returns mfirst, how many blocks take mq (the rest take one more)."""
    cdef Py_ssize_t tiles = (M + SGEMM_MR - 1) // SGEMM_MR
    mq[0] = tiles // mtiles
    return mtiles - (tiles - mq[0] * mtiles)


cdef inline Py_ssize_t _row_block(Py_ssize_t b, Py_ssize_t mq, Py_ssize_t mfirst) noexcept nogil:
    """First row of row block b (b == the block count: past the last row) when M's MR-row tiles are dealt out mq
    per block to the first mfirst blocks and one more to each block after them. The extra tiles go last, with the
    partial tile: 196 rows (16 tiles and 4 rows) make blocks of 96 and 100 rows, where the extra tile first made 108
    and 88 (a thread with the one block waited 0.91 of the other's time)."""
    return SGEMM_MR * (b * mq + max(<Py_ssize_t>0, b - mfirst))


cdef enum:
    SGEMM_SLAB_REPACK_Q = 4     # a tile's A packing costs about 1/this of one NR panel's products over its rows


cdef struct _SlabCost:
    Py_ssize_t M, mq, mfirst, ntl, cand, npanels


cdef Py_ssize_t _sgemm_tile_cost(const void* p, Py_ssize_t t) noexcept nogil:
    cdef const _SlabCost* s = <const _SlabCost*>p
    cdef Py_ssize_t rows = min(_row_block(t // s.ntl + 1, s.mq, s.mfirst), s.M) - _row_block(t // s.ntl, s.mq, s.mfirst)
    cdef Py_ssize_t pan = min((t % s.ntl + 1) * s.cand, s.npanels) - (t % s.ntl) * s.cand
    return rows * (SGEMM_SLAB_REPACK_Q * pan + 1)


cdef Py_ssize_t _sgemm_slab_mt(Py_ssize_t M, Py_ssize_t mtiles, Py_ssize_t mq, Py_ssize_t mfirst, Py_ssize_t npanels,
                               Py_ssize_t slab_cap, int nth, bint* shared, Py_ssize_t* span_out) noexcept nogil:
    """The column slab (in NR panels) that lets nth threads finish a GEMM's tiles soonest, and the claims to run them
    under (*shared: _tile_schedule): for each slab width from the widest (fewest tiles; each tile packs its A block
    again), the time the tiles take, a tile costing rows * (panels + the A packing, 1/SGEMM_SLAB_REPACK_Q panel); a
    narrower slab is taken only when it finishes at least 1% sooner. Row blocks differ by one MR tile at most, so a
    tile count that is a multiple of nth can still leave a thread waiting: ViT's 197 rows come in blocks of 96 and
    101 on 2 threads; 2 slabs give 4 tiles, which one counter deals out two of each, where the thread ranges would
    give thread 0 both of the first block's."""
    cdef Py_ssize_t target, prev = 0, best = 0, span, best_span = 0
    cdef bint sh = False
    cdef _SlabCost c
    c.M, c.mq, c.mfirst, c.npanels = M, mq, mfirst, npanels
    shared[0] = False
    for target in range(1, min(npanels, 8 * <Py_ssize_t>nth) + 1):
        c.cand = min((npanels + target - 1) // target, slab_cap)
        if c.cand == prev:
            continue
        prev = c.cand
        c.ntl = (npanels + c.cand - 1) // c.cand
        span = _tile_schedule(_sgemm_tile_cost, &c, mtiles * c.ntl, nth, c.cand >= SGEMM_SHARED_MIN_SLAB, &sh)
        if best == 0 or 100 * span < 99 * best_span:
            best, best_span, shared[0] = c.cand, span, sh
    span_out[0] = best_span
    return best


# _sgemm_tiling may round the row blocks up to a multiple of the threads (on); sgemm_row_round() turns it off for
# in-process A/B measurements and tests
cdef int _row_round_on = 1


def sgemm_row_round(on=None):
    """Whether the SGEMM's tiling may cut M into a multiple of the threads' count of row blocks, each under MC rows,
    where that finishes sooner than MC-row blocks (_sgemm_tiling); `on` sets it. Returns the setting before the
    call."""
    global _row_round_on
    cdef int before = _row_round_on
    if on is not None:
        _row_round_on = 1 if on else 0
    return bool(before)


cdef struct _Tiling:
    Py_ssize_t npanels, mtiles, mq, mfirst, slab
    bint shared


cdef void _sgemm_tiling(Py_ssize_t M, Py_ssize_t N, bint scratch, bint implicit, int nth,
                        _Tiling* out) noexcept nogil:
    """sgemm_packed_ex's tiles of an M x N product (M, N > 0) on nth threads: NR panels, row blocks (mtiles of them,
    mq MR tiles each for the first mfirst, one more for the rest), the column slab in panels, and the claims (shared:
    one counter, parallel_for_shared); scratch: C's tile goes through the scratch C tile; implicit: A is a conv's
    im2col, gathered from the image as it is packed."""
    cdef Py_ssize_t npanels, mtiles, mq, mfirst, slab, slab_cap, span = 0, mtiles2, mq2, mfirst2, slab2, span2
    cdef Py_ssize_t mr_tiles = (M + SGEMM_MR - 1) // SGEMM_MR
    cdef bint shared = False, shared2 = False
    npanels = (N + SGEMM_NR - 1) // SGEMM_NR
    mtiles = (M + SGEMM_MC - 1) // SGEMM_MC
    # row blocks: M's MR-row tiles dealt out evenly, mq per block and one more to each after the first mfirst (each
    # <= MC rows; the partial tile, if any, in the last block), so blocks differ by at most one MR tile (_row_block)
    mfirst = _row_deal(M, mtiles, &mq)
    # Column slab per tile (at most SGEMM_NC_MAX columns, or the scratch C tile's width for strided-column C): on
    # several threads, the one that finishes soonest (_sgemm_slab_mt).
    slab_cap = <Py_ssize_t>(SGEMM_NC_MAX // SGEMM_NR)
    if scratch:  # the tile goes through the scratch C tile (see _sgemm_tile)
        slab_cap = min(slab_cap, <Py_ssize_t>(SGEMM_CT_COLS // SGEMM_NR))
    if nth > 1 and npanels < nth and mtiles < nth and _small_split_on:
        # too few panels to share: a row block per thread (a small conv's 8x8 or 4x4 output to at most NR
        # channels was one tile, on one thread); each block packs its own rows of A, only B's one panel is read again
        mtiles = min(<Py_ssize_t>nth, mr_tiles)
        mfirst = _row_deal(M, mtiles, &mq)
    slab = min(npanels, slab_cap)
    if nth > 1:
        slab = _sgemm_slab_mt(M, mtiles, mq, mfirst, npanels, slab_cap, nth, &shared, &span)
        # or row blocks to a multiple of the threads, each under MC rows: where that finishes sooner, each block's A
        # is packed once instead of once per slab (a 1-D conv's 1500 output positions: 11 blocks of 132-144 rows on
        # 2 threads took 2 slabs, each block's im2col gathered twice; 12 blocks of 120-132 rows take one). Under nth
        # MC-row blocks only for a conv's im2col: a plain A (a few hundred tokens) is cheap to pack again, and
        # splitting the columns has each thread read only its slabs of B (in-process, 2 threads: the zoo's whisper
        # encoders, 100-position 1-D convs, 0.95-0.985x the time with rows split; its small transformers 1.00-1.04x).
        mtiles2 = (mtiles + nth - 1) // nth * nth
        if _row_round_on and (mtiles >= nth or implicit) and mtiles2 != mtiles and mtiles2 <= mr_tiles:
            mfirst2 = _row_deal(M, mtiles2, &mq2)
            slab2 = _sgemm_slab_mt(M, mtiles2, mq2, mfirst2, npanels, slab_cap, nth, &shared2, &span2)
            if 100 * span2 < 99 * span:
                mtiles, mq, mfirst, slab, shared = mtiles2, mq2, mfirst2, slab2, shared2
    out.npanels, out.mtiles, out.mq, out.mfirst, out.slab, out.shared = npanels, mtiles, mq, mfirst, slab, shared


def sgemm_tiling(Py_ssize_t M, Py_ssize_t N, int nth, bint implicit=False):
    """(row blocks, column slab in NR panels, shared, the blocks' first rows and M) of sgemm_packed_f32's tiles for
    an M x N product on nth threads (_sgemm_tiling; shared: the tiles go to one counter, parallel_for_shared;
    implicit: a conv's im2col A); for tests."""
    cdef _Tiling tl
    _sgemm_tiling(M, N, False, implicit, nth, &tl)
    rows = tuple(min(_row_block(b, tl.mq, tl.mfirst), M) for b in range(tl.mtiles + 1))
    return tl.mtiles, tl.slab, bool(tl.shared), rows


cdef void sgemm_packed_ex(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha,
                          const float* a, Py_ssize_t rsa, Py_ssize_t csa, const ImplicitA* ia, const float* bp,
                          float beta, float* c, Py_ssize_t rsc, Py_ssize_t csc,
                          const float* bias_col, const float* bias_row, const float* res, const Act* act,
                          float* work, int nth) noexcept nogil:
    """sgemm_packed_raw with A read through `ia` (implicit im2col, see ImplicitA) when it is not NULL, and a residual
    res (C's strides; csc == 1) added in the epilogue when res is not NULL."""
    cdef Py_ssize_t npanels, mtiles, ntiles, slab, t, ic, mc, mq, mfirst, jp0, jp1, i, j
    cdef float zero[SGEMM_MR * SGEMM_NR]
    cdef _Tiling tl
    if M <= 0 or N <= 0:
        return
    if K <= 0:  # no products: the epilogue alone
        for i in range(SGEMM_MR * SGEMM_NR):
            zero[i] = 0.0
        i = 0
        while i < M:
            j = 0
            while j < N:
                sgemm_store(zero, min(<Py_ssize_t>SGEMM_MR, M - i), min(<Py_ssize_t>SGEMM_NR, N - j),
                            c + i * rsc + j * csc, rsc, csc, alpha, beta,
                            (bias_col + j) if bias_col != NULL else NULL,
                            (bias_row + i) if bias_row != NULL else NULL, act,
                            (res + i * rsc + j * csc) if res != NULL else NULL)
                j += SGEMM_NR
            i += SGEMM_MR
        return
    _sgemm_tiling(M, N, csc != 1 and beta == 0.0, ia != NULL, nth, &tl)
    npanels, mtiles, mq, mfirst, slab = tl.npanels, tl.mtiles, tl.mq, tl.mfirst, tl.slab
    ntiles = (npanels + slab - 1) // slab
    if nth <= 1 or mtiles * ntiles < 2:
        for t in range(mtiles * ntiles):
            ic = _row_block(t // ntiles, mq, mfirst)
            jp0 = (t % ntiles) * slab
            _sgemm_tile(ic, min(_row_block(t // ntiles + 1, mq, mfirst), M) - ic, jp0, min(jp0 + slab, npanels), N, K,
                        alpha, a, rsa, csa, ia, bp, beta, c, rsc, csc, bias_col, bias_row, res, act, work, False)
        return
    cdef GemmJob job
    job.M, job.N, job.K, job.alpha, job.beta = M, N, K, alpha, beta
    job.a, job.rsa, job.csa, job.ia, job.bp = a, rsa, csa, ia, bp
    job.c, job.rsc, job.csc, job.bias_col, job.bias_row, job.res, job.act = c, rsc, csc, bias_col, bias_row, res, act
    job.ntiles, job.mq, job.mfirst, job.slab, job.npanels, job.work = ntiles, mq, mfirst, slab, npanels, work
    if tl.shared:
        parallel_for_shared(mtiles * ntiles, nth, _sgemm_tile_task, &job)
    else:
        parallel_for(mtiles * ntiles, nth, _sgemm_tile_task, &job)


cdef struct GemmJob:
    # sgemm_packed_ex's arguments and tiling, for its tasks (one tile each) on the thread pool
    Py_ssize_t M, N, K, rsa, csa, rsc, csc, ntiles, mq, mfirst, slab, npanels
    float alpha, beta
    const float* a
    const ImplicitA* ia
    const float* bp
    float* c
    const float* bias_col
    const float* bias_row
    const float* res
    const Act* act
    float* work


cdef void _sgemm_tile_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef GemmJob* j = <GemmJob*>p
    cdef Py_ssize_t ic = _row_block(t // j.ntiles, j.mq, j.mfirst), jp0 = (t % j.ntiles) * j.slab
    _sgemm_tile(ic, min(_row_block(t // j.ntiles + 1, j.mq, j.mfirst), j.M) - ic, jp0, min(jp0 + j.slab, j.npanels), j.N, j.K, j.alpha, j.a, j.rsa, j.csa,
                j.ia, j.bp, j.beta, j.c, j.rsc, j.csc, j.bias_col, j.bias_row, j.res, j.act,
                j.work + <Py_ssize_t>tid * SGEMM_WORK_PER_THREAD, True)


# ----------------------------------------------------------------------------------------------- Python wrappers

#: the epilogue activations by ONNX op name, and how many float parameters each takes
ACTIVATIONS = {"": (ACT_NONE, 0), "Relu": (ACT_RELU, 0), "Clip": (ACT_CLIP, 2), "LeakyRelu": (ACT_LEAKY_RELU, 1),
               "Sigmoid": (ACT_SIGMOID, 0), "HardSigmoid": (ACT_HARD_SIGMOID, 2), "Tanh": (ACT_TANH, 0),
               "HardSwish": (ACT_HARD_SWISH, 0), "Gelu": (ACT_GELU, 0)}


cdef Act make_act(activation, bint relu=False) except *:
    """The epilogue activation: `activation` is None, a name, or (name, *params) with Clip (min, max), LeakyRelu
    (alpha), HardSigmoid (alpha, beta); None means Relu when `relu` is set, else no activation."""
    cdef Act act
    act.kind, act.a, act.b = (ACT_RELU if relu else ACT_NONE), 0.0, 0.0
    if activation is None:
        return act
    name, params = (activation, ()) if isinstance(activation, str) else (activation[0], tuple(activation[1:]))
    if name not in ACTIVATIONS or len(params) != ACTIVATIONS[name][1]:
        raise ValueError(f"unknown epilogue activation {activation!r}: expected one of "
                         f"{ {k: v[1] for k, v in ACTIVATIONS.items()} } (name: number of parameters)")
    act.kind = ACTIVATIONS[name][0]
    if params:
        act.a = params[0]
    if len(params) > 1:
        act.b = params[1]
    return act


def sgemm_pack_b_size(Py_ssize_t K, Py_ssize_t N):
    """Number of float32 elements of B (K x N) packed in this variant's format."""
    if K < 0 or N < 0:
        raise ValueError(f"sgemm_pack_b_size: negative size K={K}, N={N}")
    return sgemm_pack_b_len(K, N)


def sgemm_pack_b(const float[:, ::1] B, bint trans_b, float[::1] out):
    """out := B packed (B is K x N, or N x K when trans_b); out has sgemm_pack_b_size(K, N) elements."""
    cdef Py_ssize_t K, N
    if trans_b:
        N, K = B.shape[0], B.shape[1]
    else:
        K, N = B.shape[0], B.shape[1]
    if out.shape[0] != sgemm_pack_b_len(K, N):
        raise ValueError(f"sgemm_pack_b: out has {out.shape[0]} elements, B ({K}x{N}) packs into "
                         f"{sgemm_pack_b_len(K, N)}")
    if K == 0 or N == 0:
        return
    with nogil:
        if trans_b:
            sgemm_pack_b_raw(K, N, &B[0, 0], 1, K, &out[0])
        else:
            sgemm_pack_b_raw(K, N, &B[0, 0], N, 1, &out[0])


cdef const float* _opt_ptr(const float[::1] v, Py_ssize_t n, str what) except? NULL:
    if v is None:
        return NULL
    if v.shape[0] != n:
        raise ValueError(f"sgemm: {what} has {v.shape[0]} elements, expected {n}")
    if n == 0:
        return NULL
    return &v[0]


def sgemm_packed_f32(bint trans_a, float alpha, const float[:, ::1] A, const float[::1] B_packed, Py_ssize_t N,
                     float beta, float[:, ::1] C, const float[::1] bias_col=None, const float[::1] bias_row=None,
                     bint relu=False, int nthreads=0, activation=None):
    """C := act(alpha*op(A)@B + beta*C [+ bias_col[j] | + bias_row[i]]); B (K x N) given packed by sgemm_pack_b.
    act: `activation` (see make_act) or Relu when relu is set.
    op(A) is A (M x K) or A.T (A stored K x M) when trans_a. C is not read when beta == 0."""
    cdef Py_ssize_t M, K
    cdef int nth
    cdef const float* bc
    cdef const float* br
    cdef Act act = make_act(activation, relu)
    if trans_a:
        K, M = A.shape[0], A.shape[1]
    else:
        M, K = A.shape[0], A.shape[1]
    if C.shape[0] != M or C.shape[1] != N:
        raise ValueError(f"sgemm_packed_f32: C is {C.shape[0]}x{C.shape[1]}, expected {M}x{N}")
    if B_packed.shape[0] != sgemm_pack_b_len(K, N):
        raise ValueError(f"sgemm_packed_f32: packed B has {B_packed.shape[0]} elements, expected "
                         f"{sgemm_pack_b_len(K, N)} for K={K}, N={N} ({SGEMM_FORMAT})")
    bc = _opt_ptr(bias_col, N, "bias_col")
    br = _opt_ptr(bias_row, M, "bias_row")
    if M == 0 or N == 0:
        return
    nth = sgemm_threads(M, N, K, nthreads)
    _sgemm_call(M, N, K, alpha, &A[0, 0] if M * K else NULL, 1 if trans_a else K, M if trans_a else 1,
                &B_packed[0] if K else NULL, beta, &C[0, 0], N, 1, bc, br, &act, nth)


cdef int _sgemm_call(Py_ssize_t M, Py_ssize_t N, Py_ssize_t K, float alpha,
                     const float* a, Py_ssize_t rsa, Py_ssize_t csa, const float* bp,
                     float beta, float* c, Py_ssize_t rsc, Py_ssize_t csc,
                     const float* bias_col, const float* bias_row, const Act* act, int nth) except -1:
    """Allocate the A workspace, run sgemm_packed_raw without the GIL, free it."""
    cdef float* work = NULL
    if K > 0:
        work = <float*>malloc(sgemm_work_len(nth) * sizeof(float))
        if work == NULL:
            raise MemoryError("sgemm: cannot allocate the A packing workspace")
    try:
        with nogil:
            sgemm_packed_raw(M, N, K, alpha, a, rsa, csa, bp, beta, c, rsc, csc, bias_col, bias_row, act, work, nth)
    finally:
        free(work)
    return 0


def sgemm_f32(bint trans_a, bint trans_b, float alpha, const float[:, ::1] A, const float[:, ::1] B, float beta,
              float[:, ::1] C, int nthreads=0, const float[::1] bias_col=None, const float[::1] bias_row=None,
              bint relu=False, activation=None):
    """C := act(alpha*op(A)@op(B) + beta*C [+ bias]), packing B on the fly (C is not read when beta == 0); act as in
    sgemm_packed_f32."""
    cdef Py_ssize_t M, K, N, Kb
    cdef float* bp = NULL
    cdef const float* bc
    cdef const float* br
    cdef int nth
    cdef Act act = make_act(activation, relu)
    if trans_a:
        K, M = A.shape[0], A.shape[1]
    else:
        M, K = A.shape[0], A.shape[1]
    if trans_b:
        N, Kb = B.shape[0], B.shape[1]
    else:
        Kb, N = B.shape[0], B.shape[1]
    if Kb != K:
        raise ValueError(f"sgemm_f32: inner dimensions differ: op(A) is {M}x{K}, op(B) is {Kb}x{N}")
    if C.shape[0] != M or C.shape[1] != N:
        raise ValueError(f"sgemm_f32: C is {C.shape[0]}x{C.shape[1]}, expected {M}x{N}")
    bc = _opt_ptr(bias_col, N, "bias_col")
    br = _opt_ptr(bias_row, M, "bias_row")
    if M == 0 or N == 0:
        return
    nth = sgemm_threads(M, N, K, nthreads)
    if K > 0:
        bp = <float*>malloc(sgemm_pack_b_len(K, N) * sizeof(float))
        if bp == NULL:
            raise MemoryError("sgemm_f32: cannot allocate packed B")
    try:
        if K > 0:
            with nogil:
                if trans_b:
                    sgemm_pack_b_raw(K, N, &B[0, 0], 1, K, bp, nth)
                else:
                    sgemm_pack_b_raw(K, N, &B[0, 0], N, 1, bp, nth)
        _sgemm_call(M, N, K, alpha, &A[0, 0] if M * K else NULL, 1 if trans_a else K, M if trans_a else 1,
                    bp, beta, &C[0, 0], N, 1, bc, br, &act, nth)
    finally:
        free(bp)


# ------------------------------------------------------------------------------------- GEMV: one row, B unpacked
# A batch-1 fully connected layer (y = a @ op(W), a one row) reads each weight once: it is bound by reading W, which the
# packed layout does not make faster, while packing it holds the weight twice while the session is made (VGG-19's
# 4096 x 25088 fc6: 411 MB more at the peak). gemv_f32 reads W as stored.

cdef extern from "_native/gemv.h":
    void gemv_nk "onnxep_gemv_nk"(const float* a, const float* w, Py_ssize_t K, Py_ssize_t n0, Py_ssize_t n1,
                                  const float* bias, float* y, const Act* act, int stream) noexcept nogil
    void gemv_kn "onnxep_gemv_kn"(const float* a, const float* w, Py_ssize_t K, Py_ssize_t N, Py_ssize_t n0,
                                  Py_ssize_t n1, const float* bias, float* y, const Act* act) noexcept nogil


cdef enum:
    GEMV_NK_ROWS = 64      # rows of W (N, K) per task
    GEMV_KN_COLS = 512     # columns of W (K, N) per task: 2 KB of y stays in L1 while W's rows stream by


cdef struct GemvJob:
    const float* a
    const float* w
    const float* bias
    float* y
    Py_ssize_t M, K, N, chunk, nchunks
    bint trans_b
    Act act


cdef void _gemv_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef GemvJob* j = <GemvJob*>p
    cdef Py_ssize_t m = t // j.nchunks, n0 = (t - m * j.nchunks) * j.chunk, n1 = min(n0 + j.chunk, j.N)
    if j.trans_b:
        gemv_nk(j.a + m * j.K, j.w, j.K, n0, n1, j.bias, j.y + m * j.N, &j.act, j.M == 1)
    else:
        gemv_kn(j.a + m * j.K, j.w, j.K, j.N, n0, n1, j.bias, j.y + m * j.N, &j.act)


cdef void gemv_run(const float* a, const float* w, Py_ssize_t M, Py_ssize_t K, Py_ssize_t N, bint trans_b,
                   const float* bias, float* y, const Act* act, int nthreads) noexcept nogil:
    """gemv_f32's / gemv_rows_f32's work on raw pointers: M rows of a (M, K) and y (M, N), both contiguous (sizes
    checked by the caller; a and w may be NULL when K is 0): also the run loop's RL_GEMV step. Tasks are (row, chunk
    of outputs) pairs, so each output is summed the same way whatever the thread split."""
    cdef GemvJob job
    cdef Py_ssize_t items
    if N == 0 or M == 0:
        return
    job.a, job.w, job.bias, job.y = a, w, bias, y
    job.M, job.K, job.N, job.trans_b, job.act = M, K, N, trans_b, act[0]
    job.chunk = GEMV_NK_ROWS if trans_b else GEMV_KN_COLS
    job.nchunks = (N + job.chunk - 1) // job.chunk
    items = M * job.nchunks
    parallel_for(items, <int>min(<Py_ssize_t>sgemm_threads(M, N, K, nthreads), items), _gemv_task, &job)


def gemv_f32(const float[::1] a, const float[:, ::1] W, bint trans_b, const float[::1] bias, float[::1] y,
             bint relu=False, int nthreads=0, activation=None):
    """y := act(a @ op(W) [+ bias]) for one row a (K,), W (N, K) when trans_b else (K, N), read as stored (not packed),
    act as in sgemm_packed_f32 (make_act). Output elements are split over the threads, each summed the same way
    whatever their number: (N, K) in 16 lanes over k added pairwise at the end, (K, N) over k in order."""
    cdef Py_ssize_t K = a.shape[0], N = W.shape[0] if trans_b else W.shape[1]
    cdef const float* bp
    cdef Act act
    if (W.shape[1] if trans_b else W.shape[0]) != K:
        raise ValueError(f"gemv_f32: a has {K} elements, op(W) is {W.shape[1] if trans_b else W.shape[0]}x{N}")
    if y.shape[0] != N:
        raise ValueError(f"gemv_f32: y has {y.shape[0]} elements, expected {N}")
    bp = _opt_ptr(bias, N, "bias")
    if N == 0:
        return
    act = make_act(activation, relu)
    with nogil:
        gemv_run(&a[0] if K else NULL, &W[0, 0] if K else NULL, 1, K, N, trans_b, bp, &y[0], &act, nthreads)


def gemv_rows_f32(const float[:, ::1] A, const float[:, ::1] W, const float[::1] bias, float[:, ::1] Y,
                  bint relu=False, int nthreads=0, activation=None):
    """Y := act(A @ W.T [+ bias]) for A (M, K) and W (N, K) as stored: gemv_f32's (N, K) dot products, row by row of
    A (the tiny-N GEMM: ops/_gemv.py)."""
    cdef Py_ssize_t M = A.shape[0], K = A.shape[1], N = W.shape[0]
    cdef const float* bp
    cdef Act act
    if W.shape[1] != K:
        raise ValueError(f"gemv_rows_f32: A is {M}x{K}, W (N, K) is {N}x{W.shape[1]}")
    if Y.shape[0] != M or Y.shape[1] != N:
        raise ValueError(f"gemv_rows_f32: Y is {Y.shape[0]}x{Y.shape[1]}, expected {M}x{N}")
    bp = _opt_ptr(bias, N, "bias")
    if M == 0 or N == 0:
        return
    act = make_act(activation, relu)
    with nogil:
        gemv_run(&A[0, 0] if K else NULL, &W[0, 0] if K else NULL, M, K, N, True, bp, &Y[0, 0], &act, nthreads)
