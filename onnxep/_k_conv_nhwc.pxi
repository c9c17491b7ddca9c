# Convolution over channel-last (NHWC) activations, 2-D: one packed GEMM per group, A read in place from x.
#
#     Y[n, oh, ow, g*Coutg:(g+1)*Coutg] = A_g (P x Kc) @ W_g' (Kc x Coutg)   P = N*Ho*Wo, Kc = kh*kw*Cg
#
# A_g is the implicit im2col of x (ImplicitA in _k_gemm.pxi: k = (b*kw + e)*Cg + c, channels innermost), packed
# block by block straight from x, so there is no im2col buffer; a 1x1 stride-1 conv is the plain GEMM x @ W'. Y is
# written row-major (NHWC) by the micro-kernel with bias, a residual R (NHWC, Y's shape) and the activation fused in
# the epilogue. W' is W[g] reordered to (Coutg, kh, kw, Cg) and packed as a transposed B (conv_nhwc_pack_weight).


cdef extern from "_native/direct_conv.h":
    ctypedef struct DRun "onnxep_drun":
        Py_ssize_t a
        Py_ssize_t b
        Py_ssize_t n
        Py_ssize_t sb
    void dconv_uk "onnxep_dconv_uk"(Py_ssize_t mr, const float* x, Py_ssize_t xo, Py_ssize_t rs, const DRun* runs,
                                    Py_ssize_t nruns, const float* bp, Py_ssize_t jp, Py_ssize_t pfo, int pfc,
                                    Py_ssize_t nr, float* c,
                                    Py_ssize_t rsc,
                                    float alpha, float beta, const float* bias_col, const float* bias_row,
                                    const float* res, const Act* act) noexcept nogil
    void dconv_call "onnxep_dconv_call"(Py_ssize_t mr, const float* kp, const uint16_t* kpb, const uint16_t* xb,
                                        const float* x, Py_ssize_t xo, Py_ssize_t rs,
                                        const DRun* runs, Py_ssize_t nruns, const float* bp, Py_ssize_t jp,
                                        Py_ssize_t pfo, int pfc, Py_ssize_t nr, float* c, Py_ssize_t rsc,
                                        float alpha, float beta, const float* bias_col, const float* bias_row,
                                        const float* res, const Act* act) noexcept nogil
    void dconv_kp_pack "onnxep_dconv_kp_pack"(const float* wp, Py_ssize_t K, int NV, float* out) noexcept nogil
    int KP_MAXN "ONNXEP_KP_MAXN"
    int KPB_OK "ONNXEP_KPB_OK"
    void cvt_bf16 "onnxep_cvt_bf16"(const float* x, Py_ssize_t n, uint16_t* out) noexcept nogil
    void dconv_kpb_pack "onnxep_dconv_kpb_pack"(const float* wp, Py_ssize_t K, int Q, uint16_t* out) noexcept nogil


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
    cdef const float* wp = &w[0, 0, 0, 0]
    cdef const float* src
    cdef float* dst
    cdef Py_ssize_t T = kh * kw
    if T == 1:      # a 1x1 kernel: W[g] (coutg, Cg) row-major is already the transposed B, packed in place
        with nogil:
            for gi in range(group):
                sgemm_pack_b_raw(kc, coutg, wp + gi * coutg * kc, 1, kc, &out[gi * blen])
        return
    cdef float* wt = <float*>malloc(coutg * kc * sizeof(float))
    if wt == NULL:
        raise MemoryError("conv_nhwc_pack_weight: cannot allocate the reordered weight")
    try:
        with nogil:
            for gi in range(group):
                for o in range(coutg):          # wt[o, t, c] = w[gi*coutg + o, c, t]  (t = b*kw + e)
                    src = wp + (gi * coutg + o) * kc
                    dst = wt + o * kc
                    for c in range(Cg):
                        for t in range(T):
                            dst[t * Cg + c] = src[c * T + t]
                sgemm_pack_b_raw(kc, coutg, wt, 1, kc, &out[gi * blen])
    finally:
        free(wt)


def conv_nhwc_f32(const float[::1] x, tuple xshape, const float[::1] w_packed, Py_ssize_t cout, Py_ssize_t group,
                  tuple kernel, tuple strides, tuple dilations, tuple pads, tuple out_spatial,
                  const float[::1] bias, const float[::1] res, float[::1] y, bint relu=False, int nthreads=0,
                  activation=None, str path="auto", Py_ssize_t ldy=0):
    """y := act(conv(x, W) [+ bias] [+ res]) (act: see make_act; Relu when relu is set) over NHWC x (xshape = (N, H, W, C)) into NHWC y (N, Ho, Wo, cout);
    W packed by conv_nhwc_pack_weight; kernel, strides, dilations, begin pads and out_spatial are (h, w) pairs;
    y's pixels are ldy floats apart (0: cout; more: y is a channel slice of a wider channel-last tensor -- a
    Concat's output written in place -- and y spans (pixels - 1) * ldy + cout floats from the first output; no res
    then). res (optional) has y's shape and may be y itself (computed in place, with the same result: the epilogue reads each
    element of res before it writes that element of y; where the packed path would write y before its last K block,
    res is copied first; any other overlap is refused). path: "packed" (A packed per block: the GEMM path), "direct" (A read in place by
    onnxep_dconv_uk; SIMD variants), "auto" (direct where it measured faster, _dconv_auto), "winograd" (F(2x2, 3x3),
    _k_winograd.pxi: 3x3 kernels, stride and dilation 1, group 1, W packed by conv_wino_pack_weight; SIMD variants)
    or "winograd4" (F(4x4, 3x3), the same with W packed by conv_wino_pack_weight(..., 4)); "winograd-bf16" and
    "winograd4-bf16": the same with the plane GEMMs in bf16, W packed by conv_wino_pack_weight_bf16(..., m);
    "direct-bf16" and "auto-bf16": "direct" / "auto", with a direct conv of at most 16 output channels per group on
    bf16 operands where the CPU has vdpbf16ps (_dconv_kpb_applies; else as without the suffix).
    ConvNhwc(...).run(...) in one call: a kernel running the same shapes again keeps its ConvNhwc."""
    ConvNhwc(xshape, w_packed, cout, group, kernel, strides, dilations, pads, out_spatial, relu, activation,
             path).run(x, bias, res, y, nthreads, ldy)


cdef enum:
    WINO_M = 15           # ConvNhwc.wino: the output tile m ...
    WINO_BF16 = 16        # ... and this bit for the plane GEMMs on bf16 operands

# conv_nhwc_f32's winograd paths -> ConvNhwc.wino
_CONV_NHWC_WINO = {"winograd": 2, "winograd4": 4, "winograd-bf16": 2 | WINO_BF16, "winograd4-bf16": 4 | WINO_BF16}


cdef class ConvNhwc:
    """conv_nhwc_f32 with everything that depends only on the shapes, the packed weight, the activation and the path
    checked and worked out once (ConvNhwc(...)); run(x, bias, res, y, nthreads, ldy) checks the sizes of the
    per-run arrays and computes. Holds a reference to the packed weight."""
    cdef ImplicitA ia
    cdef Act act
    cdef Py_ssize_t N, group, cout, Coutg, Kc, P, blen
    cdef int direct          # the path run() takes: direct (2: with bf16 k-pairs, _dconv_kpb_applies), winograd or
                             # else packed
    cdef Py_ssize_t wino     # the winograd path's output tile m (2 or 4), | WINO_BF16 on bf16 operands, else 0
    cdef const float[::1] w

    def __init__(self, tuple xshape, const float[::1] w_packed, Py_ssize_t cout, Py_ssize_t group, tuple kernel,
                 tuple strides, tuple dilations, tuple pads, tuple out_spatial, bint relu=False, activation=None,
                 str path="auto"):
        cdef ImplicitA ia
        self.act = make_act(activation, relu)
        if len(xshape) != 4 or len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2 or len(pads) != 2 \
                or len(out_spatial) != 2:
            raise ValueError("conv_nhwc_f32: xshape must be (N, H, W, C) and kernel/strides/dilations/pads/"
                             "out_spatial (h, w) pairs")
        self.N, ia.H, ia.W, ia.C = xshape
        ia.kh, ia.kw = kernel
        ia.sh, ia.sw = strides
        ia.dh, ia.dw = dilations
        ia.ph, ia.pw = pads
        ia.Ho, ia.Wo = out_spatial
        ia.p0 = 0
        ia.x = NULL
        if group < 1 or ia.C % group or cout % group or cout < 1:
            raise ValueError(f"conv_nhwc_f32: group={group} must divide C={ia.C} and cout={cout}")
        if min(ia.kh, ia.kw, ia.sh, ia.sw, ia.dh, ia.dw) < 1 or min(ia.ph, ia.pw) < 0 or min(ia.Ho, ia.Wo, self.N) < 0:
            raise ValueError(f"conv_nhwc_f32: bad geometry kernel={kernel} strides={strides} dilations={dilations} "
                             f"pads={pads} out={out_spatial}")
        ia.Cg = ia.C // group
        self.group, self.cout = group, cout
        self.Coutg = cout // group
        self.Kc = ia.Cg * ia.kh * ia.kw
        self.P = self.N * ia.Ho * ia.Wo
        if path not in _CONV_NHWC_WINO and path not in ("auto", "direct", "packed", "auto-bf16", "direct-bf16"):
            raise ValueError(f"conv_nhwc_f32: path must be 'auto', 'direct', 'packed', 'auto-bf16', 'direct-bf16' or "
                             f"one of "
                             f"{', '.join(map(repr, _CONV_NHWC_WINO))}, got {path!r}")
        if (path in ("direct", "direct-bf16") or path in _CONV_NHWC_WINO) and not SGEMM_SIMD:
            raise ValueError(f"conv_nhwc_f32: the {path} path needs a SIMD variant (variant "
                             f"{ONNXEP_ISA_NAME.decode()})")
        self.wino = _CONV_NHWC_WINO.get(path, 0)
        if self.wino and not wino_applies(kernel, strides, dilations, group, ia.C):
            raise ValueError(f"conv_nhwc_f32: the winograd path takes 3x3 kernels, strides and dilations 1, group 1 "
                             f"and at most {WINO_MAX_C} channels; got kernel={kernel} strides={strides} "
                             f"dilations={dilations} group={group} C={ia.C}")
        if self.wino & WINO_BF16:
            self.blen = _wino_planes(self.wino & WINO_M) * bg_pack_b_len(ia.C, cout)
        elif self.wino:
            self.blen = _wino_planes(self.wino) * sgemm_pack_b_len(ia.C, cout)
        else:
            self.blen = sgemm_pack_b_len(self.Kc, self.Coutg)
        if w_packed.shape[0] != group * self.blen:
            raise ValueError(f"conv_nhwc_f32: packed weight has {w_packed.shape[0]} elements, expected "
                             f"{group * self.blen} ({BGEMM_FORMAT if self.wino & WINO_BF16 else SGEMM_FORMAT}"
                             f"{f':{path}' if self.wino else ''})")
        self.ia = ia
        self.w = w_packed
        bf16 = path in ("direct-bf16", "auto-bf16")
        if bf16:
            path = path[:-5]
        self.direct = not self.wino and self.Kc > 0 and (
            path == "direct" or (path == "auto" and _dconv_auto(&ia, self.N, self.Kc, self.Coutg)))
        if self.direct and bf16 and _dconv_kpb_applies(&ia, self.Coutg):
            self.direct = 2

    def run(self, const float[::1] x, const float[::1] bias, const float[::1] res, float[::1] y, int nthreads=0,
            Py_ssize_t ldy=0):
        """y := act(conv(x, W) [+ bias] [+ res]) as conv_nhwc_f32 says, for the shapes this ConvNhwc was made for."""
        cdef ImplicitA ia = self.ia
        cdef Py_ssize_t N = self.N, group = self.group, cout = self.cout, Coutg = self.Coutg, Kc = self.Kc
        cdef Py_ssize_t P = self.P, blen = self.blen
        cdef int rc
        cdef const float* bptr = NULL
        cdef const float* rptr = NULL
        cdef const float* wp = NULL
        cdef const float* xp
        cdef float* yp
        if x.shape[0] != N * ia.H * ia.W * ia.C:
            raise ValueError(f"conv_nhwc_f32: x has {x.shape[0]} elements, shape {(N, ia.H, ia.W, ia.C)} needs "
                             f"{N * ia.H * ia.W * ia.C}")
        if ldy == 0:
            ldy = cout
        if ldy < cout or (ldy != cout and res is not None):
            raise ValueError(f"conv_nhwc_f32: ldy={ldy} must be 0, or at least cout={cout} with no res")
        if y.shape[0] != (P * ldy if ldy == cout else max(P - 1, 0) * ldy + cout):
            raise ValueError(f"conv_nhwc_f32: y has {y.shape[0]} elements, expected "
                             f"{P * cout if ldy == cout else max(P - 1, 0) * ldy + cout}")
        if res is not None and res.shape[0] != P * cout:
            raise ValueError(f"conv_nhwc_f32: res has {res.shape[0]} elements, expected {P * cout}")
        if bias is not None and bias.shape[0] != cout:
            raise ValueError(f"conv_nhwc_f32: bias has {bias.shape[0]} elements, expected {cout}")
        if P == 0:
            return
        if Kc > 0:
            wp = &self.w[0]
        xp = &x[0] if x.shape[0] else NULL
        bptr = &bias[0] if bias is not None else NULL
        rptr = &res[0] if res is not None else NULL
        yp = &y[0]
        if rptr != NULL and rptr != yp and rptr < yp + P * cout and yp < rptr + P * cout:
            raise ValueError("conv_nhwc_f32: res overlaps y without being y")
        with nogil:
            rc = conv_nhwc_exec(&ia, N, group, cout, Coutg, Kc, P, blen, self.direct, self.wino, &self.act, xp, wp,
                                bptr, rptr, yp, ldy, nthreads)
        if rc != 0:
            raise MemoryError("conv_nhwc_f32: cannot allocate a workspace")

    def step_args(self):
        """(ints, floats) describing this conv to the compiled run loop's RL_CONV_NHWC step (conv_nhwc_step)."""
        cdef ImplicitA ia = self.ia
        return ([self.N, self.group, self.cout, self.Coutg, self.Kc, self.P, self.blen, self.direct, self.wino,
                 self.act.kind, ia.H, ia.W, ia.C, ia.Cg, ia.kh, ia.kw, ia.sh, ia.sw, ia.dh, ia.dw, ia.ph, ia.pw,
                 ia.Ho, ia.Wo], [self.act.a, self.act.b])


cdef int conv_nhwc_step(const Py_ssize_t* n, const float* f, const float* xp, const float* wp, const float* bptr,
                        const float* rptr, float* yp, int nthreads) noexcept nogil:
    """conv_nhwc_exec from ConvNhwc.step_args' numbers (the run loop's RL_CONV_NHWC)."""
    cdef ImplicitA ia
    cdef Act act
    act.kind, act.a, act.b = <int>n[9], f[0], f[1]
    ia.x, ia.p0 = NULL, 0
    ia.H, ia.W, ia.C, ia.Cg, ia.kh, ia.kw, ia.sh, ia.sw = n[10], n[11], n[12], n[13], n[14], n[15], n[16], n[17]
    ia.dh, ia.dw, ia.ph, ia.pw, ia.Ho, ia.Wo = n[18], n[19], n[20], n[21], n[22], n[23]
    if n[5] == 0:
        return 0
    return conv_nhwc_exec(&ia, n[0], n[1], n[2], n[3], n[4], n[5], n[6], <int>n[7], n[8], &act, xp,
                          wp if n[4] > 0 else NULL, bptr, rptr, yp, n[2], nthreads)


cdef int conv_nhwc_exec(const ImplicitA* ia0, Py_ssize_t N, Py_ssize_t group, Py_ssize_t cout, Py_ssize_t Coutg,
                        Py_ssize_t Kc, Py_ssize_t P, Py_ssize_t blen, int direct, Py_ssize_t wino, const Act* act,
                        const float* xp, const float* wp, const float* bptr, const float* rptr, float* yp,
                        Py_ssize_t ldy, int nthreads) noexcept nogil:
    """ConvNhwc.run's computation, its sizes checked by the caller: 0, or -1 when a workspace cannot be allocated."""
    cdef ImplicitA ia = ia0[0]
    cdef Py_ssize_t gi, rb
    cdef int nth, nth_gemm
    cdef float* work = NULL
    cdef float* res_copy = NULL
    cdef ConvJob job
    if wino:
        return _conv_wino(xp, N, ia.H, ia.W, ia.C, cout, ia.Ho, ia.Wo, ia.ph, ia.pw, wp, bptr, rptr, yp, ldy,
                          act, conv_threads(P, cout, Kc, nthreads), wino & WINO_M,
                          bg_kernel() if wino & WINO_BF16 else -1)
    if direct:
        return _conv_nhwc_direct(&ia, N, group, xp, wp, blen, bptr, rptr, yp, Coutg, Kc, ldy, act,
                                 conv_threads(P, cout, Kc, nthreads), direct == 2)
    # Big per-group GEMMs run one after another, each on every thread. Small ones are split by blocks of
    # output pixels (every group of a block on one thread): threads over groups would write neighbouring column
    # ranges of the same output rows, sharing cache lines at the group borders (measured 1.0x from 2 threads vs
    # 1.6x by blocks on ShuffleNet's 14x14x272 group-4 1x1 conv).
    nth = conv_threads(P, Coutg, Kc, nthreads)
    rb = P
    if nth == 1 and group > 1 and <double>2.0 * P * Coutg * Kc * group >= CONV_MT_FLOPS:
        nth = _nthreads(nthreads)
        rb = _round_up((P + 4 * nth - 1) // (4 * nth), SGEMM_MR)
        nth = <int>min(<Py_ssize_t>nth, (P + rb - 1) // rb)
        nth_gemm = 1
    else:
        nth_gemm = nth
        nth = 1
    if rptr == yp and Kc > SGEMM_KC:    # the first K blocks write y before the last one reads res: keep a copy
        res_copy = <float*>malloc(P * cout * sizeof(float))
        if res_copy == NULL:
            return -1
        memcpy(res_copy, rptr, P * cout * sizeof(float))
        rptr = res_copy
    work = <float*>malloc(nth * sgemm_work_len(nth_gemm) * sizeof(float))
    if work == NULL:
        free(res_copy)
        return -1
    if nth == 1 and group == 1 and _chan_split((P + SGEMM_MC - 1) // SGEMM_MC, (Coutg + SGEMM_NR - 1) // SGEMM_NR,
                                               Kc, P, nth_gemm):
        job.ia, job.x, job.wp, job.bias, job.res, job.y = &ia, xp, wp, bptr, rptr, yp
        job.Coutg, job.Kc, job.cout, job.act, job.P, job.work = Coutg, Kc, ldy, act, P, work
        job.pslab = _chan_split_slab((Coutg + SGEMM_NR - 1) // SGEMM_NR, nth_gemm)
        job.nslabs = ((Coutg + SGEMM_NR - 1) // SGEMM_NR + job.pslab - 1) // job.pslab
        parallel_for(job.nslabs, nth_gemm, _conv_chan_task, &job)
    elif nth == 1:
        for gi in range(group):
            _conv_nhwc_group(&ia, gi, xp, wp + gi * blen, bptr, rptr, yp, 0, P, Coutg, Kc, ldy, act, work, nth_gemm)
    else:
        job.ia, job.x, job.wp, job.blen, job.bias, job.res, job.y = &ia, xp, wp, blen, bptr, rptr, yp
        job.Coutg, job.Kc, job.cout, job.act, job.group, job.P, job.rb = Coutg, Kc, ldy, act, group, P, rb
        job.work = work
        parallel_for((P + rb - 1) // rb, nth, _conv_nhwc_block_task, &job)
    free(work)
    free(res_copy)
    return 0


cdef struct ConvJob:
    # a channel-last conv's arguments for its tasks on the thread pool (blocks of pixels, or output rows)
    const ImplicitA* ia
    const float* x
    const float* wp
    const float* bias
    const float* res
    float* y
    const Act* act
    # (cout here and in the helpers' arguments: floats between output pixels in y and res -- ldy)
    Py_ssize_t blen, Coutg, Kc, cout, group, P, rb, rows, ntaps, ow_lo, ow_hi, nslabs, pslab, rows_total
    bint chan               # one task per slab of weight panels, over every row block (_chan_split)
    Py_ssize_t nimg         # direct path: 0, or rows are one image's rows, each over nimg images (_dconv_stack)
    float* work
    const DTap* taps
    DRun* runbuf
    const float* kp         # the k-pair rows of each group's weight (onnxep_dconv_kp), NULL: the plain kernel
    Py_ssize_t kplen        # floats of one group's pair rows
    const uint16_t* kpb     # ... in bf16 (onnxep_dconv_kpb), NULL: fp32
    const uint16_t* xb      # x in bf16 (with kpb)


cdef void _conv_nhwc_block_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    """Every group of pixel block t (rb pixels) on one thread."""
    cdef ConvJob* j = <ConvJob*>p
    cdef Py_ssize_t gi
    for gi in range(j.group):
        _conv_nhwc_group(j.ia, gi, j.x, j.wp + gi * j.blen, j.bias, j.res, j.y, t * j.rb, min(j.rb, j.P - t * j.rb),
                         j.Coutg, j.Kc, j.cout, j.act, j.work + <Py_ssize_t>tid * sgemm_work_len(1), 1)


cdef enum:
    # the most bytes of packed weight one thread's slab may take in a channel split (_chan_split): half
    # of a 2 MiB L2, so the slab stays there beside the packed A block while the thread's row blocks sweep it
    CONV_CHAN_SLAB_BYTES = 1048576

# Off by default: not yet measured on an idle machine. Kernel alone, 2 threads, on a machine loaded by other jobs
# (2026-11, paired alternation in one process): 0.98-1.0x the wall time on ResNet-50's 14x14 1x1 convs, 0.93-1.0x
# the CPU time -- within the noise; whole ResNet-50 0.98-1.05x (noise +-40% per round). A static slab per thread also
# cannot rebalance when one thread is descheduled, where the (row block, slab) tiles claimed dynamically can.
cdef int _chan_split_on = 0


def conv_chan_split(on=None):
    """Whether conv_nhwc_f32's multi-threaded GEMMs may split by output-channel slabs (_chan_split; off by
    default); `on` sets it (tests and in-process A/B measurements compare both splits). Returns the setting before
    the call."""
    global _chan_split_on
    cdef int before = _chan_split_on
    if on is not None:
        _chan_split_on = 1 if on else 0
    return bool(before)


def conv_chan_split_applies(Py_ssize_t rblocks, Py_ssize_t npanels, Py_ssize_t Kc, Py_ssize_t P, int nth):
    """_chan_split's decision (with the current conv_chan_split setting), for tests."""
    return bool(_chan_split(rblocks, npanels, Kc, P, nth))


cdef bint _chan_split(Py_ssize_t rblocks, Py_ssize_t npanels, Py_ssize_t Kc, Py_ssize_t P, int nth) noexcept nogil:
    """Whether a conv GEMM over nth threads runs one slab of weight panels per thread over all of its
    rblocks row blocks, instead of tiles (row block, slab) claimed in any order -- where each thread reads all (or
    most) of the weight, each from L3 or memory once more per thread. With a slab per thread the weight is read
    once in all, and A (P x Kc) by every thread: worth it when the weight traffic saved, (min(rblocks, nth) - 1)
    times the weight, exceeds the A traffic added, (nth - 1) times A (the 1x1 convs of ResNet-50's 14x14 stage: 1
    MiB of weight, 0.2-0.8 MiB of A), while a thread's slab stays in L2 across its row blocks (CONV_CHAN_SLAB_BYTES)
    and the slabs are even (a multiple of nth panels, or at least 8 per thread)."""
    cdef Py_ssize_t chunk
    if not _chan_split_on or nth <= 1 or rblocks < 2 or npanels < nth:
        return False
    if npanels % nth and npanels < 8 * nth:
        return False
    chunk = (npanels + nth - 1) // nth
    if chunk * SGEMM_NR * Kc * <Py_ssize_t>sizeof(float) > CONV_CHAN_SLAB_BYTES:
        return False
    return (min(rblocks, <Py_ssize_t>nth) - 1) * npanels * SGEMM_NR > (nth - 1) * P


cdef inline Py_ssize_t _chan_split_slab(Py_ssize_t npanels, int nth) noexcept nogil:
    return (npanels + nth - 1) // nth


cdef void _conv_chan_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    """Slab t of weight panels over every row block of the packed path (group 1): the row blocks sgemm_packed_ex
    makes (at most MC rows, even to one MR tile), each tile summing K in the same order."""
    cdef ConvJob* j = <ConvJob*>p
    cdef ImplicitA ia = j.ia[0]
    cdef Py_ssize_t npanels = (j.Coutg + SGEMM_NR - 1) // SGEMM_NR, mtiles = (j.P + SGEMM_MC - 1) // SGEMM_MC
    cdef Py_ssize_t mq, b, ic, jp0 = t * j.pslab
    cdef Py_ssize_t mfirst = _row_deal(j.P, mtiles, &mq)
    ia.x = j.x
    ia.p0 = 0
    for b in range(mtiles):
        ic = _row_block(b, mq, mfirst)
        _sgemm_tile(ic, min(_row_block(b + 1, mq, mfirst), j.P) - ic, jp0, min(jp0 + j.pslab, npanels), j.Coutg, j.Kc,
                    1.0, NULL, 0, 0, &ia, j.wp, 0.0, j.y, j.cout, 1, j.bias, NULL, j.res, j.act,
                    j.work + <Py_ssize_t>tid * SGEMM_WORK_PER_THREAD, True)


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


# ---------------------------------------------------------------------------------------- direct path (no packed A)
# For an output pixel, A's row is the concatenation over taps (b, e) of Cg channels of x at input pixel
# (oh*sh - ph + b*dh, ow*sw - pw + e*dw); output pixels next to each other in a row read inputs sw*C floats apart. So
# a tile of MR pixels of one output row reads A in place at a fixed row stride: onnxep_dconv_uk walks K as runs (one
# tap's channels; the taps of a kernel row merge into one run when their channels follow each other in x), skipping
# the taps in the padding. Pixels whose taps all fall inside x go in tiles of up to MR; the few at the left / right
# borders one by one with their own runs. The whole K stays in registers (the C tile is stored once); the runs address
# the K blocks of the packed weight (_dconv_taps), so the weight packed for the GEMM path serves this one too.

# Whether the direct path runs a conv of at most one SIMD vector of output channels (per group) on the weight's
# k-pair rows (onnxep_dconv_kp: two k per broadcast; a vector of pair rows fills up at half its width of channels).
# Kernel alone (direct path), 1 thread, batch 3, k-pair / plain time: 64x64 3 -> 16 7x7/2 0.88, 32x32 16 -> 16 3x3
# 0.83, 16x16 8 -> 8 3x3 0.68, 16x16 48 -> 8 1x1 0.74, 32x32 16 -> 8 1x1 0.82, 16x16 32 -> 16 1x1 0.94. conv_kpair()
# reads / sets it (tests, in-process A/B; _dconv_auto reads it when a ConvNhwc is made).
cdef int _kpair_on = 1


def conv_kpair(on=None):
    """Whether the direct conv path runs convs of at most one vector of output channels on k-pair rows (on by
    default; SIMD variants); `on` sets it. Returns the setting before the call."""
    global _kpair_on
    cdef int before = _kpair_on
    if on is not None:
        _kpair_on = 1 if on else 0
    return bool(before)


cdef inline bint _dconv_kp_applies(Py_ssize_t Coutg) noexcept nogil:
    """The k-pair kernel takes a direct conv of Coutg output channels per group (one weight panel: NR >= KP_MAXN)."""
    return _kpair_on and Coutg <= KP_MAXN


cdef enum:
    KPB_MIN_USES = 16       # _dconv_kpb_applies: products per x element rounded to bf16, at least


cdef inline bint _dconv_kpb_applies(const ImplicitA* ia, Py_ssize_t Coutg) noexcept nogil:
    """The bf16 k-pair kernel (onnxep_dconv_kpb) takes a direct conv of Coutg output channels per group where the
    fp32 k-pair kernel takes it with 16 channels a vector (AVX-512), the CPU has vdpbf16ps (bg_kernel), and each x
    element, rounded to bf16 once per call, feeds at least KPB_MIN_USES products (Coutg * kh * kw / (sh * sw)): the
    rounding costs about what a vdpbf16ps saves on a few products. Kernel alone, 1 thread, batch 3, bf16 / fp32
    k-pair time (uses): 64x64 3 -> 16 7x7/2 0.76-0.77 (196), 64x64 3 -> 16 3x3/2 0.83-0.86 (36), 32x32 16 -> 16 3x3
    0.70 (144), 56x56 64 -> 16 3x3 (batch 1) 0.69, 16x16 64 -> 16 3x3 0.88, 16x16 8 -> 8 3x3 0.82-0.85 (72), 4x4
    128 -> 8 3x3 0.82, 1x1 -> 16 0.90-0.98 (16); left fp32: 1x1 -> 8 0.94-1.06 (8; 32x32 16 -> 8, 16x16 48 -> 8,
    16x16 16 -> 8)."""
    return KPB_OK and _dconv_kp_applies(Coutg) and KP_MAXN == 16 and bg_kernel() != 0 \
        and Coutg * ia.kh * ia.kw >= KPB_MIN_USES * ia.sh * ia.sw


cdef struct DTap:
    Py_ssize_t kb, ke       # the tap (kernel row, kernel column) a run belongs to
    DRun run


cdef bint _dconv_auto(const ImplicitA* ia, Py_ssize_t N, Py_ssize_t Kc, Py_ssize_t Coutg) noexcept nogil:
    """The direct path where it measured faster than packing (SIMD variants only). Interleaved A/B in one process,
    2026-11: at K within one block, 0.51-0.90x of the packed path's time on 17 shapes from the light models; above
    it, on ResNet-50's 3x3 and 1x1 convs, 0.85-1.0x at 1 and 2 threads -- except where a tile's pixels lie a multiple
    of 4 KiB apart (1x1 over 1024 channels: 1.2-1.3x at 1 thread): then all of a tile's A rows fall in one L1 set and
    evict each other, so those stay packed.
    Also packed above one K block when the direct tiles hold fewer than 2/3 MR pixels on average
    (_dconv_tiles; small images, where most pixels are border ones going one or two per tile, and stride-2 rows a
    little over one tile long): each tile streams its K x NR weight panel (past L1 there) for that few rows, where
    the packed path reads it once per MR rows. Kernel alone, 1 thread, packed / direct time (batch 3 unless said;
    mean pixels per AVX-512 tile): 8x8 32->64 3x3/2 0.58 (2.7), 4x4 64->128 3x3/2 0.33 (1), 2x2 128->128 3x3 0.44,
    batch 1 7x7 512->512 3x3 0.76 (3.8), 14x14 256->512 3x3/2 0.95 (5.4), 28x28 128->256 3x3/2 0.86-0.90 (6.3);
    left direct: 28x28 128->128 3x3 1.02 (8.3), 56x56 64->128 3x3/2 1.05 (9), 14x14 256->256 3x3 1.00 (9.8).
    A conv the k-pair kernel takes (_dconv_kp_applies: up to one vector of output channels) goes direct from
    MR/4 pixels a tile, and at any fill with up to half a vector: the packed path's NR-wide tiles compute 2x (4x)
    the products needed there, the k-pair tiles none. Kernel alone, 1 thread, direct / packed time (pixels a tile):
    3x16x16 64->16 3x3 0.52 (6.7), 3x8x8 32->16 3x3 0.54 (4.6), 3x16x16 32->8 3x3/2 0.40 (6.4), 3x4x4 128->8
    3x3 0.90 (1.6); left packed: 3x8x8 64->16 3x3/2 1.21 (2.7), 3x4x4 64->16 3x3 0.96 (1.6).
    Where the weight panel (K x NR floats) takes at most 1/DCONV_PANEL_L2_SHARE of L2, a tile re-reads it from L1
    / L2 at little cost and the direct path only needs tiles of DCONV_FILL_ROWS pixels on average (enough rows of
    two vectors to cover the FMA latency: 8 accumulators): the 2/3 MR rule above came from panels of 147-590 KiB.
    Kernel alone, 1 thread, batch 1 and 3, direct / packed time (pixels a tile), K 288-864 (panels 36-108 KiB):
    8x8 3x3 32 -> 32 0.65-0.68, 48 -> 48 0.81-0.86, 64 -> 64 0.79-0.83, 96 -> 96 0.83-0.89 (4.6); 16x16 3x3
    0.64-0.88 (6.4), 16x16 3x3/2 0.77-0.89 (6.4); left packed: 8x8 3x3/2 1.25-2.0 (2.7)."""
    cdef Py_ssize_t tiles
    if not SGEMM_SIMD:
        return False
    if Kc <= SGEMM_KC:
        return True
    if (ia.sw * ia.C * <Py_ssize_t>sizeof(float)) % 4096 == 0:
        return False
    if _dconv_kp_applies(Coutg):
        # (its tiles along rows and down bands: tiles down the batch measured no faster there on AVX-512 -- 3x4x4
        # 64 -> 16 3x3 1.05x, 3x8x8 64 -> 16 3x3/2 1.23x the packed time)
        return 2 * Coutg <= KP_MAXN or 4 * N * ia.Ho * ia.Wo >= SGEMM_MR * _dconv_row_tiles(ia, N)
    tiles = _dconv_tiles(ia, N)
    if Kc * SGEMM_NR * <Py_ssize_t>sizeof(float) * DCONV_PANEL_L2_SHARE <= _dconv_l2:
        return N * ia.Ho * ia.Wo >= DCONV_FILL_ROWS * tiles
    return 3 * N * ia.Ho * ia.Wo >= 2 * SGEMM_MR * tiles


cdef enum:
    DCONV_PANEL_L2_SHARE = 8     # _dconv_auto: a weight panel this small a share of L2 is cheap to re-read per tile
    DCONV_FILL_ROWS = 4          # ... then tiles of this many pixels on average go direct


cdef Py_ssize_t _dconv_l2 = cache_bytes(2, 1 << 20)


cdef Py_ssize_t _dconv_tiles(const ImplicitA* ia, Py_ssize_t N) noexcept nogil:
    """About how many micro-kernel calls per weight panel the direct path makes over the batch: _dconv_row_tiles',
    or its tiles down the batch where it takes them (_dconv_stack)."""
    cdef Py_ssize_t tiles = _dconv_row_tiles(ia, N)
    return _dconv_stacked_tiles(ia, N) if _dconv_stack(ia, N, tiles) else tiles


cdef Py_ssize_t _dconv_row_tiles(const ImplicitA* ia, Py_ssize_t N) noexcept nogil:
    """About how many micro-kernel calls per weight panel the direct path makes over the batch (its
    row blocks ignored, as _dconv_rows tiles them): each output row's interior pixels in tiles of up to MR, each
    border column's pixels in tiles of up to MR down the bands of rows with the same kernel rows inside x. A
    pointwise conv's pixels (one long row) count as full tiles."""
    cdef Py_ssize_t lo, hi, b0, b1, nb0, nb1, oh, band, nborder, tiles
    if ia.kh == 1 and ia.kw == 1 and ia.sh == 1 and ia.sw == 1 and ia.ph == 0 and ia.pw == 0:
        return (N * ia.Ho * ia.Wo + SGEMM_MR - 1) // SGEMM_MR
    _inside_range(ia.W, ia.Wo, ia.kw, ia.sw, ia.dw, ia.pw, &lo, &hi)
    nborder = ia.Wo - (hi - lo)
    tiles = ia.Ho * ((hi - lo + SGEMM_MR - 1) // SGEMM_MR)
    oh = 0
    while oh < ia.Ho:
        _dconv_tap_range(oh * ia.sh - ia.ph, ia.dh, ia.H, ia.kh, &b0, &b1)
        band = oh + 1
        while band < ia.Ho:
            _dconv_tap_range(band * ia.sh - ia.ph, ia.dh, ia.H, ia.kh, &nb0, &nb1)
            if nb0 != b0 or nb1 != b1:
                break
            band += 1
        tiles += nborder * ((band - oh + SGEMM_MR - 1) // SGEMM_MR)
        oh = band
    return N * tiles


cdef inline Py_ssize_t _dconv_stacked_tiles(const ImplicitA* ia, Py_ssize_t N) noexcept nogil:
    """The direct path's micro-kernel calls per weight panel with its tiles down the batch (_dconv_rows_stacked):
    each output pixel position's N pixels in tiles of up to MR."""
    return ia.Ho * ia.Wo * ((N + SGEMM_MR - 1) // SGEMM_MR)


cdef inline bint _dconv_stack(const ImplicitA* ia, Py_ssize_t N, Py_ssize_t tiles) noexcept nogil:
    """Whether the direct path tiles down the batch (_dconv_rows_stacked): with fewer micro-kernel calls than its
    tiles along rows and down bands (`tiles`, _dconv_tiles' count without stacking), as on the small outputs where
    every pixel, or most, is a border pixel (2x2 or 4x4 outputs of a 3x3 conv: tiles of one or two pixels, down the
    batch as many as there are images). Not for a pointwise conv (its pixels are one long row already)."""
    if N < 2 or not _stack_on or (ia.kh == 1 and ia.kw == 1 and ia.sh == 1 and ia.sw == 1 and ia.ph == 0
                                  and ia.pw == 0):
        return False
    return _dconv_stacked_tiles(ia, N) < tiles


cdef int _stack_on = 1


def conv_stack(on=None):
    """Whether the direct conv path may tile down the batch (_dconv_stack; on by default); `on` sets it. Returns
    the setting before the call (tests, in-process A/B)."""
    global _stack_on
    cdef int before = _stack_on
    if on is not None:
        _stack_on = 1 if on else 0
    return bool(before)


def conv_direct_auto(tuple xshape, tuple kernel, tuple strides, tuple dilations, tuple pads, tuple out_spatial,
                     Py_ssize_t group=1, Py_ssize_t cout=0):
    """Whether ConvNhwc's "auto" path picks the direct path for this dense conv geometry (_dconv_auto) with cout
    output channels (0: as many as keep the k-pair kernel out); for tests."""
    cdef ImplicitA ia
    cdef Py_ssize_t N
    N, ia.H, ia.W, ia.C = xshape
    ia.kh, ia.kw = kernel
    ia.sh, ia.sw = strides
    ia.dh, ia.dw = dilations
    ia.ph, ia.pw = pads
    ia.Ho, ia.Wo = out_spatial
    ia.Cg = ia.C // group
    return bool(_dconv_auto(&ia, N, ia.Cg * ia.kh * ia.kw, cout // group if cout > 0 else KP_MAXN + 1))


def conv_direct_stacks(tuple xshape, tuple kernel, tuple strides, tuple dilations, tuple pads, tuple out_spatial):
    """Whether the direct path tiles this conv geometry down the batch (_dconv_stack, with the current conv_stack
    setting); for tests."""
    cdef ImplicitA ia
    cdef Py_ssize_t N
    N, ia.H, ia.W, ia.C = xshape
    ia.kh, ia.kw = kernel
    ia.sh, ia.sw = strides
    ia.dh, ia.dw = dilations
    ia.ph, ia.pw = pads
    ia.Ho, ia.Wo = out_spatial
    return bool(_dconv_stack(&ia, N, _dconv_row_tiles(&ia, N)))


cdef inline Py_ssize_t _dconv_max_taps(const ImplicitA* ia, Py_ssize_t Kc) noexcept nogil:
    """Room _dconv_taps needs: a tap per kernel position, plus one per K block border that cuts a tap in two."""
    return ia.kh * ia.kw + (Kc + SGEMM_KC - 1) // SGEMM_KC


cdef Py_ssize_t _dconv_taps(const ImplicitA* ia, Py_ssize_t Kc, Py_ssize_t Np, DTap* out) noexcept nogil:
    """The runs of every tap (its Cg channels), in K order (k = (b*kw + e)*Cg + c), cut at the K blocks of the packed
    weight (sgemm_pack_b_raw: block pc's panel jp starts at pc*Np + jp*NR*kc, so a run's panel stride sb is its
    block's NR*kc). Returns the count (at most _dconv_max_taps)."""
    cdef Py_ssize_t b, e, t, k, k1, pc = 0, kc = _sgemm_kc(Kc, 0), cnt = 0
    for t in range(ia.kh * ia.kw):
        b = t // ia.kw
        e = t - b * ia.kw
        k = t * ia.Cg
        while k < (t + 1) * ia.Cg:
            if k >= pc + kc:
                pc += kc
                kc = _sgemm_kc(Kc, pc)
            k1 = min((t + 1) * ia.Cg, pc + kc)
            out[cnt].kb = b
            out[cnt].ke = e
            out[cnt].run.a = (b * ia.dh * ia.W + e * ia.dw) * ia.C + (k - t * ia.Cg)
            out[cnt].run.b = pc * Np + (k - pc) * SGEMM_NR
            out[cnt].run.n = k1 - k
            out[cnt].run.sb = SGEMM_NR * kc
            cnt += 1
            k = k1
    return cnt


cdef Py_ssize_t _dconv_select(const DTap* taps, Py_ssize_t ntaps, Py_ssize_t b0, Py_ssize_t b1, Py_ssize_t e0,
                              Py_ssize_t e1, DRun* out) noexcept nogil:
    """out := the runs of the taps with b0 <= kb < b1 and e0 <= ke < e1, in K order, adjacent ones merged."""
    cdef Py_ssize_t i, cnt = 0
    for i in range(ntaps):
        if b0 <= taps[i].kb < b1 and e0 <= taps[i].ke < e1:
            if (cnt > 0 and out[cnt - 1].a + out[cnt - 1].n == taps[i].run.a
                    and out[cnt - 1].b + out[cnt - 1].n * SGEMM_NR == taps[i].run.b
                    and out[cnt - 1].sb == taps[i].run.sb):
                out[cnt - 1].n += taps[i].run.n
            else:
                out[cnt] = taps[i].run
                cnt += 1
    return cnt


cdef inline void _dconv_tap_range(Py_ssize_t i0, Py_ssize_t d, Py_ssize_t L, Py_ssize_t k, Py_ssize_t* lo,
                                  Py_ssize_t* hi) noexcept nogil:
    """[lo, hi): the taps t < k with 0 <= i0 + t*d < L."""
    lo[0] = 0 if i0 >= 0 else (-i0 + d - 1) // d
    hi[0] = min((L - 1 - i0) // d + 1, k) if L - 1 - i0 >= 0 else 0
    if lo[0] > hi[0]:
        lo[0] = hi[0]


cdef inline void _inside_range(Py_ssize_t n_in, Py_ssize_t n_out, Py_ssize_t k, Py_ssize_t s, Py_ssize_t d,
                               Py_ssize_t pb, Py_ssize_t* lo, Py_ssize_t* hi) noexcept nogil:
    """[lo, hi): the output positions o < n_out whose k taps o*s - pb + t*d (t < k) all lie inside [0, n_in) (an
    empty range at lo when there are none)."""
    cdef Py_ssize_t last = n_in - 1 - (k - 1) * d + pb     # o*s may be at most this
    lo[0] = min((pb + s - 1) // s, n_out)
    hi[0] = max(lo[0], min(last // s + 1, n_out)) if last >= 0 else lo[0]


# Whether the direct and Winograd paths fetch the next weight panel (plane) into L2 ahead of its use
# (onnxep_dconv_uk's pfo); conv_panel_prefetch() reads / sets it (tests, in-process A/B). Results do not depend on it.
cdef int _panel_prefetch = 1
# ... and whether the direct path's tiles fetch their output (and residual) rows before the K loop (pfc): for convs
# of at least DCONV_CROW_MIN_K products per output (Cg * kh * kw), or whose output (pixels x ldy floats) is larger than
# DCONV_CROW_COLD_L2S L2s. A shorter K loop leaves the fetch little to hide and its two instructions per row (four with
# a residual) show, unless the output's lines are cold (a large output, past the L3 since its buffer's last use).
# Kernel alone (its output hot in L3), 1 thread, process CPU, fetch on / off: 1x1 16 -> 96 at 112x112 1.06, at 56x56
# 1.07, 24 -> 144 1.05, 32 -> 16 at 112x112 1.07, 32 -> 96 1.06, 48 -> 96 1.02, 64 -> 96 1.03, the 3x3 stride-2
# 3 -> 32 stem (K 27) 1.05. Inside MobileNetV2 1.0 (1 thread, per-node medians, fetch for K >= 64 only / always):
# 32 -> 16 at 112x112 (0.8 MB out) 0.90 (with the store fast path), 24 -> 144 at 56x56 (1.8 MB) 0.98, but 16 -> 96
# at 112x112 (4.8 MB) 1.07. From K 64 the models decide, as first measured (ResNet-50 0.96-1.04, DenseNet-121
# 0.92-0.99, Inception-v2 0.97; in-process now, 1 thread: Inception-v2 0.975, SqueezeNet 0.996, ResNet-50 1.02,
# DenseNet-121 1.01)
cdef int _crow_prefetch = 1
cdef enum:
    DCONV_CROW_MIN_K = 64
    DCONV_CROW_COLD_L2S = 2


def conv_crow_prefetch(on=None):
    """Whether the direct conv path's tiles prefetch their output / residual rows (on by default, for convs of at least
    DCONV_CROW_MIN_K products per output or large outputs); `on` sets it. Returns the setting before the call."""
    global _crow_prefetch
    cdef int before = _crow_prefetch
    if on is not None:
        _crow_prefetch = 1 if on else 0
    return bool(before)


def conv_panel_prefetch(on=None):
    """Whether the direct and Winograd conv paths prefetch their next weight panel (on by default); `on` sets it.
    Returns the setting before the call."""
    global _panel_prefetch
    cdef int before = _panel_prefetch
    if on is not None:
        _panel_prefetch = 1 if on else 0
    return bool(before)


cdef void _dconv_rows(const ImplicitA* ia, const DTap* taps, Py_ssize_t ntaps, DRun* runs, Py_ssize_t row0,
                      Py_ssize_t row1, const float* wp, const float* bias, const float* res, float* y, Py_ssize_t Coutg,
                      Py_ssize_t cout, const Act* act, Py_ssize_t ow_lo, Py_ssize_t ow_hi, Py_ssize_t jp0,
                      Py_ssize_t jp1, Py_ssize_t pend, const float* kp, const uint16_t* kpb,
                      const uint16_t* xb, Py_ssize_t nimg) noexcept nogil:
    """Output rows row0 .. row1-1 (row = n*Ho + oh, over the whole batch), the output channels of weight panels
    jp0 .. jp1-1 of one group (ia.x, wp, bias, res and y offset to the group). runs: room for 2 * ntaps DRuns. Panel
    by panel, and for each the rows' tiles one after another: a panel of the weight (K x NR) is read from memory
    once per work item, then from cache. Output pixels at or past pend (the last row of a pointwise conv's
    flattened image) are not computed. Rows go in bands of the same image and the same kernel rows inside x: the
    interior pixels of each row in tiles along the row; a border column's pixels (some kernel column in the padding)
    in tiles down the band (its pixels read x sh*W*C floats apart with the same runs), not one by one. The first
    tile over each panel fetches the next panel into L2 along its K loop (onnxep_dconv_uk's pfo). kp: the
    weight's k-pair rows (_dconv_kp; one panel), NULL for the plain micro-kernel; kpb and xb: the bf16 pair rows and
    x (offset as ia.x) for onnxep_dconv_kpb, else NULL. nimg > 0: rows row0 .. row1-1 are one image's output rows,
    each over images 0 .. nimg-1, in tiles down the batch (_dconv_stack): pixel (oh, ow) of every image has the same
    taps, its x H*W*C floats and its y Ho*Wo*cout floats from the previous image's."""
    cdef Py_ssize_t HW = ia.H * ia.W * ia.C, row, n, ih0, b0, b1, e0, e1, nint, cnt, ow, mr, iw0, jp, n0, wend, hi
    cdef Py_ssize_t band, r2, nb0, nb1, rs, pfo
    cdef int pfc = _crow_prefetch and (ia.Cg * ia.kh * ia.kw >= DCONV_CROW_MIN_K
                                       or pend * cout * <Py_ssize_t>sizeof(float) > DCONV_CROW_COLD_L2S * _dconv_l2)
    cdef const float* img
    cdef const uint16_t* imgb = NULL
    cdef DRun* rr
    if nimg > 0:
        for jp in range(jp0, jp1):
            n0 = jp * SGEMM_NR
            pfo = -1 if jp + 1 < jp1 and _panel_prefetch else 0
            for row in range(row0, row1):
                ih0 = row * ia.sh - ia.ph
                _dconv_tap_range(ih0, ia.dh, ia.H, ia.kh, &b0, &b1)
                for ow in range(ia.Wo):
                    iw0 = ow * ia.sw - ia.pw
                    _dconv_tap_range(iw0, ia.dw, ia.W, ia.kw, &e0, &e1)
                    cnt = _dconv_select(taps, ntaps, b0, b1, e0, e1, runs)
                    rs = (row * ia.Wo + ow) * cout + n0         # pixel (row, ow) of image 0 in y and res
                    n = 0
                    while n < nimg:
                        mr = nimg - n
                        mr = (mr + (mr + SGEMM_MR - 1) // SGEMM_MR - 1) // ((mr + SGEMM_MR - 1) // SGEMM_MR)
                        dconv_call(mr, kp, kpb, (xb + n * HW) if xb != NULL else NULL, ia.x + n * HW,
                                   (ih0 * ia.W + iw0) * ia.C, HW, runs, cnt, wp, jp, pfo, pfc,
                                   min(<Py_ssize_t>SGEMM_NR, Coutg - n0), y + n * ia.Ho * ia.Wo * cout + rs,
                                   ia.Ho * ia.Wo * cout, 1.0, 0.0, (bias + n0) if bias != NULL else NULL, NULL,
                                   (res + n * ia.Ho * ia.Wo * cout + rs) if res != NULL else NULL, act)
                        n += mr
                        pfo = 0
        return
    for jp in range(jp0, jp1):
        n0 = jp * SGEMM_NR
        pfo = -1 if jp + 1 < jp1 and _panel_prefetch else 0    # the first tile fetches the next panel into L2
        row = row0
        while row < row1:
            n = row // ia.Ho
            img = ia.x + n * HW
            if xb != NULL:
                imgb = xb + n * HW
            ih0 = (row - n * ia.Ho) * ia.sh - ia.ph
            _dconv_tap_range(ih0, ia.dh, ia.H, ia.kh, &b0, &b1)
            # the band: the following rows of image n with the same kernel rows inside x
            band = row + 1
            while band < row1 and band < (n + 1) * ia.Ho:
                _dconv_tap_range((band - n * ia.Ho) * ia.sh - ia.ph, ia.dh, ia.H, ia.kh, &nb0, &nb1)
                if nb0 != b0 or nb1 != b1:
                    break
                band += 1
            nint = _dconv_select(taps, ntaps, b0, b1, 0, ia.kw, runs)
            for r2 in range(row, band):
                wend = min(ia.Wo, pend - r2 * ia.Wo)
                hi = min(ow_hi, wend)
                ow = min(ow_lo, hi)
                while ow < hi:      # interior pixels in tiles of (nearly) equal size: no thin tail tile
                    mr = hi - ow
                    mr = (mr + (mr + SGEMM_MR - 1) // SGEMM_MR - 1) // ((mr + SGEMM_MR - 1) // SGEMM_MR)
                    iw0 = ow * ia.sw - ia.pw
                    dconv_call(mr, kp, kpb, imgb, img, ((ih0 + (r2 - row) * ia.sh) * ia.W + iw0) * ia.C,
                               ia.sw * ia.C, runs, nint, wp,
                             jp, pfo, pfc, min(<Py_ssize_t>SGEMM_NR, Coutg - n0),
                             y + (r2 * ia.Wo + ow) * cout + n0, cout, 1.0,
                             0.0, (bias + n0) if bias != NULL else NULL, NULL,
                             (res + (r2 * ia.Wo + ow) * cout + n0) if res != NULL else NULL, act)
                    ow += mr
                    pfo = 0
            # border columns (pend only cuts a pointwise conv's rows, which have none)
            rs = ia.sh * ia.W * ia.C
            ow = 0
            while ow < ia.Wo:
                if ow_lo <= ow < ow_hi:     # jump the interior (a pointwise conv's whole row): not column by column
                    ow = ow_hi
                    continue
                iw0 = ow * ia.sw - ia.pw
                _dconv_tap_range(iw0, ia.dw, ia.W, ia.kw, &e0, &e1)
                rr = runs + ntaps
                cnt = _dconv_select(taps, ntaps, b0, b1, e0, e1, rr)
                r2 = row
                while r2 < band:
                    mr = band - r2
                    mr = (mr + (mr + SGEMM_MR - 1) // SGEMM_MR - 1) // ((mr + SGEMM_MR - 1) // SGEMM_MR)
                    dconv_call(mr, kp, kpb, imgb, img, ((ih0 + (r2 - row) * ia.sh) * ia.W + iw0) * ia.C, rs, rr,
                               cnt, wp, jp, pfo,
                             pfc, min(<Py_ssize_t>SGEMM_NR, Coutg - n0), y + (r2 * ia.Wo + ow) * cout + n0,
                             ia.Wo * cout,
                             1.0, 0.0, (bias + n0) if bias != NULL else NULL, NULL,
                             (res + (r2 * ia.Wo + ow) * cout + n0) if res != NULL else NULL, act)
                    r2 += mr
                    pfo = 0
                ow += 1
            row = band


cdef enum:
    DCONV_ITEM_PIXELS = 96       # output pixels per work item of the direct path, about (8 tiles of 12)
    DCONV_ITEMS_PER_THREAD = 4   # work items per thread the direct path aims for (dynamic scheduling evens them)


cdef inline Py_ssize_t _panel_slab(Py_ssize_t npanels, Py_ssize_t items, int nth) noexcept nogil:
    """Weight panels per slab when `items` work items (of all npanels panels each) are cut into (item, slab) pairs:
    all of them in one slab, unless there are fewer items than DCONV_ITEMS_PER_THREAD per thread -- then as many
    (equal) slabs as bring the count there, at most one per panel. Repeating an item's per-slab setup (the direct
    path reads A in place; the winograd path redoes its input transform) is what buys the threads work."""
    cdef Py_ssize_t want = <Py_ssize_t>nth * DCONV_ITEMS_PER_THREAD
    cdef Py_ssize_t nslabs = min(npanels, (want + items - 1) // items) if nth > 1 and items < want else 1
    return (npanels + nslabs - 1) // nslabs


cdef enum:
    DCONV_SLAB_SETUP_Q = 8       # an item's setup (its runs, its A rows into L1) costs about 1/this of a panel's products


cdef struct _DSlabCost:
    Py_ssize_t cand, ps, npanels, rows, rb, Wo, P


cdef Py_ssize_t _dconv_tile_cost(const void* p, Py_ssize_t t) noexcept nogil:
    cdef const _DSlabCost* c = <const _DSlabCost*>p
    cdef Py_ssize_t sl = t % c.cand, rblk = (t // c.cand) % c.rows
    cdef Py_ssize_t lo = rblk * c.rb * c.Wo
    cdef Py_ssize_t px = min((rblk + 1) * c.rb * c.Wo, c.P) - lo
    cdef Py_ssize_t pan = min((sl + 1) * c.ps, c.npanels) - sl * c.ps
    return px * (DCONV_SLAB_SETUP_Q * pan + 1)


cdef Py_ssize_t _dconv_slab_mt(const ConvJob* j, Py_ssize_t items, Py_ssize_t npanels, Py_ssize_t Wo,
                               int nth) noexcept nogil:
    """The direct path's panels per slab on nth threads: _panel_slab's choice (j.pslab), unless another slab count
    lets the items, each claimed in order by the first thread free (_tile_span's counter model), finish at least 1%
    sooner; an item (group, row block of j.rb rows, slab) costs its pixels * (panels + 1/DCONV_SLAB_SETUP_Q). The
    items run under the pool's thread ranges all the same (parallel_for): one counter (parallel_for_shared) gained
    nothing on ResNet-50's direct 14x14 convs (in-process, 2 threads: 256 -> 1024 1x1 0.99x, 3x3 256 -> 256 1.02x).
    _panel_slab alone can leave an odd count of unequal items: ResNet-50's 14x14 256 -> 1024 1x1 convs, 196 pixels
    in rows of 66, 66, 64 by 3 slabs of 11, 11, 10 panels, 9 items and a 0.91 share of each thread's time busy on 2
    threads; 4 slabs of 8 give 12 items and 1.0."""
    cdef Py_ssize_t best = j.pslab, best_span = 0, ns, span
    cdef _DSlabCost c
    c.npanels, c.rows, c.rb, c.Wo, c.P = npanels, j.rows, j.rb, Wo, j.P
    for ns in range(0, min(npanels, 8 * <Py_ssize_t>nth) + 1):
        c.ps = j.pslab if ns == 0 else (npanels + ns - 1) // ns      # ns == 0: _panel_slab's choice, tried first
        if ns > 0 and c.ps == j.pslab:
            continue
        c.cand = (npanels + c.ps - 1) // c.ps
        span = _tile_span(_dconv_tile_cost, &c, items * c.cand, nth, False)
        if ns == 0 or 100 * span < 99 * best_span:
            best, best_span = c.ps, span
    return best


cdef inline Py_ssize_t _dconv_blocks_mt(Py_ssize_t nb, Py_ssize_t rows, int nth) noexcept nogil:
    """The direct path's row block count on nth threads when there are few blocks (fewer than
    DCONV_ITEMS_PER_THREAD per thread): a multiple of nth, so the threads get equal rows -- the next lower one (the
    blocks grow: 16 rows in blocks of 6, 6, 4 -> 8, 8) when the rows then split evenly, or nth blocks when there are
    fewer (8 rows -> 4, 4) as long as the rows go round. A small image's output otherwise came in one to three blocks,
    one or two threads' work with a thread idle or waiting for the third; the weight panels' slabs (_panel_slab) then
    split the rest. Unchanged with many blocks (dynamic claims even them out) or one thread, and when fewer blocks
    would be unequal: a 14x14 1x1 conv's 196 pixels fold into 3 rows of 66, 66, 64 (_conv_nhwc_direct), which 2
    blocks made 132 + 64 pixels; kept as 3 blocks, the slabs over them even out. Kernel alone, 2 threads, kept / 2
    blocks: 14x14 576 -> 192 0.77, 576 -> 128 0.77, 528 -> 256 0.77-0.79, 480 -> 192 0.77, 832 -> 256 0.79, 512 ->
    112 0.83 (3 threads: 0.76); 14 other 1x1 and 3x3 shapes 0.99-1.01 (the same blocks); the same bits. Whole models,
    2 threads, in-process A/B: Inception-v2 0.968, DenseNet-121 0.968, ResNet-50 0.991, Inception-v1 1.002."""
    cdef Py_ssize_t fewer
    if nth <= 1 or nb >= <Py_ssize_t>nth * DCONV_ITEMS_PER_THREAD or nb % nth == 0 or not _small_split_on:
        return nb
    if nb > nth:
        fewer = nb - nb % nth
        return fewer if rows % fewer == 0 else nb
    return min(<Py_ssize_t>nth, rows)


cdef int _conv_nhwc_direct(const ImplicitA* ia0, Py_ssize_t N, Py_ssize_t group, const float* x, const float* wp,
                           Py_ssize_t blen, const float* bias, const float* res, float* y, Py_ssize_t Coutg,
                           Py_ssize_t Kc, Py_ssize_t cout, const Act* act, int nth, bint bf16=False) noexcept nogil:
    """conv_nhwc_f32 on the direct path. Work items are (group, block of output rows, slab of weight panels), taken
    dynamically: row blocks of about DCONV_ITEM_PIXELS pixels, so a weight panel fetched once serves several tiles;
    the panels cut into slabs when there are too few items to keep nth threads busy (reading A in place costs nothing
    to repeat). Every output element is computed by one thread in the same order whatever nth is. bf16: on the
    bf16 k-pair kernel (the caller checked _dconv_kpb_applies). Returns -1 (nothing written) when its small run
    tables cannot be allocated, else 0."""
    cdef ImplicitA ia = ia0[0]
    cdef Py_ssize_t ntaps = _dconv_max_taps(&ia, Kc), npanels = (Coutg + SGEMM_NR - 1) // SGEMM_NR, rows, items
    cdef Py_ssize_t num, P = N * ia.Ho * ia.Wo, gi, nx = N * ia.H * ia.W * ia.C
    cdef DTap* taps
    cdef DRun* runbuf
    cdef float* kpbuf = NULL
    cdef uint16_t* kpbbuf = NULL
    cdef int kpnv
    cdef ConvJob job
    if ia.kh == 1 and ia.kw == 1 and ia.sh == 1 and ia.sw == 1 and ia.ph == 0 and ia.pw == 0:
        # 1x1, stride 1, no pads: pixel p reads x[p*C ...], so the batch's pixels are one long row; fold it into
        # rows of (nearly) DCONV_ITEM_PIXELS pixels, the last one shorter (pend)
        num = (P + DCONV_ITEM_PIXELS - 1) // DCONV_ITEM_PIXELS
        if group == 1 and _small_split_on:      # at least one row per thread, of MR pixels or more (_dconv_blocks_mt)
            num = max(num, min(<Py_ssize_t>nth, P // SGEMM_MR))
        ia.W = (P + num - 1) // num
        ia.Wo = ia.W
        ia.H = (P + ia.W - 1) // ia.W
        ia.Ho = ia.H
        N = 1
    # tiles down the batch (_dconv_stack): rows are one image's, each over the N images
    job.nimg = N if _dconv_stack(&ia, N, _dconv_row_tiles(&ia, N)) else 0
    rows = ia.Ho if job.nimg else N * ia.Ho
    taps = <DTap*>malloc(ntaps * sizeof(DTap))
    if taps == NULL:
        return -1
    ntaps = _dconv_taps(&ia, Kc, _round_up(Coutg, SGEMM_NR), taps)
    # row blocks of about DCONV_ITEM_PIXELS pixels, of (nearly) equal height
    job.rb = max(<Py_ssize_t>1, DCONV_ITEM_PIXELS // max(ia.Wo * max(job.nimg, <Py_ssize_t>1), <Py_ssize_t>1))
    # the pixels of a row whose every kernel column falls inside x: ow_lo <= ow < ow_hi
    _inside_range(ia.W, ia.Wo, ia.kw, ia.sw, ia.dw, ia.pw, &job.ow_lo, &job.ow_hi)
    if (job.ow_lo > 0 or job.ow_hi < ia.Wo) and not job.nimg:
        # border columns go in tiles down a block's rows: blocks of up to MR rows while that leaves
        # DCONV_ITEMS_PER_THREAD items per thread
        job.rb = max(job.rb, min(<Py_ssize_t>SGEMM_MR, rows * group // (<Py_ssize_t>nth * DCONV_ITEMS_PER_THREAD)))
    job.rows = (rows + job.rb - 1) // job.rb
    if group == 1:
        job.rows = _dconv_blocks_mt(job.rows, rows, nth)
    job.rb = (rows + job.rows - 1) // job.rows
    job.rows = (rows + job.rb - 1) // job.rb
    items = group * job.rows
    job.chan = group == 1 and _chan_split(job.rows, npanels, Kc, P, nth)
    if job.chan:
        job.pslab = _chan_split_slab(npanels, nth)
        items = 1           # each task: a slab over every row block
    else:
        job.pslab = _panel_slab(npanels, items, nth)
        if nth > 1:
            job.P = P
            job.pslab = _dconv_slab_mt(&job, items, npanels, ia.Wo * max(job.nimg, <Py_ssize_t>1), nth)
    job.nslabs = (npanels + job.pslab - 1) // job.pslab
    nth = <int>max(1, min(<Py_ssize_t>nth, items * job.nslabs))
    runbuf = <DRun*>malloc(nth * 2 * ntaps * sizeof(DRun))
    if runbuf == NULL:
        free(taps)
        return -1
    job.kp, job.kplen, job.kpb, job.xb = NULL, 0, NULL, NULL
    if bf16:
        # x and the weight's rows in bf16 (32 halves a row of 2 k, or of 4 k up to 8 channels; x keeps its offsets)
        kpnv = 2 if 2 * Coutg <= KP_MAXN else 1
        job.kplen = (Kc + 2 * kpnv - 1) // (2 * kpnv) * 32
        kpbbuf = <uint16_t*>malloc((group * job.kplen + nx) * sizeof(uint16_t))
        if kpbbuf == NULL:
            free(runbuf)
            free(taps)
            return -1
        for gi in range(group):
            dconv_kpb_pack(wp + gi * blen, Kc, kpnv, kpbbuf + gi * job.kplen)
        _cvt_bf16_split(x, nx, kpbbuf + group * job.kplen, nth)
        job.kpb, job.xb = kpbbuf, kpbbuf + group * job.kplen
    elif _dconv_kp_applies(Coutg):
        kpnv = 1 if 2 * Coutg <= KP_MAXN else 2
        job.kplen = (Kc + 1) // 2 * kpnv * KP_MAXN
        kpbuf = <float*>malloc(group * job.kplen * sizeof(float))
        if kpbuf == NULL:
            free(runbuf)
            free(taps)
            return -1
        for gi in range(group):
            dconv_kp_pack(wp + gi * blen, Kc, kpnv, kpbuf + gi * job.kplen)
        job.kp = kpbuf
    job.ia, job.x, job.wp, job.blen, job.bias, job.res, job.y = &ia, x, wp, blen, bias, res, y
    job.Coutg, job.Kc, job.cout, job.act, job.taps, job.ntaps = Coutg, Kc, cout, act, taps, ntaps
    job.runbuf, job.P, job.rows_total = runbuf, P, rows
    parallel_for(items * job.nslabs, nth, _dconv_task, &job)
    free(kpbuf)
    free(kpbbuf)
    free(runbuf)
    free(taps)
    return 0


# Whether the bf16 direct path rounds x to bf16 over the threads (_cvt_bf16_split; on by default); conv_cvt_split()
# reads / sets it (tests, in-process A/B). Results do not depend on it.
cdef int _cvt_split_on = 1


def conv_cvt_split(on=None):
    """Whether the bf16 direct conv path rounds its x to bf16 over the threads (on by default); `on` sets it.
    Returns the setting before the call."""
    global _cvt_split_on
    cdef int before = _cvt_split_on
    if on is not None:
        _cvt_split_on = 1 if on else 0
    return bool(before)


cdef struct CvtJob:
    const float* x
    uint16_t* out
    Py_ssize_t n, chunk


cdef void _cvt_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    cdef CvtJob* j = <CvtJob*>p
    cdef Py_ssize_t lo = t * j.chunk
    cvt_bf16(j.x + lo, min(j.chunk, j.n - lo), j.out + lo)


cdef void _cvt_bf16_split(const float* x, Py_ssize_t n, uint16_t* out, int nth) noexcept nogil:
    """out[i] := bf16(x[i]), i < n, over nth threads from COPY_PAR_BYTES of x (a copy's break-even): the bf16
    direct path rounds all of x before its tiles, and on one thread that pass was the serial part of a 2-thread call
    (MobileNetV2's 112x112 32 -> 16 1x1: 1.6 MB of x). In DCONV_ITEMS_PER_THREAD chunks per thread, of whole cache
    lines of out, in x's order: with the pool's ranges (threads.h onnxep_run_affine) a thread rounds the part of x its
    row blocks read next."""
    cdef CvtJob job
    cdef Py_ssize_t items
    if nth <= 1 or not _cvt_split_on or n * <Py_ssize_t>sizeof(float) < COPY_PAR_BYTES:
        cvt_bf16(x, n, out)
        return
    items = <Py_ssize_t>nth * DCONV_ITEMS_PER_THREAD
    job.x, job.out, job.n = x, out, n
    job.chunk = _round_up((n + items - 1) // items, 32)
    parallel_for((n + job.chunk - 1) // job.chunk, nth, _cvt_task, &job)


cdef void _dconv_task(void* p, Py_ssize_t t, int tid) noexcept nogil:
    """Item t = (group, row block, panel slab) of the direct path."""
    cdef ConvJob* j = <ConvJob*>p
    cdef ImplicitA ia = j.ia[0]
    cdef Py_ssize_t sl = t % j.nslabs, gi, rblk, row0
    if j.chan:      # slab t over every row block, in order (group 1)
        ia.x = j.x
        for rblk in range(j.rows):
            row0 = rblk * j.rb
            _dconv_rows(&ia, j.taps, j.ntaps, j.runbuf + <Py_ssize_t>tid * 2 * j.ntaps, row0,
                        min(row0 + j.rb, j.rows_total), j.wp, j.bias, j.res, j.y, j.Coutg, j.cout, j.act,
                        j.ow_lo, j.ow_hi, t * j.pslab, min((t + 1) * j.pslab, (j.Coutg + SGEMM_NR - 1) // SGEMM_NR),
                        j.P, j.kp, j.kpb, j.xb, j.nimg)
        return
    t = t // j.nslabs
    gi = t // j.rows
    rblk = t - gi * j.rows
    row0 = rblk * j.rb
    ia.x = j.x + gi * ia.Cg
    _dconv_rows(&ia, j.taps, j.ntaps, j.runbuf + <Py_ssize_t>tid * 2 * j.ntaps, row0,
                min(row0 + j.rb, j.rows_total),
                j.wp + gi * j.blen, (j.bias + gi * j.Coutg) if j.bias != NULL else NULL,
                (j.res + gi * j.Coutg) if j.res != NULL else NULL, j.y + gi * j.Coutg, j.Coutg, j.cout, j.act,
                j.ow_lo, j.ow_hi, sl * j.pslab, min((sl + 1) * j.pslab, (j.Coutg + SGEMM_NR - 1) // SGEMM_NR), j.P,
                (j.kp + gi * j.kplen) if j.kp != NULL else NULL, (j.kpb + gi * j.kplen) if j.kpb != NULL else NULL,
                (j.xb + gi * ia.Cg) if j.xb != NULL else NULL, j.nimg)
