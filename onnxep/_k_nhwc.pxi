# Channel-last (NHWC) kernels: depthwise convolution and 2-D pooling. Activations are (N, H, W, C), so every loop
# below runs over the contiguous channels of one pixel -- the vector dimension -- and there is no per-plane padding,
# copying or phase splitting as in the NCHW depthwise kernel (_k_conv.pxi).
#
# Depthwise conv (group == C, channel multiplier mult = cout / C, output channel oc reads input channel oc // mult):
#     y[n, oh, ow, oc] = bias[oc] + sum over taps (b, e) inside x of w[(b*kw + e), oc] * x[n, ih, iw, oc // mult]
#     ih = oh*sh - ph + b*dh, iw = ow*sw - pw + e*dw
# The packed weight is tap-major, channel-minor, each tap's row padded with zeros to CP = cout rounded up to 16
# (so with an aligned buffer every tap row starts on a 64-byte line): w_packed[(b*kw + e)*CP + oc] = w[oc, 0, b, e].
# Every output is the bias (or 0) plus its taps inside x in tap order (kernel row, then column), then the activation
# (none, Relu, Clip or HardSwish: onnxep_dwact), whichever loop computes it; which loop that is depends on the geometry
# only, and one task is one output row, so the result does not depend on the thread count.
# Per output row (_dwn_row):
#   sliding blocks (onnxep_dwn_slide_row; kw 3, 5 or 7, stride 1 or 2, dilation 1 along W, mult 1; where
#     onnxep_dwn_slide_p says so: not 3x3 stride 2 on AVX-512 / AVX2, AVX2 whole 8-channel blocks, generic whole
#     4-channel blocks):
#     the whole row, borders included, in blocks of P output pixels (AVX-512 16 on rows of 16 or more, else 8) x one
#     channel block (16 / 8 / 4 floats); each input column of a kernel row is loaded once for every tap of the block
#     that reads it, columns outside x are skipped (= the clipped tap list). The last block of a row shifts back to
#     end at Wo (recomputing a few pixels to the same values). dw_nhwc_slide(False) turns it off (tests, A/B).
#     Measured (AVX-512, this VM, 1 thread, 64-byte aligned, cold caches, us, before -> after): MobileNetV2's 3x3
#     112x112x32 s1 88 -> 54, 56x56x144 s1 82 -> 71, 14x14x576 s1 23 -> 20, 7x7x960 12 -> 8.7; ConvNeXt's 7x7
#     56x56x96 291 -> 134, 28x28x192 171 -> 66, 7x7x768 66 -> 16; 5x5 s2 56x56x72 46 -> 33. (3x3 stride 2 stays on
#     the per-run loops there: as fast in isolation, up to 19% slower inside MobileNetV2.)
#     The generic variant (the plain loop before): 3.5-10x faster, e.g. 112x112x32 1453 -> 347, 56x56x96 7x7 5348 -> 549.
#   otherwise interior columns (every kernel column inside x): onnxep_dwn_run over the kernel rows inside x, taps as
#     fixed offsets from each pixel, in tiles of T output pixels whose input fits in half an L1d (DWN_L1_FLOATS),
#     channel blocks outer, 8 (then 4, then 1) pixels per register block sharing each weight load. kw = 3 with
#     dilation 1 along W has its own loops that load each input column of a kernel row once (stride 1: 10 columns for
#     8 pixels; stride 2, AVX-512: 17). AVX-512 covers a channel tail with masked loads; AVX2 runs it (C % 8) in the
#     plain loop; the generic variant is the plain loop in blocks of 16 channels.
#   border columns, and every pixel when mult > 1: onnxep_dwn_px / _dwn_px_mult on the list of taps clipped to x.
# Measured on 1x128x56x56 3x3 pad 1 (AVX-512, warm caches, 64-byte aligned buffers, 1 thread), the per-run loops:
# stride 1 ~105 us vs ~150 us for conv_depthwise_f32 on NCHW; stride 2 ~42 us vs ~146 us.
#
# Pooling, 2-D: the same 21-entry int64 geometry vector as the NCHW pool kernels (_k_pool.pxi, built by
# PoolAttrs.geom_vector), whose leading (depth) dim must be trivial: in = out = kernel = stride = dilation = 1, pads 0.
# Per output pixel the window's taps are visited in the NCHW kernels' order (rows, then columns), with the same
# arithmetic (max: first tap, then `v > m`; average: float sum from 0, divided by the count), so the results are
# bit-identical to maxpool_f32 / avgpool_f32 on the transposed input.

cdef extern from "_native/nhwc_conv.h":
    ctypedef struct DwAct "onnxep_dwact":
        int mode
        float lo, hi
    float dwn_act1 "onnxep_dwn_act1"(float v, int mode, float lo, float hi) noexcept nogil
    void onnxep_dwn_px(float* y, const float* init, const float* const* xs, const float* const* ws, int nt,
                       Py_ssize_t C, const DwAct* act) noexcept nogil
    void onnxep_dwn_run(float* y, Py_ssize_t ystep, const float* init, const float* xb, Py_ssize_t xstep,
                        const Py_ssize_t* off, const float* const* ws, int nt, Py_ssize_t np, Py_ssize_t C,
                        const DwAct* act, int k3) noexcept nogil
    int onnxep_dwn_slide_p(Py_ssize_t kw, Py_ssize_t sw, Py_ssize_t Wo, Py_ssize_t C) noexcept nogil
    void onnxep_dwn_slide_row(float* y, Py_ssize_t ystep, const float* init, const float* xb, const Py_ssize_t* off,
                              const float* const* ws, int nt, Py_ssize_t kw, Py_ssize_t sw, Py_ssize_t W,
                              Py_ssize_t pw, Py_ssize_t Wo, Py_ssize_t C, Py_ssize_t T, int P,
                              const DwAct* act) noexcept nogil


cdef enum:
    DWN_ALIGN = 16                # cout of the packed weight is rounded up to this
    DWN_L1_FLOATS = 4096          # input floats per tile of an interior run (16 KB: half an L1d)
    DWN_L2_FLOATS = 131072        # input floats per tile of a sliding row (512 KB: half the smallest target's L2)


#: 1: rows go through the sliding blocks (onnxep_dwn_slide_row) where the variant has them; 0: the per-run loops only
#: (dw_nhwc_slide, for tests and A/B measurements)
cdef int dwn_slide_on = 1


def dw_nhwc_slide(bint on):
    """Turn the sliding-block path of conv_depthwise_nhwc_f32 on or off (process-wide); returns the previous state."""
    global dwn_slide_on
    prev = dwn_slide_on != 0
    dwn_slide_on = 1 if on else 0
    return prev


def dw_nhwc_slide_width(Py_ssize_t kw, Py_ssize_t sw, Py_ssize_t Wo, Py_ssize_t C):
    """The sliding block width (pixels) this variant uses for a kw-wide kernel at stride sw along W (dilation 1), Wo
    output columns and C channels; 0 where the row goes through the per-run loops (onnxep_dwn_slide_p)."""
    return onnxep_dwn_slide_p(kw, sw, Wo, C)


cdef struct NhwcGeom:
    Py_ssize_t N, H, W, C, cout, mult, CP
    Py_ssize_t kh, kw, sh, sw, dh, dw, ph, pw, Ho, Wo
    DwAct act                     # the epilogue (onnxep_dwact)


cdef inline Py_ssize_t _dwn_cp(Py_ssize_t cout) noexcept nogil:
    return (cout + DWN_ALIGN - 1) // DWN_ALIGN * DWN_ALIGN


cdef void _dwn_px_mult(float* y, const float* init, const float* const* xs, const float* const* ws, int nt,
                       Py_ssize_t C, Py_ssize_t mult, const DwAct* act) noexcept nogil:
    """_dwn_px with a channel multiplier: y[c*mult + k] (+)= sum_t ws[t][c*mult + k] * xs[t][c], same order."""
    cdef Py_ssize_t c, k, i, cout = C * mult
    cdef int t
    cdef const float* xp
    cdef const float* wp
    cdef float xv
    for i in range(cout):
        y[i] = init[i] if init != NULL else 0.0
    for t in range(nt):
        xp = xs[t]
        wp = ws[t]
        for c in range(C):
            xv = xp[c]
            for k in range(mult):
                y[c * mult + k] = y[c * mult + k] + wp[c * mult + k] * xv
    if act.mode:
        for i in range(cout):
            y[i] = dwn_act1(y[i], act.mode, act.lo, act.hi)


cdef inline void _dwn_taps(float* y, const float* bias, const float** xs, const float** ws, Py_ssize_t nt,
                           const NhwcGeom* g) noexcept nogil:
    """One output pixel from nt (input pixel, weight row) pairs."""
    if g.mult == 1:
        onnxep_dwn_px(y, bias, xs, ws, <int>nt, g.C, &g.act)
    else:
        _dwn_px_mult(y, bias, xs, ws, <int>nt, g.C, g.mult, &g.act)


cdef void _dwn_row(Py_ssize_t r, const float* x, const float* w, const float* bias, float* y,
                   const NhwcGeom* g, const float** xs) noexcept nogil:
    """Output row r = n*Ho + oh. xs: this thread's 3*kh*kw pointer-sized slots (input pixels, weight rows, offsets).
    Where this variant has sliding blocks for the geometry (onnxep_dwn_slide_p) the whole row goes through them;
    otherwise interior columns (every kernel column inside x) run through onnxep_dwn_run in tiles, over the kernel
    rows inside x (all of them except in the top / bottom border rows), and the left / right border pixels clip their
    taps one by one."""
    cdef Py_ssize_t n = r // g.Ho, oh = r % g.Ho, KS = g.kh * g.kw
    cdef Py_ssize_t ih0 = oh * g.sh - g.ph, blo = 0, bhi = g.kh, elo, ehi, ow, iw0, b, e, nt, ow_lo, ow_hi, T
    cdef int k3, P
    cdef const float** ws = xs + KS
    cdef Py_ssize_t* off = <Py_ssize_t*>(xs + 2 * KS)
    cdef const float* xn = x + n * g.H * g.W * g.C
    cdef float* yp = y + r * g.Wo * g.cout
    # kernel rows inside x: b in [blo, bhi)
    if ih0 < 0:
        blo = (-ih0 + g.dh - 1) // g.dh
    if ih0 + (g.kh - 1) * g.dh >= g.H:
        bhi = (g.H - 1 - ih0) // g.dh + 1 if g.H - 1 - ih0 >= 0 else 0
    if bhi < blo:
        bhi = blo
    # sliding blocks over the whole row (borders included) where this variant has them
    P = onnxep_dwn_slide_p(g.kw, g.sw, g.Wo, g.C) if dwn_slide_on and g.dw == 1 and g.mult == 1 and bhi > blo else 0
    if P:
        nt = 0
        for b in range(blo, bhi):
            for e in range(g.kw):
                off[nt] = (b - blo) * g.dh * g.W * g.C
                ws[nt] = w + (b * g.kw + e) * g.CP
                nt += 1
        # tiles of T pixels (channel blocks outer inside a tile) whose input rows stay in L2: a whole row unless it is
        # wider than DWN_L2_FLOATS (every channel block of a tile reads its own cache lines, so no tiling for L1)
        T = DWN_L2_FLOATS // max(<Py_ssize_t>1, (bhi - blo) * g.C * g.sw) // P * P
        onnxep_dwn_slide_row(yp, g.cout, bias, xn + (ih0 + blo * g.dh) * g.W * g.C, off, ws, <int>nt, g.kw, g.sw,
                             g.W, g.pw, g.Wo, g.C, max(<Py_ssize_t>P, T), P, &g.act)
        return
    # interior columns [ow_lo, ow_hi): ow*sw - pw >= 0 and ow*sw - pw + (kw-1)*dw < W
    ow_lo = min((g.pw + g.sw - 1) // g.sw, g.Wo)
    if g.W - 1 - (g.kw - 1) * g.dw + g.pw >= 0:
        ow_hi = min((g.W - 1 - (g.kw - 1) * g.dw + g.pw) // g.sw + 1, g.Wo)
    else:
        ow_hi = 0
    if ow_hi < ow_lo or g.mult != 1:
        ow_hi = ow_lo               # (with a channel multiplier every pixel goes through _dwn_px_mult)
    if ow_hi > ow_lo:
        nt = 0
        for b in range(blo, bhi):
            for e in range(g.kw):
                off[nt] = ((b - blo) * g.dh * g.W + e * g.dw) * g.C
                ws[nt] = w + (b * g.kw + e) * g.CP
                nt += 1
        # Tiles of T output pixels: a tile's input (kernel rows x its columns x all channels, ~DWN_L1_FLOATS) stays
        # in L1 while the channel blocks sweep over it; a whole row's input (3 x 56 x 128 floats for MobileNet's
        # 56x56x128) would not.
        T = (DWN_L1_FLOATS // max(<Py_ssize_t>1, (bhi - blo) * g.C) - (g.kw - 1) * g.dw) // g.sw
        T = max(<Py_ssize_t>8, T // 8 * 8)   # (whole 8-pixel register blocks)
        # kw = 3, dilation 1 along W: stride 1 (k3 = 1) or 2 (k3 = 2) have register-blocked loops in onnxep_dwn_run
        k3 = (1 if g.sw == 1 else 2 if g.sw == 2 else 0) if g.kw == 3 and g.dw == 1 else 0
        ow = ow_lo
        while ow < ow_hi:
            onnxep_dwn_run(yp + ow * g.cout, g.cout, bias,
                           xn + ((ih0 + blo * g.dh) * g.W + ow * g.sw - g.pw) * g.C, g.sw * g.C,
                           off, ws, <int>nt, min(T, ow_hi - ow), g.C, &g.act, k3)
            ow += T
    # the other pixels: taps clipped to x, still in tap order
    for ow in range(g.Wo):
        if ow_lo <= ow < ow_hi:
            continue
        iw0 = ow * g.sw - g.pw
        elo = 0
        ehi = g.kw
        if iw0 < 0:
            elo = (-iw0 + g.dw - 1) // g.dw
        if iw0 + (g.kw - 1) * g.dw >= g.W:
            ehi = (g.W - 1 - iw0) // g.dw + 1 if g.W - 1 - iw0 >= 0 else 0
        nt = 0
        for b in range(blo, bhi):
            for e in range(elo, ehi):
                xs[nt] = xn + ((ih0 + b * g.dh) * g.W + iw0 + e * g.dw) * g.C
                ws[nt] = w + (b * g.kw + e) * g.CP
                nt += 1
        _dwn_taps(yp + ow * g.cout, bias, xs, ws, nt, g)


cdef void conv_depthwise_nhwc_raw(const float* x, const float* w, const float* bias, float* y,
                                  const NhwcGeom* g, const float** ptrs, int nth) noexcept nogil:
    """All N*Ho output rows, one row per task; ptrs: nth blocks of 3*kh*kw pointer-sized slots, one per thread."""
    cdef DwnJob job
    job.x, job.w, job.bias, job.y, job.g, job.ptrs = x, w, bias, y, g, ptrs
    parallel_for(g.N * g.Ho, nth, _dwn_row_task, &job)


cdef struct DwnJob:
    const float* x
    const float* w
    const float* bias
    float* y
    const NhwcGeom* g
    const float** ptrs


cdef void _dwn_row_task(void* p, Py_ssize_t r, int tid) noexcept nogil:
    cdef DwnJob* j = <DwnJob*>p
    _dwn_row(r, j.x, j.w, j.bias, j.y, j.g, j.ptrs + <Py_ssize_t>tid * 3 * j.g.kh * j.g.kw)


#: activations the depthwise epilogue applies: name -> (onnxep_dwact mode, number of parameters)
DW_ACTIVATIONS = {"": (0, 0), "Relu": (1, 0), "Clip": (2, 2), "HardSwish": (3, 0)}


cdef DwAct _dw_act(activation, bint relu) except *:
    cdef DwAct a
    a.mode, a.lo, a.hi = (1 if relu else 0), 0.0, 0.0
    if activation is None:
        return a
    name, params = (activation, ()) if isinstance(activation, str) else (activation[0], tuple(activation[1:]))
    if name not in DW_ACTIVATIONS or len(params) != DW_ACTIVATIONS[name][1]:
        raise ValueError(f"unknown depthwise epilogue activation {activation!r}: expected one of {DW_ACTIVATIONS}")
    a.mode = DW_ACTIVATIONS[name][0]
    if params:
        a.lo, a.hi = params[0], params[1]
    return a


def dw_pack_weight_nhwc_size(Py_ssize_t cout, Py_ssize_t kh, Py_ssize_t kw):
    """float32 elements of a packed NHWC depthwise weight: kh*kw tap rows of cout rounded up to a multiple of 16."""
    if cout < 0 or kh < 1 or kw < 1:
        raise ValueError(f"dw_pack_weight_nhwc_size: bad cout={cout}, kernel=({kh}, {kw})")
    return kh * kw * _dwn_cp(cout)


def dw_pack_weight_nhwc(const float[::1] w, Py_ssize_t cout, Py_ssize_t kh, Py_ssize_t kw, float[::1] out):
    """out[(b*kw + e)*CP + oc] := w[oc, 0, b, e] (CP = cout rounded up to 16; the padding columns := 0)."""
    cdef Py_ssize_t CP, t, oc, KS
    if cout < 0 or kh < 1 or kw < 1:
        raise ValueError(f"dw_pack_weight_nhwc: bad cout={cout}, kernel=({kh}, {kw})")
    KS = kh * kw
    CP = _dwn_cp(cout)
    if w.shape[0] != cout * KS:
        raise ValueError(f"dw_pack_weight_nhwc: w has {w.shape[0]} elements, expected cout*kh*kw = {cout * KS}")
    if out.shape[0] != KS * CP:
        raise ValueError(f"dw_pack_weight_nhwc: out has {out.shape[0]} elements, expected {KS * CP} "
                         f"(dw_pack_weight_nhwc_size)")
    with nogil:
        for t in range(KS):
            for oc in range(cout):
                out[t * CP + oc] = w[oc * KS + t]
            for oc in range(cout, CP):
                out[t * CP + oc] = 0.0


cdef NhwcGeom _dwn_geom(tuple xshape, Py_ssize_t cout, tuple kernel, tuple strides, tuple dilations, tuple pads,
                        tuple out_spatial, activation, bint relu) except *:
    """The checked geometry and epilogue of a channel-last depthwise conv (conv_depthwise_nhwc_f32's arguments)."""
    cdef NhwcGeom g
    g.act = _dw_act(activation, relu)
    if len(xshape) != 4 or len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2 or len(pads) != 2 \
            or len(out_spatial) != 2:
        raise ValueError("conv_depthwise_nhwc_f32: xshape must have 4 entries (N, H, W, C) and kernel/strides/"
                         "dilations/pads/out_spatial 2 each")
    g.N, g.H, g.W, g.C = xshape
    g.cout = cout
    g.kh, g.kw = kernel
    g.sh, g.sw = strides
    g.dh, g.dw = dilations
    g.ph, g.pw = pads
    g.Ho, g.Wo = out_spatial
    if min(g.N, g.H, g.W, g.C) < 0:
        raise ValueError(f"conv_depthwise_nhwc_f32: negative dim in xshape {xshape}")
    if g.C < 1 or cout < g.C or cout % g.C:
        raise ValueError(f"conv_depthwise_nhwc_f32: cout={cout} must be a positive multiple of C={g.C}")
    if min(g.kh, g.kw, g.sh, g.sw, g.dh, g.dw) < 1 or min(g.ph, g.pw) < 0:
        raise ValueError(f"conv_depthwise_nhwc_f32: kernel/strides/dilations must be >= 1 and pads >= 0, got "
                         f"kernel={kernel} strides={strides} dilations={dilations} pads={pads}")
    if min(g.Ho, g.Wo) < 0:
        raise ValueError(f"conv_depthwise_nhwc_f32: negative output size {out_spatial}")
    g.mult = cout // g.C
    g.CP = _dwn_cp(cout)
    return g


cdef inline int _dwn_threads(const NhwcGeom* g, int nthreads) noexcept nogil:
    """Threads over output rows from a quarter of GEMM's threshold (a depthwise flop is memory-bound, not free)."""
    cdef int nth = conv_threads_flops(<double>8.0 * g.N * g.Ho * g.Wo * g.cout * g.kh * g.kw, nthreads)
    return <int>min(<Py_ssize_t>nth, max(<Py_ssize_t>1, g.N * g.Ho))


cdef int _dwn_call(const float* xp, const float* wp, const float* bptr, float* yp, const NhwcGeom* g,
                   int nthreads) noexcept nogil:
    """conv_depthwise_nhwc_raw with its per-thread tap tables allocated here: 0, or -1 when they cannot be."""
    cdef int nth = _dwn_threads(g, nthreads)
    # per thread 3*KS pointer-sized slots (see conv_depthwise_nhwc_raw; Py_ssize_t has the size of a pointer)
    cdef const float** ptrs = <const float**>malloc(nth * 3 * g.kh * g.kw * sizeof(void*))
    if ptrs == NULL:
        return -1
    conv_depthwise_nhwc_raw(xp, wp, bptr, yp, g, ptrs, nth)
    free(ptrs)
    return 0


def conv_depthwise_nhwc_f32(const float[::1] x, tuple xshape, const float[::1] w_packed, Py_ssize_t cout,
                            tuple kernel, tuple strides, tuple dilations, tuple pads, tuple out_spatial,
                            const float[::1] bias, float[::1] y, bint relu=False, int nthreads=0,
                            activation=None):
    """y := act(depthwise conv(x, w) [+ bias]), NHWC: xshape = (N, H, W, C), group == C, cout = C*mult (output
    channel oc reads input channel oc // mult); w packed by dw_pack_weight_nhwc; kernel, strides, dilations, begin pads
    and out_spatial = (Ho, Wo) are (h, w) pairs; y is (N, Ho, Wo, cout); bias (cout) may be None. act: `activation`
    (None, "Relu", ("Clip", min, max) or "HardSwish"; see DW_ACTIVATIONS), or Relu when relu is set."""
    cdef NhwcGeom g = _dwn_geom(xshape, cout, kernel, strides, dilations, pads, out_spatial, activation, relu)
    cdef Py_ssize_t KS = g.kh * g.kw
    cdef int rc
    if x.shape[0] != g.N * g.H * g.W * g.C:
        raise ValueError(f"conv_depthwise_nhwc_f32: x has {x.shape[0]} elements, xshape {xshape} needs "
                         f"{g.N * g.H * g.W * g.C}")
    if y.shape[0] != g.N * g.Ho * g.Wo * cout:
        raise ValueError(f"conv_depthwise_nhwc_f32: y has {y.shape[0]} elements, expected N*Ho*Wo*cout = "
                         f"{g.N * g.Ho * g.Wo * cout}")
    if w_packed.shape[0] != KS * g.CP:
        raise ValueError(f"conv_depthwise_nhwc_f32: packed weight has {w_packed.shape[0]} elements, expected "
                         f"{KS * g.CP} (dw_pack_weight_nhwc_size({cout}, {g.kh}, {g.kw}))")
    if bias is not None and bias.shape[0] != cout:
        raise ValueError(f"conv_depthwise_nhwc_f32: bias has {bias.shape[0]} elements, expected {cout}")
    if y.shape[0] == 0:
        return
    cdef const float* xp = &x[0] if x.shape[0] else NULL
    cdef const float* bptr = &bias[0] if bias is not None else NULL
    with nogil:
        rc = _dwn_call(xp, &w_packed[0], bptr, &y[0], &g, nthreads)
    if rc != 0:
        raise MemoryError("conv_depthwise_nhwc_f32: cannot allocate the tap pointer tables")


def dw_nhwc_step_args(tuple xshape, Py_ssize_t cout, tuple kernel, tuple strides, tuple dilations, tuple pads,
                      tuple out_spatial, activation=None):
    """(ints, floats) describing a channel-last depthwise conv (conv_depthwise_nhwc_f32's geometry and activation)
    to the compiled run loop's RL_DW_NHWC step (dw_nhwc_step)."""
    cdef NhwcGeom g = _dwn_geom(xshape, cout, kernel, strides, dilations, pads, out_spatial, activation, False)
    return ([g.N, g.H, g.W, g.C, g.cout, g.mult, g.CP, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.ph, g.pw, g.Ho, g.Wo,
             g.act.mode], [g.act.lo, g.act.hi])


cdef int dw_nhwc_step(const Py_ssize_t* n, const float* f, const float* xp, const float* wp, const float* bptr,
                      float* yp, int nthreads) noexcept nogil:
    """The channel-last depthwise conv from dw_nhwc_step_args' numbers (the run loop's RL_DW_NHWC): 0, or -1."""
    cdef NhwcGeom g
    g.N, g.H, g.W, g.C, g.cout, g.mult, g.CP = n[0], n[1], n[2], n[3], n[4], n[5], n[6]
    g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.ph, g.pw, g.Ho, g.Wo = n[7], n[8], n[9], n[10], n[11], n[12], n[13], \
        n[14], n[15], n[16]
    g.act.mode, g.act.lo, g.act.hi = <int>n[17], f[0], f[1]
    if g.N * g.Ho * g.Wo * g.cout == 0:
        return 0
    return _dwn_call(xp, wp, bptr, yp, &g, nthreads)


# ----------------------------------------------------------------------------------------------- NHWC pooling

cdef extern from "_native/nhwc_pool.h":
    void pool_px "onnxep_pool_px"(const float* const* taps, Py_ssize_t ntaps, Py_ssize_t C, float* y,
                                  int mode) noexcept nogil
    void pool_run "onnxep_pool_run"(const float* x0, Py_ssize_t step, const Py_ssize_t* off, Py_ssize_t ntaps,
                                    Py_ssize_t C, float* y, Py_ssize_t n, int mode) noexcept nogil
    enum:
        POOLN_MAX_TAPS "ONNXEP_POOLN_MAX_TAPS"   # windows of up to this many taps inside x go through onnxep_pool_px


cdef void _pooln_row(Py_ssize_t r, const float* x, float* y, Py_ssize_t C, const int64_t* g, int mode,
                     int count_include_pad) noexcept nogil:
    """Output row r = n*Ho + oh of an NHWC 2-D pool (geometry g: the 21-vector, depth dim trivial). mode 0: max,
    mode 1: average."""
    cdef Py_ssize_t H = g[1], W = g[2], Ho = g[4], Wo = g[5], KH = g[7], KW = g[8], SH = g[10], SW = g[11]
    cdef Py_ssize_t PH = g[13], PW = g[14], EH = g[16], EW = g[17], DH = g[19], DW = g[20]
    cdef Py_ssize_t n = r // Ho, oh = r % Ho, ow, a1, l1, h1, a2, l2, h2, j1, j2, c, cnt, nt, ow_lo = 0, ow_hi = 0
    cdef bint first
    cdef const float* xn = x + n * H * W * C
    cdef const float* xp
    cdef const float* taps[POOLN_MAX_TAPS]
    cdef Py_ssize_t off[POOLN_MAX_TAPS]
    cdef float* yp
    cdef float fc
    _tap_range(oh, H, KH, SH, PH, DH, &a1, &l1, &h1)
    if l1 == 0 and h1 == KH and KH * KW <= POOLN_MAX_TAPS:
        # output columns [ow_lo, ow_hi) have every kernel column inside x: one run with fixed tap offsets
        _inside_range(W, Wo, KW, SW, DW, PW, &ow_lo, &ow_hi)
        if ow_hi > ow_lo:
            nt = 0
            for j1 in range(KH):
                for j2 in range(KW):
                    off[nt] = (j1 * DH * W + j2 * DW) * C
                    nt += 1
            pool_run(xn + (a1 * W + ow_lo * SW - PW) * C, SW * C, off, nt, C, y + (r * Wo + ow_lo) * C,
                     ow_hi - ow_lo, mode)
    for ow in range(Wo):
        if ow_lo <= ow < ow_hi:
            continue
        _tap_range(ow, W, KW, SW, PW, DW, &a2, &l2, &h2)
        yp = y + (r * Wo + ow) * C
        nt = (h1 - l1) * (h2 - l2)
        if 0 < nt <= POOLN_MAX_TAPS:
            nt = 0
            for j1 in range(l1, h1):
                for j2 in range(l2, h2):
                    taps[nt] = xn + ((a1 + j1 * DH) * W + a2 + j2 * DW) * C
                    nt += 1
            pool_px(taps, nt, C, yp, mode)
        elif mode == 0:
            first = True
            for j1 in range(l1, h1):
                for j2 in range(l2, h2):
                    xp = xn + ((a1 + j1 * DH) * W + a2 + j2 * DW) * C
                    if first:
                        for c in range(C):
                            yp[c] = xp[c]
                        first = False
                    else:
                        for c in range(C):
                            yp[c] = xp[c] if xp[c] > yp[c] else yp[c]
            if first:                  # a window with no tap inside x (the NCHW kernel's answer)
                for c in range(C):
                    yp[c] = -INFINITY
            continue
        else:
            for c in range(C):
                yp[c] = 0.0
            for j1 in range(l1, h1):
                for j2 in range(l2, h2):
                    xp = xn + ((a1 + j1 * DH) * W + a2 + j2 * DW) * C
                    for c in range(C):
                        yp[c] = yp[c] + xp[c]
        if mode == 1:
            if count_include_pad:
                cnt = _pad_count(a1, KH, DH, H, PH, EH) * _pad_count(a2, KW, DW, W, PW, EW)
            else:
                cnt = (h1 - l1) * (h2 - l2)
            if cnt > 0:
                fc = <float>cnt
                for c in range(C):
                    yp[c] = yp[c] / fc
            else:
                for c in range(C):
                    yp[c] = NAN


cdef int _check_pool_nhwc(str name, const float[::1] x, float[::1] y, Py_ssize_t N, Py_ssize_t C,
                          const int64_t[::1] geom) except -1:
    _check_pool_geom(geom)
    if geom[0] != 1 or geom[3] != 1 or geom[6] != 1 or geom[9] != 1 or geom[12] != 0 or geom[15] != 0 \
            or geom[18] != 1:
        raise ValueError(f"{name}: 2-D pooling only, the depth entries of the geometry must be trivial "
                         f"(got {list(geom)})")
    if N < 0 or C < 0:
        raise ValueError(f"{name}: bad N={N}, C={C}")
    cdef Py_ssize_t nin = N * geom[1] * geom[2] * C, nout = N * geom[4] * geom[5] * C
    if x.shape[0] != nin or y.shape[0] != nout:
        raise ValueError(f"{name}: x has {x.shape[0]} elements (expected N*H*W*C = {nin}), y has {y.shape[0]} "
                         f"(expected N*Ho*Wo*C = {nout})")
    return 0


cdef void _poolnhwc_f32(const float* x, float* y, Py_ssize_t N, Py_ssize_t C, const int64_t* g, int mode,
                        int count_include_pad, int nthreads) noexcept nogil:
    cdef Py_ssize_t rows = N * g[4]
    cdef Py_ssize_t work = rows * g[5] * C * g[7] * g[8]
    cdef PoolnJob job
    job.x, job.y, job.C, job.g, job.mode, job.count_include_pad = x, y, C, g, mode, count_include_pad
    parallel_for(rows, 1 if work < POOL_PAR_WORK else _nthreads(nthreads), _pooln_row_task, &job)


cdef struct PoolnJob:
    const float* x
    float* y
    Py_ssize_t C
    const int64_t* g
    int mode, count_include_pad


cdef void _pooln_row_task(void* p, Py_ssize_t r, int tid) noexcept nogil:
    cdef PoolnJob* j = <PoolnJob*>p
    _pooln_row(r, j.x, j.y, j.C, j.g, j.mode, j.count_include_pad)


def maxpool_nhwc_f32(const float[::1] x, float[::1] y, Py_ssize_t N, Py_ssize_t C, const int64_t[::1] geom,
                     int nthreads=0):
    """y[n, oh, ow, c] := max over window (oh, ow) of x[n, :, :, c]; x (N, H, W, C), y (N, Ho, Wo, C) flattened;
    geom: the 21-entry vector of maxpool_f32 (PoolAttrs.geom_vector of a 2-D pool: depth entries trivial)."""
    _check_pool_nhwc("maxpool_nhwc_f32", x, y, N, C, geom)
    if y.shape[0] == 0:
        return
    with nogil:
        _poolnhwc_f32(&x[0], &y[0], N, C, &geom[0], 0, 0, nthreads)


def avgpool_nhwc_f32(const float[::1] x, float[::1] y, Py_ssize_t N, Py_ssize_t C, const int64_t[::1] geom,
                     int count_include_pad=0, int nthreads=0):
    """y[n, oh, ow, c] := mean over window (oh, ow) of x[n, :, :, c]; the divisor counts taps inside the input
    (count_include_pad=0) or inside the padded input [-pb, in + pe) (count_include_pad=1); geometry as
    maxpool_nhwc_f32."""
    _check_pool_nhwc("avgpool_nhwc_f32", x, y, N, C, geom)
    if y.shape[0] == 0:
        return
    with nogil:
        _poolnhwc_f32(&x[0], &y[0], N, C, &geom[0], 1, count_include_pad, nthreads)


cdef enum:
    GPN_BLOCK = 64                # channels per task of the NHWC global pools


cdef void _gpoolnhwc_task(Py_ssize_t t, const float* x, float* y, Py_ssize_t S, Py_ssize_t C, Py_ssize_t nb,
                          int is_max) noexcept nogil:
    """Channels [c0, c0 + GPN_BLOCK) of image n (t = n*nb + block): y[n, c] := max / mean over s of x[n, s, c]."""
    cdef Py_ssize_t n = t // nb, c0 = (t % nb) * GPN_BLOCK, cn = min(<Py_ssize_t>GPN_BLOCK, C - c0), s, c
    cdef const float* xp = x + n * S * C + c0
    cdef float* yp = y + n * C + c0
    cdef double acc[GPN_BLOCK]
    cdef float m[GPN_BLOCK]
    if is_max:
        for c in range(cn):
            m[c] = xp[c]
        for s in range(1, S):
            for c in range(cn):
                m[c] = xp[s * C + c] if xp[s * C + c] > m[c] else m[c]
        for c in range(cn):
            yp[c] = m[c]
    else:
        for c in range(cn):
            acc[c] = 0.0
        for s in range(S):
            for c in range(cn):
                acc[c] = acc[c] + xp[s * C + c]
        for c in range(cn):
            yp[c] = <float>(acc[c] / S)


cdef object _global_pool_nhwc(str name, const float[::1] x, tuple xshape, float[::1] y, int is_max, int nthreads):
    cdef Py_ssize_t N, C, S = 1
    if len(xshape) < 3:
        raise ValueError(f"{name}: xshape must be (N, spatial..., C), got {xshape}")
    N = xshape[0]
    C = xshape[len(xshape) - 1]
    for d in xshape[1:len(xshape) - 1]:
        S *= <Py_ssize_t>d
    if min(N, C, S) < 0:
        raise ValueError(f"{name}: negative dim in xshape {xshape}")
    if S == 0:
        raise ValueError(f"{name}: empty spatial extent in xshape {xshape}")
    if x.shape[0] != N * S * C or y.shape[0] != N * C:
        raise ValueError(f"{name}: x has {x.shape[0]} elements (expected {N * S * C}), y has {y.shape[0]} "
                         f"(expected N*C = {N * C})")
    if N * C == 0:
        return
    with nogil:
        global_pool_nhwc_c(&x[0], &y[0], N, S, C, is_max, _nthreads(nthreads))


cdef void global_pool_nhwc_c(const float* x, float* y, Py_ssize_t N, Py_ssize_t S, Py_ssize_t C, int is_max,
                             int nthreads) noexcept nogil:
    """y[n, c] := max / mean over s of x[n, s, c] (N * C > 0, S > 0), as global_avgpool_nhwc_f32 /
    global_maxpool_nhwc_f32 and the run loop's RL_GPOOL_NHWC step run it."""
    cdef GpoolnJob job
    cdef Py_ssize_t nb = (C + GPN_BLOCK - 1) // GPN_BLOCK
    job.x, job.y, job.S, job.C, job.nb, job.is_max = x, y, S, C, nb, is_max
    parallel_for(N * nb, 1 if N * S * C < POOL_PAR_WORK else nthreads, _gpoolnhwc_task_p, &job)


cdef struct GpoolnJob:
    const float* x
    float* y
    Py_ssize_t S, C, nb
    int is_max


cdef void _gpoolnhwc_task_p(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef GpoolnJob* j = <GpoolnJob*>p
    _gpoolnhwc_task(t, j.x, j.y, j.S, j.C, j.nb, j.is_max)


def global_avgpool_nhwc_f32(const float[::1] x, tuple xshape, float[::1] y, int nthreads=0):
    """y[n, c] := mean over the spatial dims of x[n, ..., c]; xshape = (N, spatial..., C) (mean accumulated in double,
    in the order of global_pool_f32, so the same result as it gives on the transposed input)."""
    _global_pool_nhwc("global_avgpool_nhwc_f32", x, xshape, y, 0, nthreads)


def global_maxpool_nhwc_f32(const float[::1] x, tuple xshape, float[::1] y, int nthreads=0):
    """y[n, c] := max over the spatial dims of x[n, ..., c]; xshape = (N, spatial..., C)."""
    _global_pool_nhwc("global_maxpool_nhwc_f32", x, xshape, y, 1, nthreads)


# ------------------------------------------------------------------------------- NCHW depthwise through channel-last
# A depthwise conv over NCHW activations whose plane kernels are slow (any kernel but the AVX-512 3x3 one: 5x5 / 7x7,
# small planes whose border columns go point by point) runs here instead: each image is transposed to NHWC into a
# scratch buffer (onnxep_tr_tile), the channel-last kernel above computes it (vectorised over the channels, taps in
# the same order: bias, then kernel row, then column), and the result is transposed back into y. On 1 thread, kernel
# alone (AVX-512): 7x7 on 3x16x8x8 134 -> ~20 us, 5x5 on 3x192x7x7 1004 -> ~55 us, 5x5/2 on 1x144x28x28 228 -> ~55 us.

cdef struct DwViaJob:
    const float* x
    float* y
    float* xt
    float* yt
    Py_ssize_t C, HW, cout, P     # input channels and pixels per image, output channels and pixels per image


cdef void _dw_to_nhwc_task(void* p, Py_ssize_t n, int tid) noexcept nogil:
    cdef DwViaJob* j = <DwViaJob*>p
    # xt[n][p*C + c] := x[n][c*HW + p]
    onnxep_tr_tile(4, <const uint8_t*>(j.x + n * j.C * j.HW), j.HW, <uint8_t*>(j.xt + n * j.C * j.HW), j.C, j.HW, j.C)


cdef void _dw_to_nchw_task(void* p, Py_ssize_t n, int tid) noexcept nogil:
    cdef DwViaJob* j = <DwViaJob*>p
    # y[n][c*P + p] := yt[n][p*cout + c]
    onnxep_tr_tile(4, <const uint8_t*>(j.yt + n * j.cout * j.P), j.cout, <uint8_t*>(j.y + n * j.cout * j.P), j.P,
                   j.cout, j.P)


cdef inline bint dw_nchw_via_nhwc_ok(const ConvGeom* g) noexcept nogil:
    """2-D (or 1-D), one output channel per input channel, and neither the AVX-512 3x3 plane kernel's case nor a 3x3
    stride-1 'same' one on large planes (the masked direct path reads x in place: on AVX2, 1x96x56x56 ran in ~0.7x
    the time of the transposes and the channel-last kernel; at stride 2 the latter took 0.4x)."""
    return (g.D == 1 and g.Do == 1 and g.kd == 1 and g.pd == 0 and g.cout == g.C and g.group == g.C
            and not _dw3_ok(g)
            and not (g.kh == 3 and g.kw == 3 and _dw_direct_ok(g) and g.H * g.W >= 1024))


cdef int dw_nchw_via_nhwc(Py_ssize_t N, const float* x, const float* w, const float* bias, float* y, bint relu,
                          const ConvGeom* g, int nth) except -1:
    """y (NCHW) := depthwise conv of x (NCHW) through the channel-last kernel (see above); w is (cout, 1, 1, kh, kw)."""
    cdef NhwcGeom ng
    cdef DwViaJob job
    cdef Py_ssize_t KS = g.kh * g.kw, t, oc
    ng.N, ng.H, ng.W, ng.C, ng.cout, ng.mult = N, g.H, g.W, g.C, g.cout, 1
    ng.CP = _dwn_cp(g.cout)
    ng.kh, ng.kw, ng.sh, ng.sw, ng.dh, ng.dw = g.kh, g.kw, g.sh, g.sw, g.dh, g.dw
    ng.ph, ng.pw, ng.Ho, ng.Wo = g.ph, g.pw, g.Ho, g.Wo
    ng.act.mode, ng.act.lo, ng.act.hi = (1 if relu else 0), 0.0, 0.0
    cdef Py_ssize_t nx = N * g.C * g.H * g.W, ny = N * g.cout * g.Ho * g.Wo, nw = KS * ng.CP
    cdef int nthr = <int>min(<Py_ssize_t>nth, N * g.Ho)
    cdef float* buf = <float*>malloc((nx + ny + nw + 16) * sizeof(float))
    cdef const float** ptrs = <const float**>malloc(max(nthr, 1) * 3 * KS * sizeof(void*))
    if buf == NULL or ptrs == NULL:
        free(buf)
        free(ptrs)
        raise MemoryError("conv_depthwise_f32: cannot allocate the channel-last scratch buffers")
    cdef float* wp = buf
    job.xt = buf + nw
    job.yt = job.xt + nx
    job.x, job.y, job.C, job.HW, job.cout, job.P = x, y, g.C, g.H * g.W, g.cout, g.Ho * g.Wo
    with nogil:
        for t in range(KS):
            for oc in range(g.cout):
                wp[t * ng.CP + oc] = w[oc * KS + t]
            for oc in range(g.cout, ng.CP):
                wp[t * ng.CP + oc] = 0.0
        parallel_for(N, <int>min(<Py_ssize_t>nth, N), _dw_to_nhwc_task, &job)
        conv_depthwise_nhwc_raw(job.xt, wp, bias, job.yt, &ng, ptrs, nthr)
        parallel_for(N, <int>min(<Py_ssize_t>nth, N), _dw_to_nchw_task, &job)
    free(buf)
    free(ptrs)
    return 0
