# Pooling: MaxPool, AveragePool, GlobalAveragePool/GlobalMaxPool.
#
# Window pooling works on NC independent planes of up to 3 spatial dims; 1-D and 2-D inputs are passed as 3-D with
# leading spatial dims of size 1. Geometry is one int64 vector (see _POOL_GEOM): per dim the input size, output size,
# kernel, stride, begin pad, end pad and dilation. Window o of dim i covers taps o*s - pb + k*d, k in [0, kernel);
# taps outside [0, in) are skipped (max) or count only toward count_include_pad's divisor when inside [-pb, in + pe).

from libc.math cimport NAN


cdef inline void _tap_range(Py_ssize_t o, Py_ssize_t n_in, Py_ssize_t k, Py_ssize_t s, Py_ssize_t pb,
                            Py_ssize_t d, Py_ssize_t* start, Py_ssize_t* klo, Py_ssize_t* khi) noexcept nogil:
    """Taps k in [klo, khi) of window o land inside [0, n_in); start = o*s - pb."""
    cdef Py_ssize_t st = o * s - pb, lo = 0, hi = k
    if st < 0:
        lo = (-st + d - 1) // d
    if st + (k - 1) * d >= n_in:
        hi = (n_in - 1 - st) // d + 1 if n_in - 1 - st >= 0 else 0
    if hi < lo:
        hi = lo
    start[0] = st
    klo[0] = lo
    khi[0] = hi


cdef inline Py_ssize_t _pad_count(Py_ssize_t st, Py_ssize_t k, Py_ssize_t d, Py_ssize_t n_in, Py_ssize_t pb,
                                  Py_ssize_t pe) noexcept nogil:
    """Taps of a window starting at st that lie inside the padded range [-pb, n_in + pe)."""
    cdef Py_ssize_t j, c = 0
    for j in range(k):
        if st + j * d >= -pb and st + j * d < n_in + pe:
            c += 1
    return c


cdef void _pool_plane_f32(const float* x, float* y, int64_t* ind, Py_ssize_t plane, const int64_t* g,
                          int mode, int count_include_pad, int storage_order) noexcept nogil:
    """One plane. mode 0: max (ind may be NULL), mode 1: average."""
    cdef Py_ssize_t I0 = g[0], I1 = g[1], I2 = g[2], O0 = g[3], O1 = g[4], O2 = g[5]
    cdef Py_ssize_t K0 = g[6], K1 = g[7], K2 = g[8], S0 = g[9], S1 = g[10], S2 = g[11]
    cdef Py_ssize_t P0 = g[12], P1 = g[13], P2 = g[14], E0 = g[15], E1 = g[16], E2 = g[17]
    cdef Py_ssize_t D0 = g[18], D1 = g[19], D2 = g[20]
    cdef Py_ssize_t o0, o1, o2, a0, a1, a2, l0, l1, l2, h0, h1, h2, j0, j1, j2, p, best, cnt
    cdef Py_ssize_t base = plane * I0 * I1 * I2
    cdef const float* xp = x + base
    cdef float* yp = y + plane * O0 * O1 * O2
    cdef int64_t* ip = NULL
    cdef float v, m, acc
    if ind != NULL:
        ip = ind + plane * O0 * O1 * O2
    for o0 in range(O0):
        _tap_range(o0, I0, K0, S0, P0, D0, &a0, &l0, &h0)
        for o1 in range(O1):
            _tap_range(o1, I1, K1, S1, P1, D1, &a1, &l1, &h1)
            for o2 in range(O2):
                _tap_range(o2, I2, K2, S2, P2, D2, &a2, &l2, &h2)
                if mode == 0:
                    m = -INFINITY
                    best = -1
                    for j0 in range(l0, h0):
                        for j1 in range(l1, h1):
                            p = ((a0 + j0 * D0) * I1 + (a1 + j1 * D1)) * I2 + a2
                            for j2 in range(l2, h2):
                                v = xp[p + j2 * D2]
                                if best < 0 or v > m:
                                    m = v
                                    best = p + j2 * D2
                    yp[0] = m
                    if ip != NULL:
                        if best < 0:
                            ip[0] = -1
                        elif storage_order == 0:
                            ip[0] = base + best
                        else:
                            # column-major position of (i0, i1, i2) within the plane
                            j2 = best % I2
                            j1 = (best // I2) % I1
                            j0 = best // (I1 * I2)
                            ip[0] = base + j0 + j1 * I0 + j2 * I0 * I1
                        ip += 1
                else:
                    acc = 0.0
                    for j0 in range(l0, h0):
                        for j1 in range(l1, h1):
                            p = ((a0 + j0 * D0) * I1 + (a1 + j1 * D1)) * I2 + a2
                            for j2 in range(l2, h2):
                                acc = acc + xp[p + j2 * D2]
                    if count_include_pad:
                        cnt = (_pad_count(a0, K0, D0, I0, P0, E0) * _pad_count(a1, K1, D1, I1, P1, E1)
                               * _pad_count(a2, K2, D2, I2, P2, E2))
                    else:
                        cnt = (h0 - l0) * (h1 - l1) * (h2 - l2)
                    yp[0] = acc / <float>cnt if cnt > 0 else NAN
                yp += 1


cdef void _pool_f32(const float* x, float* y, int64_t* ind, Py_ssize_t nplanes, const int64_t* g, int mode,
                    int count_include_pad, int storage_order, int nthreads) noexcept nogil:
    cdef Py_ssize_t c
    cdef Py_ssize_t work = nplanes * g[3] * g[4] * g[5] * g[6] * g[7] * g[8]
    cdef PoolJob job
    job.x, job.y, job.ind, job.g, job.mode, job.cip, job.so = x, y, ind, g, mode, count_include_pad, storage_order
    parallel_for(nplanes, 1 if work < POOL_PAR_WORK else _nthreads(nthreads), _pool_plane_task, &job)


cdef struct PoolJob:
    const float* x
    float* y
    int64_t* ind
    const int64_t* g
    int mode, cip, so
    Py_ssize_t S


cdef void _pool_plane_task(void* p, Py_ssize_t c, int tid) noexcept nogil:
    cdef PoolJob* j = <PoolJob*>p
    _pool_plane_f32(j.x, j.y, j.ind, c, j.g, j.mode, j.cip, j.so)


cdef void _global_pool_task(void* p, Py_ssize_t c, int tid) noexcept nogil:
    cdef PoolJob* j = <PoolJob*>p
    _global_pool_row_f32(j.x + c * j.S, j.y + c, j.S, j.mode)


cdef int _check_pool_geom(const int64_t[::1] geom) except -1:
    cdef int i
    if geom.shape[0] != 21:
        raise ValueError(f"pool geometry must have 21 entries, got {geom.shape[0]}")
    for i in range(21):
        if geom[i] < 0 or (i >= 6 and i < 12 and geom[i] < 1) or (i >= 18 and geom[i] < 1):
            raise ValueError(f"invalid pool geometry {list(geom)}")
    return 0


def maxpool_f32(const float[::1] x, float[::1] y, int64_t[::1] indices, Py_ssize_t nplanes,
                const int64_t[::1] geom, int storage_order=0, int nthreads=0):
    """y[c, o] := max over window o of plane c of x; indices (optional, may be None) := flat index of the max
    (row-major when storage_order == 0, else column-major over the spatial dims), first maximum wins."""
    _check_pool_geom(geom)
    cdef Py_ssize_t nin = nplanes * geom[0] * geom[1] * geom[2], nout = nplanes * geom[3] * geom[4] * geom[5]
    if x.shape[0] != nin or y.shape[0] != nout:
        raise ValueError(f"maxpool_f32: x has {x.shape[0]} elements (expected {nin}), y has {y.shape[0]} "
                         f"(expected {nout})")
    if indices is not None and indices.shape[0] != nout:
        raise ValueError(f"maxpool_f32: indices has {indices.shape[0]} elements, expected {nout}")
    if nout == 0:
        return
    cdef int64_t* ip = &indices[0] if indices is not None else NULL
    with nogil:
        _pool_f32(&x[0], &y[0], ip, nplanes, &geom[0], 0, 0, storage_order, nthreads)


def avgpool_f32(const float[::1] x, float[::1] y, Py_ssize_t nplanes, const int64_t[::1] geom,
                int count_include_pad=0, int nthreads=0):
    """y[c, o] := mean over window o of plane c of x; the divisor counts taps inside the input
    (count_include_pad=0) or inside the padded input [-pb, in + pe) (count_include_pad=1)."""
    _check_pool_geom(geom)
    cdef Py_ssize_t nin = nplanes * geom[0] * geom[1] * geom[2], nout = nplanes * geom[3] * geom[4] * geom[5]
    if x.shape[0] != nin or y.shape[0] != nout:
        raise ValueError(f"avgpool_f32: x has {x.shape[0]} elements (expected {nin}), y has {y.shape[0]} "
                         f"(expected {nout})")
    if nout == 0:
        return
    with nogil:
        _pool_f32(&x[0], &y[0], NULL, nplanes, &geom[0], 1, count_include_pad, 0, nthreads)


cdef void _global_pool_row_f32(const float* x, float* y, Py_ssize_t S, int is_max) noexcept nogil:
    cdef Py_ssize_t i
    cdef float m
    cdef double acc = 0.0
    if is_max:
        m = x[0]
        for i in range(1, S):
            if x[i] > m:
                m = x[i]
        y[0] = m
    else:
        for i in range(S):
            acc += x[i]
        y[0] = <float>(acc / S)


def global_pool_f32(const float[:, ::1] x, float[::1] y, bint is_max, int nthreads=0):
    """y[c] := max(x[c, :]) if is_max else mean(x[c, :]) (the mean accumulates in double)."""
    cdef Py_ssize_t NC = x.shape[0], S = x.shape[1], c
    if y.shape[0] != NC:
        raise ValueError(f"global_pool_f32: x has {NC} rows, y has {y.shape[0]} elements")
    if S == 0:
        raise ValueError("global_pool_f32: empty spatial extent")
    if NC == 0:
        return
    cdef PoolJob job
    job.x, job.y, job.S, job.mode = &x[0, 0], &y[0], S, is_max
    with nogil:
        parallel_for(NC, 1 if NC * S < POOL_PAR_WORK else _nthreads(nthreads), _global_pool_task, &job)
