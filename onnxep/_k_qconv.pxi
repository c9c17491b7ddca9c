# Channel-last quantized conv (issue 29): QLinearConv / a folded QDQ conv on NHWC 8-bit tensors, on qgemm's
# micro-kernels with a requantization epilogue. The C is onnxep/_native/qconv.h (after qgemm.h, _k_qgemm.pxi).

from libc.stdint cimport int16_t

cdef extern from "_native/qconv.h":
    ctypedef struct qc_args:
        const uint8_t* X
        int x_signed
        int64_t N, H, W, C, OH, OW, M
        int64_t kh, kw, sh, sw, ph, pw, dh, dw
        const uint8_t* Bp
        const int32_t* cs
        int64_t K, K4
        int32_t za
        const int32_t* zb
        int zb_stride
        const int16_t* wdw
        const int32_t* bias
        const float* mult
        int mult_stride
        float yzp, qlo, qhi
        int y_signed
        uint8_t* Y
        int kern
        int64_t nmb, nnb
    void qc_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil
    void qc_dw_item(void* ctx, Py_ssize_t item, int tid) noexcept nogil


#: the integer parameter vector of qconv_nhwc and the RL_QCONV step, in order
QCONV_PARAMS = ("x_signed", "y_signed", "N", "H", "W", "C", "OH", "OW", "M", "kh", "kw", "sh", "sw", "ph", "pw", "dh",
                "dw", "x_zero_point", "zb_stride", "mult_stride", "depthwise")


cdef int _qc_run_raw(const uint8_t* X, const uint8_t* Wt, const int32_t* zb, const int32_t* bias, const float* mult,
                     uint8_t* Y, const Py_ssize_t* n, float yzp, float qlo, float qhi, int nthreads) noexcept nogil:
    """The conv of the parameter vector n (QCONV_PARAMS): Wt is the packed B (qgemm_pack_b of the (kh*kw*C, M)
    weights) of a dense conv, the int16 (kh*kw, C) centred weights of a depthwise one. Returns 0."""
    cdef qc_args a
    cdef int64_t items, work
    a.X = X; a.x_signed = <int>n[0]; a.y_signed = <int>n[1]
    a.N = n[2]; a.H = n[3]; a.W = n[4]; a.C = n[5]; a.OH = n[6]; a.OW = n[7]; a.M = n[8]
    a.kh = n[9]; a.kw = n[10]; a.sh = n[11]; a.sw = n[12]; a.ph = n[13]; a.pw = n[14]; a.dh = n[15]; a.dw = n[16]
    a.zb = zb; a.zb_stride = <int>n[18]; a.bias = bias; a.mult = mult; a.mult_stride = <int>n[19]
    a.yzp = yzp; a.qlo = qlo; a.qhi = qhi; a.Y = Y
    if a.N * a.OH * a.OW == 0 or a.M == 0:
        return 0
    if n[20]:
        a.za = <int32_t>n[17]
        a.wdw = <const int16_t*>Wt
        items = a.N * a.OH
        work = a.N * a.OH * a.OW * a.C * a.kh * a.kw
        # int8 depthwise: the fp32 depthwise rule on its multiply-adds (conv_threads_flops)
        parallel_for(items, 1 if items < 2 else conv_threads_flops(<double>8.0 * work, nthreads),
                     <task_fn>qc_dw_item, &a)
        return 0
    a.K = a.kh * a.kw * a.C
    a.K4 = qg_k4(a.K)
    a.za = <int32_t>n[17] + (128 if a.x_signed else 0)
    a.Bp = Wt
    a.cs = <const int32_t*>(Wt + qg_np(a.M) * 16 * a.K4 * 4)
    a.kern = qg_kernel()
    a.nmb = (a.N * a.OH * a.OW + QG_MB - 1) // QG_MB
    a.nnb = (a.M + QG_NB - 1) // QG_NB
    items = a.nmb * a.nnb
    # conv_threads_flops on a quarter of the fp32 flops: vpdpbusd does four multiply-adds per 32-bit lane
    parallel_for(items, 1 if items < 2 else conv_threads_flops(<double>0.5 * a.N * a.OH * a.OW * a.M * a.K, nthreads),
                 <task_fn>qc_item, &a)
    return 0


def qconv_nhwc(const uint8_t[::1] x, const uint8_t[::1] w, const int32_t[::1] zb, const int32_t[::1] bias,
               const float[::1] mult, uint8_t[::1] y, const Py_ssize_t[::1] params, float yzp, float qlo, float qhi,
               int nthreads=0):
    """The quantized NHWC conv: x (N, H, W, C) and y (N, OH, OW, M) bytes (int8 when params' x_signed / y_signed),
    w the packed B (dense) or the int16 centred weights' bytes (depthwise), zb 1 or M shifted weight zero points,
    bias M int32 (or None), mult 1 or M float32 multipliers, params QCONV_PARAMS; y = saturate to [qlo, qhi] of
    rint(float(acc + bias) * mult) + yzp."""
    if params.shape[0] != 21:
        raise ValueError("qconv_nhwc: params")
    cdef const Py_ssize_t* n = &params[0]
    if x.shape[0] != n[2] * n[3] * n[4] * n[5] or y.shape[0] != n[2] * n[6] * n[7] * n[8]:
        raise ValueError("qconv_nhwc: x / y sizes do not match the parameters")
    if n[20]:
        if n[5] != n[8] or w.shape[0] < 2 * n[9] * n[10] * n[5]:
            raise ValueError("qconv_nhwc: depthwise weights")
    elif w.shape[0] < qg_pack_b_bytes(n[9] * n[10] * n[5], n[8]):
        raise ValueError("qconv_nhwc: packed weights too small")
    if zb.shape[0] < (n[8] if n[18] else 1) or mult.shape[0] < (n[8] if n[19] else 1) \
            or (bias is not None and bias.shape[0] != n[8]):
        raise ValueError("qconv_nhwc: zero point / multiplier / bias sizes")
    if y.shape[0] == 0:
        return
    cdef const int32_t* bp = &bias[0] if bias is not None else NULL
    cdef int rc
    with nogil:
        rc = _qc_run_raw(&x[0] if x.shape[0] else NULL, &w[0], &zb[0], bp, &mult[0], &y[0], n, yzp, qlo, qhi,
                         nthreads)
    if rc:
        raise MemoryError()
