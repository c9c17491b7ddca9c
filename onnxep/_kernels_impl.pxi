# Shared source of every kernel variant (included by _kernels_<isa>.pyx, compiled per ISA by setup.py).
#
# Two layers per kernel (scikit-learn's _cython_blas): a `def` wrapper takes typed memoryviews, checks
# shapes once and releases the GIL; a `cdef ... noexcept nogil` function does the work on raw pointers.
# Nothing below the wrappers touches a Python object, so the same loops can run on foreign threads.

cimport cython
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


# One include per kernel family (each file may assume the cimports above).
include "_k_threads.pxi"
include "_k_eltwise.pxi"
include "_k_gemm.pxi"
include "_k_conv.pxi"
include "_k_conv_nhwc.pxi"
include "_k_winograd.pxi"
include "_k_pool.pxi"
include "_k_norm.pxi"
include "_k_resample.pxi"
include "_k_hash.pxi"
include "_k_nhwc.pxi"
include "_k_transpose.pxi"
include "_k_transformer.pxi"
include "_k_runloop.pxi"
