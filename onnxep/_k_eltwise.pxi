# Elementwise kernels.

cdef void relu_f32_raw(const float* x, float* y, Py_ssize_t n) noexcept nogil:
    """y := max(x, 0)"""
    cdef Py_ssize_t i
    cdef float v
    for i in range(n):
        v = x[i]
        y[i] = v if v > 0 else 0.0


cdef enum:
    ELTWISE_CHUNK = 16384   # elements per parallel chunk; below two chunks an elementwise call stays on one thread


def relu_f32(const float[::1] x, float[::1] y, int nthreads=0):
    """y := max(x, 0), elementwise over flat contiguous arrays (y may alias x)."""
    cdef Py_ssize_t n = x.shape[0], c, nchunks
    if y.shape[0] != n:
        raise ValueError(f"relu_f32: x has {n} elements, y has {y.shape[0]}")
    if n == 0:
        return
    nchunks = (n + ELTWISE_CHUNK - 1) // ELTWISE_CHUNK
    with nogil:
        if nchunks < 2:
            relu_f32_raw(&x[0], &y[0], n)
        else:
            for c in prange(nchunks, num_threads=_nthreads(nthreads), schedule="static"):
                relu_f32_raw(&x[c * ELTWISE_CHUNK], &y[c * ELTWISE_CHUNK],
                             min(<Py_ssize_t>ELTWISE_CHUNK, n - c * ELTWISE_CHUNK))
