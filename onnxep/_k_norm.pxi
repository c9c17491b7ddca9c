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
cdef extern from *:
    """
    static inline float onnxep_exp_neg(float x);     /* _k_transformer.pxi (later in this unit): exp of x <= 0 */

    /* GroupNorm (com.onnxep GroupNorm, graph/passes/fuse_group_norm.py): per instance n and group g of C / G channels,
       y := (x - mean) * inv_std * gamma[c] + beta[c] [then SiLU y * sigmoid(y)], x NCHW (N, C, S) or channel-last
       (N, S, C).
       The moments: chunks of at most ONNXEP_GN_CHUNK elements, each two-pass while the chunk is in L1 -- the mean as
       its first element plus the mean offset from it (no large partial sums: exact to a few ulp of the spread, not
       of the mean), then the squared deviations from that mean -- merged in double by Chan et al.'s pairwise update:
       no cancellation, and about one pass of memory traffic. */
    #define ONNXEP_GN_CHUNK 2048
    typedef struct { double n, mean, m2; } onnxep_gn_mom;
    /* chunk of nb values: mean K + s / nb, where s sums x - K, and q sums (x - (float)mean)^2 */
    static inline void onnxep_gn_merge(onnxep_gn_mom* a, double nb, float K, float s, float q)
    {
        double mb = (double)K + (double)s / nb, dm = mb - (double)(float)mb;
        double m2b = (double)q - nb * dm * dm;
        double n = a->n + nb, d = mb - a->mean;
        if (nb == 0) return;
        a->mean += d * nb / n;
        a->m2 += m2b + d * d * a->n * nb / n;
        a->n = n;
    }
    /* the moments of L contiguous floats */
    static void onnxep_gn_moments(const float* x, Py_ssize_t L, onnxep_gn_mom* mo)
    {
        Py_ssize_t off, i, m;
        for (off = 0; off < L; off += ONNXEP_GN_CHUNK) {
            const float* p = x + off;
            float s = 0.0f, q = 0.0f, K = p[0], mb;
            m = L - off < ONNXEP_GN_CHUNK ? L - off : ONNXEP_GN_CHUNK;
            #pragma omp simd reduction(+:s)
            for (i = 0; i < m; i++) s += p[i] - K;
            mb = (float)((double)K + (double)s / (double)m);
            #pragma omp simd reduction(+:q)
            for (i = 0; i < m; i++) { float d = p[i] - mb; q += d * d; }
            onnxep_gn_merge(mo, (double)m, K, s, q);
        }
    }
    /* the moments of the K x W block x[r * ld + k], r < K, k < W (a group's channels of channel-last rows): the
       sums run per channel over the rows (ONNXEP_GN_LANES channels at a time, plain vector adds, no reduction per
       row), then across the channels */
    #define ONNXEP_GN_LANES 64
    static void onnxep_gn_moments_strided(const float* x, Py_ssize_t K, Py_ssize_t W, Py_ssize_t ld,
                                          onnxep_gn_mom* mo)
    {
        Py_ssize_t r0, r, k, k0, kn, rows, per = ONNXEP_GN_CHUNK / W > 0 ? ONNXEP_GN_CHUNK / W : 1;
        float acc[ONNXEP_GN_LANES];
        for (r0 = 0; r0 < K; r0 += per) {
            float s = 0.0f, q = 0.0f, x0 = x[r0 * ld], mb;
            rows = K - r0 < per ? K - r0 : per;
            for (k0 = 0; k0 < W; k0 += ONNXEP_GN_LANES) {
                kn = W - k0 < ONNXEP_GN_LANES ? W - k0 : ONNXEP_GN_LANES;
                for (k = 0; k < kn; k++) acc[k] = 0.0f;
                for (r = r0; r < r0 + rows; r++) {
                    const float* p = x + r * ld + k0;
                    #pragma omp simd
                    for (k = 0; k < kn; k++) acc[k] += p[k] - x0;
                }
                for (k = 0; k < kn; k++) s += acc[k];
            }
            mb = (float)((double)x0 + (double)s / (double)(rows * W));
            for (k0 = 0; k0 < W; k0 += ONNXEP_GN_LANES) {
                kn = W - k0 < ONNXEP_GN_LANES ? W - k0 : ONNXEP_GN_LANES;
                for (k = 0; k < kn; k++) acc[k] = 0.0f;
                for (r = r0; r < r0 + rows; r++) {
                    const float* p = x + r * ld + k0;
                    #pragma omp simd
                    for (k = 0; k < kn; k++) { float d = p[k] - mb; acc[k] += d * d; }
                }
                for (k = 0; k < kn; k++) q += acc[k];
            }
            onnxep_gn_merge(mo, (double)(rows * W), x0, s, q);
        }
    }
    /* v * sigmoid(v), sigmoid from e = exp(-|v|): 1 / (1 + e) for v >= 0, e / (1 + e) below (no overflow) */
    static inline float onnxep_gn_silu(float v)
    {
        float e = onnxep_exp_neg(v < 0.0f ? v : -v);
        float r = 1.0f / (1.0f + e);
        return v * (v >= 0.0f ? r : e * r);
    }
    /* y := ((x - m) - ml) * a + b [silu]: the mean as a float pair m + ml (its float64 value to ~48 bits), so a mean
       far from zero next to a small spread loses nothing to its rounding */
    static void onnxep_gn_apply(const float* x, float* y, Py_ssize_t S, float m, float ml, float a, float b, int silu)
    {
        Py_ssize_t i;
        if (silu) {
            #pragma omp simd
            for (i = 0; i < S; i++) y[i] = onnxep_gn_silu(((x[i] - m) - ml) * a + b);
        } else {
            #pragma omp simd
            for (i = 0; i < S; i++) y[i] = ((x[i] - m) - ml) * a + b;
        }
    }
    /* one channel-last row of C: y[c] := ((x[c] - m[c]) - ml[c]) * a[c] + b[c] [silu] */
    static void onnxep_gn_apply_row(const float* x, float* y, Py_ssize_t C, const float* m, const float* ml,
                                    const float* a, const float* b, int silu)
    {
        Py_ssize_t c;
        if (silu) {
            #pragma omp simd
            for (c = 0; c < C; c++) y[c] = onnxep_gn_silu(((x[c] - m[c]) - ml[c]) * a[c] + b[c]);
        } else {
            #pragma omp simd
            for (c = 0; c < C; c++) y[c] = ((x[c] - m[c]) - ml[c]) * a[c] + b[c];
        }
    }
    typedef struct {
        const float* x; float* y; Py_ssize_t N, C, S, G, rows_per; const float* gamma; const float* beta;
        float eps; int silu, layout; float* mean; float* mean_lo; float* scale;   /* channel-last out: per (n, c) */
    } onnxep_gn_job;
    static void onnxep_gn_nchw_task(void* p, Py_ssize_t item, int tid)
    {
        onnxep_gn_job* j = (onnxep_gn_job*)p;
        Py_ssize_t n = item / j->G, g = item % j->G, Cg = j->C / j->G, c, S = j->S;
        const float* x = j->x + (n * j->C + g * Cg) * S;
        float* y = j->y + (n * j->C + g * Cg) * S;
        onnxep_gn_mom mo = {0.0, 0.0, 0.0};
        onnxep_gn_moments(x, Cg * S, &mo);
        float inv = (float)(1.0 / sqrt((mo.m2 > 0.0 ? mo.m2 / mo.n : 0.0) + (double)j->eps)), m = (float)mo.mean;
        float ml = (float)(mo.mean - (double)m);
        for (c = 0; c < Cg; c++)
            onnxep_gn_apply(x + c * S, y + c * S, S, m, ml, inv * j->gamma[g * Cg + c], j->beta[g * Cg + c],
                            j->silu);
    }
    static void onnxep_gn_stats_task(void* p, Py_ssize_t item, int tid)     /* channel-last out: per (n, c) */
    {
        onnxep_gn_job* j = (onnxep_gn_job*)p;
        Py_ssize_t n = item / j->G, g = item % j->G, Cg = j->C / j->G, c;
        onnxep_gn_mom mo = {0.0, 0.0, 0.0};
        if (j->layout == 1)
            onnxep_gn_moments_strided(j->x + n * j->S * j->C + g * Cg, j->S, Cg, j->C, &mo);
        else
            onnxep_gn_moments(j->x + (n * j->C + g * Cg) * j->S, Cg * j->S, &mo);
        float inv = (float)(1.0 / sqrt((mo.m2 > 0.0 ? mo.m2 / mo.n : 0.0) + (double)j->eps)), m = (float)mo.mean;
        float ml = (float)(mo.mean - (double)m);
        for (c = g * Cg; c < (g + 1) * Cg; c++) {
            j->mean[n * j->C + c] = m;
            j->mean_lo[n * j->C + c] = ml;
            j->scale[n * j->C + c] = inv * j->gamma[c];
        }
    }
    static void onnxep_gn_nhwc_apply_task(void* p, Py_ssize_t item, int tid)
    {
        onnxep_gn_job* j = (onnxep_gn_job*)p;
        Py_ssize_t r0 = item * j->rows_per, r1 = r0 + j->rows_per, r, n;
        if (r1 > j->N * j->S) r1 = j->N * j->S;
        for (r = r0; r < r1; r++) {
            n = r / j->S;
            onnxep_gn_apply_row(j->x + r * j->C, j->y + r * j->C, j->C, j->mean + n * j->C, j->mean_lo + n * j->C,
                                j->scale + n * j->C, j->beta, j->silu);
        }
    }
    /* NCHW x into channel-last y: pixels [s0, s0 + ONNXEP_GN_TILE) of image n, ONNXEP_GN_TILE_C channels at a time
       normalised into a tile (contiguous, vectorised), then written across into y's rows */
    #define ONNXEP_GN_TILE 16
    #define ONNXEP_GN_TILE_C 256
    static void onnxep_gn_nchw_to_nhwc_task(void* p, Py_ssize_t item, int tid)
    {
        onnxep_gn_job* j = (onnxep_gn_job*)p;
        Py_ssize_t nb = (j->S + ONNXEP_GN_TILE - 1) / ONNXEP_GN_TILE, n = item / nb, s0 = (item % nb) * ONNXEP_GN_TILE;
        Py_ssize_t B = j->S - s0 < ONNXEP_GN_TILE ? j->S - s0 : ONNXEP_GN_TILE, C = j->C, c0, c, cn, s;
        float tile[ONNXEP_GN_TILE_C * ONNXEP_GN_TILE];
        float* yb = j->y + (n * j->S + s0) * C;
        for (c0 = 0; c0 < C; c0 += ONNXEP_GN_TILE_C) {
            cn = C - c0 < ONNXEP_GN_TILE_C ? C - c0 : ONNXEP_GN_TILE_C;
            for (c = 0; c < cn; c++) {
                Py_ssize_t k = n * C + c0 + c;
                onnxep_gn_apply(j->x + k * j->S + s0, tile + c * ONNXEP_GN_TILE, B, j->mean[k], j->mean_lo[k],
                                j->scale[k], j->beta[c0 + c], j->silu);
            }
            for (s = 0; s < B; s++)
                for (c = 0; c < cn; c++) yb[s * C + c0 + c] = tile[c * ONNXEP_GN_TILE + s];
        }
    }
    /* x, y: N x C x S (layout 1, channel-last: N x S x C; layout 2: x N x C x S, y N x S x C); y may be x but for
       layout 2. nth threads at most, one when the tensor is smaller than par_work elements. Returns -1 when the
       scratch of the channel-last layouts could not be allocated. */
    static int onnxep_group_norm(const float* x, float* y, Py_ssize_t N, Py_ssize_t C, Py_ssize_t S, Py_ssize_t G,
                                 const float* gamma, const float* beta, float eps, int silu, int layout,
                                 int nth, Py_ssize_t par_work)
    {
        onnxep_gn_job j;
        Py_ssize_t total = N * C * S, items;
        if (total == 0) return 0;
        if (total < par_work) nth = 1;
        j.x = x; j.y = y; j.N = N; j.C = C; j.S = S; j.G = G; j.gamma = gamma; j.beta = beta; j.eps = eps;
        j.silu = silu; j.layout = layout; j.mean = NULL; j.mean_lo = NULL; j.scale = NULL;
        if (layout == 0) {
            onnxep_parallel_for(N * G, nth, onnxep_gn_nchw_task, &j);
            return 0;
        }
        j.mean = (float*)malloc(3 * N * C * sizeof(float));
        if (j.mean == NULL) return -1;
        j.mean_lo = j.mean + N * C;
        j.scale = j.mean + 2 * N * C;
        onnxep_parallel_for(N * G, nth, onnxep_gn_stats_task, &j);
        if (layout == 2) {
            items = N * ((S + ONNXEP_GN_TILE - 1) / ONNXEP_GN_TILE);
            onnxep_parallel_for(items, items < 2 ? 1 : nth, onnxep_gn_nchw_to_nhwc_task, &j);
            free(j.mean);
            return 0;
        }
        j.rows_per = 4096 / C > 0 ? 4096 / C : 1;                       /* about 16 KB of x per item */
        items = (N * S + j.rows_per - 1) / j.rows_per;
        onnxep_parallel_for(items, items < 2 ? 1 : nth, onnxep_gn_nhwc_apply_task, &j);
        free(j.mean);
        return 0;
    }
    """
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
