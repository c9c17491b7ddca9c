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
    /* threadpoolctl's limit on onnxep's pool (onnxep/_threadpool.py), 0 = none; read by every parallel_for. Exported
       (default visibility) so the controller reaches it through ctypes, as threadpoolctl does OpenBLAS's. */
    static int onnxep_thread_limit_v = 0;
    __attribute__((visibility("default"))) int onnxep_get_thread_limit(void) {
        return __atomic_load_n(&onnxep_thread_limit_v, __ATOMIC_RELAXED);
    }
    __attribute__((visibility("default"))) void onnxep_set_thread_limit(int n) {
        __atomic_store_n(&onnxep_thread_limit_v, n > 0 ? n : 0, __ATOMIC_RELAXED);
    }
    """
    const char* ONNXEP_ISA_NAME
    int onnxep_get_thread_limit() noexcept nogil
    void onnxep_set_thread_limit(int n) noexcept nogil

ISA_NAME = ONNXEP_ISA_NAME.decode()


cdef inline int _nthreads(int requested) noexcept nogil:
    """Threads for one kernel call: omp_get_max_threads() read per call (so threadpoolctl limits apply),
    capped by the session's intra_op_num_threads when that is set (> 0)."""
    cdef int m = openmp.omp_get_max_threads()
    cdef int lim = onnxep_get_thread_limit()
    if lim > 0 and lim < m:
        m = lim
    if requested > 0 and requested < m:
        return requested
    return m


def max_threads():
    """omp_get_max_threads() as this variant's OpenMP runtime sees it."""
    return openmp.omp_get_max_threads()


def thread_limit():
    """threadpoolctl's limit on onnxep's pool in this variant (0: none; onnxep/_threadpool.py sets it)."""
    return onnxep_get_thread_limit()


def set_thread_limit(int n):
    """Caps every parallel_for of this variant at n threads (n <= 0: no cap); threadpoolctl's controller sets it."""
    onnxep_set_thread_limit(n)


# One include per kernel family (each file may assume the cimports above).
include "_k_threads.pxi"
include "_k_eltwise.pxi"
include "_k_gemm.pxi"
include "_k_bgemm.pxi"       # before the conv families: the bf16 Winograd uses its declarations
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
include "_k_pwdw.pxi"          # after the conv and depthwise families it runs
include "_k_runloop.pxi"
include "_k_ort_plugin.pxi"
include "_k_qgemm.pxi"
include "_k_qconv.pxi"
