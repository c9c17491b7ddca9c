# Normalization and reductions: BatchNormalization (inference), LRN, Softmax / LogSoftmax.

from libc.math cimport logf
from libc.stdlib cimport malloc, free

cdef enum:
    NORM_PAR_WORK = 32768   # elements (x window) below which a normalization call stays on one thread


cdef void _batchnorm_row_f32(const float* x, float* y, Py_ssize_t S, float mean, float a, float b) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(S):
        y[i] = (x[i] - mean) * a + b


def batchnorm_f32(const float[:, ::1] x, float[:, ::1] y, const float[::1] mean, const float[::1] a,
                  const float[::1] b, int nthreads=0):
    """y[r, :] := (x[r, :] - mean[c]) * a[c] + b[c] with c = r % C; rows r are (n, c) pairs of an (N, C, S) tensor.
    a = scale / sqrt(var + epsilon) and b = B are computed by the caller."""
    cdef Py_ssize_t R = x.shape[0], S = x.shape[1], C = mean.shape[0], r
    if y.shape[0] != R or y.shape[1] != S:
        raise ValueError(f"batchnorm_f32: x is {R}x{S}, y is {y.shape[0]}x{y.shape[1]}")
    if a.shape[0] != C or b.shape[0] != C:
        raise ValueError(f"batchnorm_f32: mean has {C} channels, a {a.shape[0]}, b {b.shape[0]}")
    if R == 0 or S == 0:
        return
    if C == 0 or R % C != 0:
        raise ValueError(f"batchnorm_f32: {R} rows is not a multiple of {C} channels")
    cdef RowsJob job
    job.x, job.y, job.S, job.C, job.mean, job.a, job.b, job.kind = &x[0, 0], &y[0, 0], S, C, &mean[0], &a[0], &b[0], 0
    with nogil:
        parallel_for(R, 1 if R * S < NORM_PAR_WORK else _nthreads(nthreads), _rows_task, &job)


cdef inline void _channel_affine_row(const float* x, float* y, const float* a, const float* b, Py_ssize_t C,
                                     bint relu) noexcept nogil:
    cdef Py_ssize_t c
    cdef float v
    if relu:
        for c in range(C):
            v = x[c] * a[c] + b[c]
            y[c] = v if v > 0 else 0.0
    else:
        for c in range(C):
            y[c] = x[c] * a[c] + b[c]


def channel_affine_f32(const float[:, ::1] x, float[:, ::1] y, const float[::1] a, const float[::1] b,
                       bint relu=False, int nthreads=0):
    """y[r, c] := x[r, c] * a[c] + b[c] [relu]: a per-channel affine map over channel-last rows (N*H*W, C) -- a
    BatchNormalization, or a chain of per-channel Mul / Add, with an optional Relu, in one pass (y may alias x)."""
    cdef Py_ssize_t R = x.shape[0], C = x.shape[1], r, per, t, nt
    if y.shape[0] != R or y.shape[1] != C or a.shape[0] != C or b.shape[0] != C:
        raise ValueError(f"channel_affine_f32: x is {R}x{C}, y {y.shape[0]}x{y.shape[1]}, a has {a.shape[0]} and "
                         f"b {b.shape[0]} channels")
    if R == 0 or C == 0:
        return
    cdef RowsJob job
    job.x, job.y, job.S, job.C, job.a, job.b, job.relu, job.kind = &x[0, 0], &y[0, 0], C, C, &a[0], &b[0], relu, 1
    with nogil:
        parallel_for(R, 1 if R * C < NORM_PAR_WORK else _nthreads(nthreads), _rows_task, &job)


cdef void _lrn_plane_f32(const float* x, float* y, Py_ssize_t n, Py_ssize_t c, Py_ssize_t C, Py_ssize_t S,
                         Py_ssize_t lo, Py_ssize_t hi, float alpha_n, float beta, float bias) noexcept nogil:
    """Plane (n, c): y := x / (bias + alpha_n * sum_{c' in [c-lo, c+hi] n [0, C)} x[c']^2) ** beta."""
    cdef Py_ssize_t c0 = c - lo if c - lo > 0 else 0
    cdef Py_ssize_t c1 = c + hi + 1 if c + hi + 1 < C else C
    cdef Py_ssize_t i, k
    cdef const float* xn = x + n * C * S
    cdef const float* xc
    cdef float* yp = y + (n * C + c) * S
    cdef float v
    for i in range(S):
        yp[i] = 0.0
    for k in range(c0, c1):
        xc = xn + k * S
        for i in range(S):
            v = xc[i]
            yp[i] = yp[i] + v * v
    xc = xn + c * S
    if beta == 0.75:                       # t ** 0.75 = sqrt(t) * sqrt(sqrt(t)): vectorised, within 2 ulp of powf
        for i in range(S):
            v = bias + alpha_n * yp[i]
            yp[i] = xc[i] / (sqrtf(v) * sqrtf(sqrtf(v)))
    else:
        for i in range(S):
            yp[i] = xc[i] / powf(bias + alpha_n * yp[i], beta)


def lrn_f32(const float[:, :, ::1] x, float[:, :, ::1] y, Py_ssize_t size, float alpha, float beta, float bias,
            int nthreads=0):
    """LRN over channels of an (N, C, S) tensor: the window of channel c is [c - floor((size-1)/2),
    c + ceil((size-1)/2)]; y := x / (bias + alpha / size * sum x^2) ** beta."""
    cdef Py_ssize_t N = x.shape[0], C = x.shape[1], S = x.shape[2], t
    cdef Py_ssize_t lo = (size - 1) // 2, hi = size - 1 - (size - 1) // 2
    cdef float alpha_n
    if size < 1:
        raise ValueError(f"lrn_f32: size must be >= 1, got {size}")
    if y.shape[0] != N or y.shape[1] != C or y.shape[2] != S:
        raise ValueError(f"lrn_f32: x is {N}x{C}x{S}, y is {y.shape[0]}x{y.shape[1]}x{y.shape[2]}")
    if N * C * S == 0:
        return
    alpha_n = alpha / <float>size
    cdef RowsJob job
    job.x, job.y, job.S, job.C, job.lo, job.hi, job.kind = &x[0, 0, 0], &y[0, 0, 0], S, C, lo, hi, 2
    job.alpha_n, job.beta, job.bias = alpha_n, beta, bias
    with nogil:
        parallel_for(N * C, 1 if N * C * S * size < NORM_PAR_WORK else _nthreads(nthreads), _rows_task, &job)


cdef void _lrn_row_nhwc(const float* x, float* y, Py_ssize_t C, Py_ssize_t lo, Py_ssize_t hi, float alpha_n,
                        float beta, float bias) noexcept nogil:
    """One pixel's channels: y[c] := x[c] / (bias + alpha_n * sum_{k in [c-lo, c+hi] n [0, C)} x[k]^2) ** beta, the
    window summed in ascending k as _lrn_plane_f32 does (beta 0.75 through square roots: within 2 ulp of powf)."""
    cdef Py_ssize_t c, d, c_lo, c_hi
    cdef float v
    for c in range(C):
        y[c] = 0.0
    for d in range(-lo, hi + 1):           # y[c] += x[c + d]^2 where c + d is a channel
        c_lo = -d if d < 0 else 0
        c_hi = C - d if d > 0 else C
        for c in range(c_lo, c_hi):
            v = x[c + d]
            y[c] = y[c] + v * v
    if beta == 0.75:                       # the common case: t ** 0.75 = sqrt(t) * sqrt(sqrt(t)), vectorised
        for c in range(C):
            v = bias + alpha_n * y[c]
            y[c] = x[c] / (sqrtf(v) * sqrtf(sqrtf(v)))
    else:
        for c in range(C):
            y[c] = x[c] / powf(bias + alpha_n * y[c], beta)


def lrn_nhwc_f32(const float[:, ::1] x, float[:, ::1] y, Py_ssize_t size, float alpha, float beta, float bias,
                 int nthreads=0):
    """LRN over the channels (last axis) of channel-last rows (N*H*W, C); the same window and formula as lrn_f32."""
    cdef Py_ssize_t R = x.shape[0], C = x.shape[1], r
    cdef Py_ssize_t lo = (size - 1) // 2, hi = size - 1 - (size - 1) // 2
    cdef float alpha_n
    if size < 1:
        raise ValueError(f"lrn_nhwc_f32: size must be >= 1, got {size}")
    if y.shape[0] != R or y.shape[1] != C:
        raise ValueError(f"lrn_nhwc_f32: x is {R}x{C}, y is {y.shape[0]}x{y.shape[1]}")
    if R * C == 0:
        return
    alpha_n = alpha / <float>size
    cdef RowsJob job
    job.x, job.y, job.S, job.C, job.lo, job.hi, job.kind = &x[0, 0], &y[0, 0], C, C, lo, hi, 3
    job.alpha_n, job.beta, job.bias = alpha_n, beta, bias
    with nogil:
        parallel_for(R, 1 if R * C * size < NORM_PAR_WORK else _nthreads(nthreads), _rows_task, &job)


cdef void _softmax_rows_f32(const float* x, float* y, Py_ssize_t K, int log) noexcept nogil:
    """One contiguous row of K: y := softmax(x) (or log-softmax), subtracting the max first."""
    cdef Py_ssize_t k
    cdef float m = x[0], s = 0.0, e
    for k in range(1, K):
        if x[k] > m:
            m = x[k]
    if log:
        for k in range(K):
            s = s + expf(x[k] - m)
        s = logf(s)
        for k in range(K):
            y[k] = x[k] - m - s
    else:
        for k in range(K):
            e = expf(x[k] - m)
            y[k] = e
            s = s + e
        s = 1.0 / s
        for k in range(K):
            y[k] = y[k] * s


cdef void _softmax_block_f32(const float* x, float* y, Py_ssize_t K, Py_ssize_t inner, int log,
                             float* buf) noexcept nogil:
    """One (K, inner) block, softmax along K for each of the inner columns; buf holds 2 * inner floats."""
    cdef Py_ssize_t k, i
    cdef float* m = buf
    cdef float* s = buf + inner
    cdef float e
    for i in range(inner):
        m[i] = x[i]
        s[i] = 0.0
    for k in range(1, K):
        for i in range(inner):
            if x[k * inner + i] > m[i]:
                m[i] = x[k * inner + i]
    if log:
        for k in range(K):
            for i in range(inner):
                s[i] = s[i] + expf(x[k * inner + i] - m[i])
        for i in range(inner):
            s[i] = logf(s[i])
        for k in range(K):
            for i in range(inner):
                y[k * inner + i] = x[k * inner + i] - m[i] - s[i]
    else:
        for k in range(K):
            for i in range(inner):
                e = expf(x[k * inner + i] - m[i])
                y[k * inner + i] = e
                s[i] = s[i] + e
        for i in range(inner):
            s[i] = 1.0 / s[i]
        for k in range(K):
            for i in range(inner):
                y[k * inner + i] = y[k * inner + i] * s[i]


cdef int _softmax_f32(const float* x, float* y, Py_ssize_t outer, Py_ssize_t K, Py_ssize_t inner, int log,
                      int nthreads) noexcept nogil:
    """Returns -1 when a scratch buffer could not be allocated."""
    cdef Py_ssize_t o
    cdef float* buf = NULL
    cdef int nt = 1
    if outer * K * inner >= NORM_PAR_WORK and outer >= 2:
        nt = _nthreads(nthreads)
    cdef RowsJob job
    if inner == 1:
        job.x, job.y, job.S, job.relu, job.kind = x, y, K, log, 4
        parallel_for(outer, nt, _rows_task, &job)
        return 0
    if nt == 1:
        buf = <float*>malloc(2 * inner * sizeof(float))
        if buf == NULL:
            return -1
        for o in range(outer):
            _softmax_block_f32(x + o * K * inner, y + o * K * inner, K, inner, log, buf)
        free(buf)
        return 0
    # one scratch slice of 2 * inner floats per thread, picked by the task's thread id
    buf = <float*>malloc(nt * 2 * inner * sizeof(float))
    if buf == NULL:
        return -1
    job.x, job.y, job.S, job.C, job.relu, job.mean = x, y, K, inner, log, buf
    parallel_for(outer, nt, _softmax_block_task, &job)
    free(buf)
    return 0


cdef void _softmax_block_task(void* p, Py_ssize_t o, int tid) noexcept nogil:
    cdef RowsJob* j = <RowsJob*>p
    _softmax_block_f32(j.x + o * j.S * j.C, j.y + o * j.S * j.C, j.S, j.C, j.relu,
                       <float*>j.mean + <Py_ssize_t>tid * 2 * j.C)


def softmax_f32(const float[::1] x, float[::1] y, Py_ssize_t outer, Py_ssize_t K, Py_ssize_t inner, bint log=False,
                int nthreads=0):
    """x, y viewed as (outer, K, inner): y := softmax along K (log-softmax when log), max subtracted first."""
    cdef int rc
    if outer < 0 or K < 0 or inner < 0 or x.shape[0] != outer * K * inner or y.shape[0] != x.shape[0]:
        raise ValueError(f"softmax_f32: x has {x.shape[0]} elements, y {y.shape[0]}, expected "
                         f"{outer}*{K}*{inner}")
    if x.shape[0] == 0:
        return
    with nogil:
        rc = _softmax_f32(&x[0], &y[0], outer, K, inner, log, nthreads)
    if rc != 0:
        raise MemoryError("softmax_f32: could not allocate scratch")


cdef struct RowsJob:
    # the row-parallel normalisation kernels' arguments on the thread pool; kind: 0 batchnorm rows (S per row,
    # channel r % C), 1 channel-last affine rows (C), 2 LRN planes (NCHW), 3 LRN rows (NHWC), 4 softmax rows (S = K,
    # relu = log)
    const float* x
    float* y
    Py_ssize_t S, C, lo, hi
    const float* mean
    const float* a
    const float* b
    float alpha_n, beta, bias
    bint relu
    int kind


cdef void _rows_task(void* p, Py_ssize_t r, int tid) noexcept nogil:
    cdef RowsJob* j = <RowsJob*>p
    if j.kind == 0:
        _batchnorm_row_f32(j.x + r * j.S, j.y + r * j.S, j.S, j.mean[r % j.C], j.a[r % j.C], j.b[r % j.C])
    elif j.kind == 1:
        _channel_affine_row(j.x + r * j.C, j.y + r * j.C, j.a, j.b, j.C, j.relu)
    elif j.kind == 2:
        _lrn_plane_f32(j.x, j.y, r // j.C, r % j.C, j.C, j.S, j.lo, j.hi, j.alpha_n, j.beta, j.bias)
    elif j.kind == 3:
        _lrn_row_nhwc(j.x + r * j.C, j.y + r * j.C, j.C, j.lo, j.hi, j.alpha_n, j.beta, j.bias)
    else:
        _softmax_rows_f32(j.x + r * j.S, j.y + r * j.S, j.S, j.relu)


# ---------------------------------------------------------------------------------------------------- GroupNorm
cdef extern from "_native/group_norm.h":
    int group_norm_c "onnxep_group_norm"(const float* x, float* y, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S,
                                         Py_ssize_t G, const float* gamma, const float* beta, float eps, int silu,
                                         int layout, int nth, Py_ssize_t par_work) noexcept nogil


def group_norm_f32(const float[::1] x, float[::1] y, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S, Py_ssize_t G,
                   const float[::1] gamma, const float[::1] beta, float eps, bint silu=False, int layout=0,
                   int nthreads=0):
    """GroupNorm of x viewed as (N, C, S) (layout 1, channel-last: (N, S, C)): per instance and group of C / G
    channels, y := (x - mean) / sqrt(var + eps) * gamma[c] + beta[c], then y * sigmoid(y) when silu. Layout 2: x
    (N, C, S), y written channel-last (N, S, C). y may alias x (not with layout 2). InstanceNormalization is
    G = C."""
    cdef int rc
    if layout not in (0, 1, 2):
        raise ValueError(f"group_norm_f32: layout {layout} is not 0 (NCHW), 1 (NHWC) or 2 (NCHW in, NHWC out)")
    if N < 0 or C < 0 or S < 0 or x.shape[0] != N * C * S or y.shape[0] != x.shape[0]:
        raise ValueError(f"group_norm_f32: x has {x.shape[0]} elements, y {y.shape[0]}, expected {N}*{C}*{S}")
    if G <= 0 or C % G or gamma.shape[0] != C or beta.shape[0] != C:
        raise ValueError(f"group_norm_f32: {G} groups of {C} channels, gamma has {gamma.shape[0]}, beta "
                         f"{beta.shape[0]}")
    if x.shape[0] == 0:
        return
    with nogil:
        rc = group_norm_c(&x[0], &y[0], N, C, S, G, &gamma[0], &beta[0], eps, silu, layout,
                          _nthreads(nthreads), NORM_PAR_WORK)
    if rc != 0:
        raise MemoryError("group_norm_f32: could not allocate scratch")
