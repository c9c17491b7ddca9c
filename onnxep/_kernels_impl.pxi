# Shared source of every kernel variant (included by _kernels_<isa>.pyx, compiled per ISA by setup.py).
#
# Two layers per kernel (scikit-learn's _cython_blas): a `def` wrapper takes typed memoryviews, checks
# shapes once and releases the GIL; a `cdef ... noexcept nogil` function does the work on raw pointers.
# Nothing below the wrappers touches a Python object, so the same loops can run on foreign threads.

cimport cython
from cython.parallel cimport prange, parallel
cimport openmp
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memset
from libc.math cimport expf, sqrtf, powf, fabsf, INFINITY

cdef extern from *:
    """
    #ifndef ONNXEP_ISA_NAME
    #define ONNXEP_ISA_NAME "unknown"
    #endif
    """
    const char* ONNXEP_ISA_NAME

ISA_NAME = ONNXEP_ISA_NAME.decode()


cdef inline int _nthreads(int requested) noexcept nogil:
    """Threads for one kernel call: omp_get_max_threads() read per call (so threadpoolctl limits apply),
    capped by the session's intra_op_num_threads when that is set (> 0)."""
    cdef int m = openmp.omp_get_max_threads()
    if requested > 0 and requested < m:
        return requested
    return m


def max_threads():
    """omp_get_max_threads() as this variant's OpenMP runtime sees it."""
    return openmp.omp_get_max_threads()


# ---------------------------------------------------------------- elementwise

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
