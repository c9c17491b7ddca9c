# Convolution over channel-last (NHWC) activations, 2-D: one packed GEMM per group, A read in place from x.
#
#     Y[n, oh, ow, g*Coutg:(g+1)*Coutg] = A_g (P x Kc) @ W_g' (Kc x Coutg)   P = N*Ho*Wo, Kc = kh*kw*Cg
#
# A_g is the implicit im2col of x (ImplicitA in _k_gemm.pxi: k = (b*kw + e)*Cg + c, channels innermost), packed
# block by block straight from x, so there is no im2col buffer; a 1x1 stride-1 conv is the plain GEMM x @ W'. Y is
# written row-major (NHWC) by the micro-kernel with bias, a residual R (NHWC, Y's shape) and the activation fused in
# the epilogue. W' is W[g] reordered to (Coutg, kh, kw, Cg) and packed as a transposed B (conv_nhwc_pack_weight).


def conv_nhwc_pack_weight_size(Py_ssize_t cout, Py_ssize_t kc, Py_ssize_t group):
    """float32 elements of a conv weight packed per group for conv_nhwc_f32 (kc = Cin_g*kh*kw)."""
    if group < 1 or cout % group or kc < 0:
        raise ValueError(f"conv_nhwc_pack_weight_size: bad cout={cout}, kc={kc}, group={group}")
    return group * sgemm_pack_b_len(kc, cout // group)


def conv_nhwc_pack_weight(const float[:, :, :, ::1] w, Py_ssize_t group, float[::1] out):
    """out := w (cout, Cin_g, kh, kw) packed per group as the B operand of conv_nhwc_f32 (rows k = (b*kw + e)*Cg + c).
    """
    cdef Py_ssize_t cout = w.shape[0], Cg = w.shape[1], kh = w.shape[2], kw = w.shape[3]
    cdef Py_ssize_t kc = Cg * kh * kw, coutg, blen, gi, o, c, t
    if group < 1 or cout < 1 or cout % group:
        raise ValueError(f"conv_nhwc_pack_weight: cout={cout} is not a positive multiple of group={group}")
    coutg = cout // group
    blen = sgemm_pack_b_len(kc, coutg)
    if out.shape[0] != group * blen:
        raise ValueError(f"conv_nhwc_pack_weight: out has {out.shape[0]} elements, expected {group * blen}")
    if kc == 0:
        return
    cdef float* wt = <float*>malloc(coutg * kc * sizeof(float))
    if wt == NULL:
        raise MemoryError("conv_nhwc_pack_weight: cannot allocate the reordered weight")
    try:
        with nogil:
            for gi in range(group):
                for o in range(coutg):          # wt[o, t, c] = w[gi*coutg + o, c, t]  (t = b*kw + e)
                    for c in range(Cg):
                        for t in range(kh * kw):
                            wt[(o * kh * kw + t) * Cg + c] = w[gi * coutg + o, c, t // kw, t % kw]
                sgemm_pack_b_raw(kc, coutg, wt, 1, kc, &out[gi * blen])
    finally:
        free(wt)


def conv_nhwc_f32(const float[::1] x, tuple xshape, const float[::1] w_packed, Py_ssize_t cout, Py_ssize_t group,
                  tuple kernel, tuple strides, tuple dilations, tuple pads, tuple out_spatial,
                  const float[::1] bias, const float[::1] res, float[::1] y, bint relu=False, int nthreads=0,
                  activation=None):
    """y := act(conv(x, W) [+ bias] [+ res]) (act: see make_act; Relu when relu is set) over NHWC x (xshape = (N, H, W, C)) into NHWC y (N, Ho, Wo, cout);
    W packed by conv_nhwc_pack_weight; kernel, strides, dilations, begin pads and out_spatial are (h, w) pairs;
    res (optional) has y's shape."""
    cdef ImplicitA ia
    cdef Act act = make_act(activation, relu)
    cdef Py_ssize_t N, Cg, Coutg, Kc, P, blen, gi, t, rb
    cdef int nth, nth_gemm
    cdef float* work = NULL
    cdef float* mine
    cdef const float* bptr = NULL
    cdef const float* rptr = NULL
    cdef const float* wp = NULL
    cdef const float* xp
    cdef float* yp
    if len(xshape) != 4 or len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2 or len(pads) != 2 \
            or len(out_spatial) != 2:
        raise ValueError("conv_nhwc_f32: xshape must be (N, H, W, C) and kernel/strides/dilations/pads/out_spatial "
                         "(h, w) pairs")
    N, ia.H, ia.W, ia.C = xshape
    ia.kh, ia.kw = kernel
    ia.sh, ia.sw = strides
    ia.dh, ia.dw = dilations
    ia.ph, ia.pw = pads
    ia.Ho, ia.Wo = out_spatial
    ia.p0 = 0
    if group < 1 or ia.C % group or cout % group or cout < 1:
        raise ValueError(f"conv_nhwc_f32: group={group} must divide C={ia.C} and cout={cout}")
    if min(ia.kh, ia.kw, ia.sh, ia.sw, ia.dh, ia.dw) < 1 or min(ia.ph, ia.pw) < 0 or min(ia.Ho, ia.Wo, N) < 0:
        raise ValueError(f"conv_nhwc_f32: bad geometry kernel={kernel} strides={strides} dilations={dilations} "
                         f"pads={pads} out={out_spatial}")
    Cg = ia.C // group
    ia.Cg = Cg
    Coutg = cout // group
    Kc = Cg * ia.kh * ia.kw
    P = N * ia.Ho * ia.Wo
    blen = sgemm_pack_b_len(Kc, Coutg)
    if x.shape[0] != N * ia.H * ia.W * ia.C:
        raise ValueError(f"conv_nhwc_f32: x has {x.shape[0]} elements, shape {xshape} needs {N * ia.H * ia.W * ia.C}")
    if y.shape[0] != P * cout:
        raise ValueError(f"conv_nhwc_f32: y has {y.shape[0]} elements, expected {P * cout}")
    if res is not None and res.shape[0] != P * cout:
        raise ValueError(f"conv_nhwc_f32: res has {res.shape[0]} elements, expected {P * cout}")
    if w_packed.shape[0] != group * blen:
        raise ValueError(f"conv_nhwc_f32: packed weight has {w_packed.shape[0]} elements, expected {group * blen} "
                         f"({SGEMM_FORMAT})")
    if bias is not None and bias.shape[0] != cout:
        raise ValueError(f"conv_nhwc_f32: bias has {bias.shape[0]} elements, expected {cout}")
    if P == 0:
        return
    if Kc > 0:
        wp = &w_packed[0]
    xp = &x[0] if x.shape[0] else NULL
    bptr = &bias[0] if bias is not None else NULL
    rptr = &res[0] if res is not None else NULL
    yp = &y[0]
    # Big per-group GEMMs run one after another, each on every thread. Small ones are split by blocks of output
    # pixels (every group of a block on one thread): threads over groups would write neighbouring column ranges of
    # the same output rows, sharing cache lines at the group borders (measured 1.0x from 2 threads vs 1.6x by blocks
    # on ShuffleNet's 14x14x272 group-4 1x1 conv).
    nth = sgemm_threads(P, Coutg, Kc, nthreads)
    rb = P
    if nth == 1 and group > 1 and <double>2.0 * P * Coutg * Kc * group >= SGEMM_MT_FLOPS:
        nth = _nthreads(nthreads)
        rb = _round_up((P + 4 * nth - 1) // (4 * nth), SGEMM_MR)
        nth = <int>min(<Py_ssize_t>nth, (P + rb - 1) // rb)
        nth_gemm = 1
    else:
        nth_gemm = nth
        nth = 1
    work = <float*>malloc(nth * sgemm_work_len(nth_gemm) * sizeof(float))
    if work == NULL:
        raise MemoryError("conv_nhwc_f32: cannot allocate the packing workspace")
    try:
        with nogil:
            if nth == 1:
                for gi in range(group):
                    _conv_nhwc_group(&ia, gi, xp, wp + gi * blen, bptr, rptr, yp, 0, P, Coutg, Kc, cout, &act, work,
                                     nth_gemm)
            else:
                for t in prange((P + rb - 1) // rb, num_threads=nth, schedule="dynamic"):
                    mine = work + <Py_ssize_t>openmp.omp_get_thread_num() * sgemm_work_len(1)
                    for gi in range(group):
                        _conv_nhwc_group(&ia, gi, xp, wp + gi * blen, bptr, rptr, yp, t * rb, min(rb, P - t * rb),
                                         Coutg, Kc, cout, &act, mine, 1)
    finally:
        free(work)


cdef void _conv_nhwc_group(const ImplicitA* ia0, Py_ssize_t gi, const float* x, const float* wp, const float* bias,
                           const float* res, float* y, Py_ssize_t p0, Py_ssize_t M, Py_ssize_t Coutg, Py_ssize_t Kc,
                           Py_ssize_t cout, const Act* act, float* work, int nth) noexcept nogil:
    """Output channels gi*Coutg.. of the pixels p0 .. p0+M-1: one GEMM, A read from x through the group's
    ImplicitA."""
    cdef ImplicitA ia = ia0[0]
    ia.x = x + gi * ia.Cg
    ia.p0 = p0
    sgemm_packed_ex(M, Coutg, Kc, 1.0, NULL, 0, 0, &ia, wp, 0.0, y + p0 * cout + gi * Coutg, cout, 1,
                    (bias + gi * Coutg) if bias != NULL else NULL, NULL,
                    (res + p0 * cout + gi * Coutg) if res != NULL else NULL, act, work, nth)
