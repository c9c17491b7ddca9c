"""Native entry module: probe the CPU once (CPUID + XGETBV), import the best kernel variant, re-export it.

`from onnxep import _kernels; _kernels.relu_f32(x, y)` calls whichever variant was chosen; `_kernels.ISA` names it.
ONNXEP_ISA=avx512|avx2|generic forces one (an error if this CPU or build cannot run it).
"""
import importlib

from onnxep import _env

cdef extern from *:
    """
    #if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
    #include <cpuid.h>
    #define ONNXEP_HAVE_CPUID 1
    #else
    #define ONNXEP_HAVE_CPUID 0
    #endif

    /* bit 0: x86-64 baseline, bit 1: AVX2+FMA usable, bit 2: AVX-512 F/BW/DQ/VL usable.
       "usable" = the CPU has it (CPUID) AND the OS saves the registers (XGETBV): MLAS checks
       (xcr0 & 0xE0) == 0xE0 for the opmask/ZMM state before using AVX-512. */
    static int onnxep_cpu_features(void) {
    #if ONNXEP_HAVE_CPUID
        unsigned int a = 0, b = 0, c = 0, d = 0;
        unsigned long long xcr0 = 0;
        int feats = 1;
        if (!__get_cpuid(1, &a, &b, &c, &d)) return feats;
        int osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, fma = (c >> 12) & 1;
        if (osxsave) {
            unsigned int lo, hi;
            __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
            xcr0 = ((unsigned long long)hi << 32) | lo;
        }
        int ymm_ok = (xcr0 & 0x6) == 0x6;
        int zmm_ok = ymm_ok && (xcr0 & 0xE0) == 0xE0;
        if (__get_cpuid_max(0, 0) < 7) return feats;
        __cpuid_count(7, 0, a, b, c, d);
        int avx2 = (b >> 5) & 1;
        int f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1, vl = (b >> 31) & 1;
        if (avx && avx2 && fma && ymm_ok) feats |= 2;
        if ((feats & 2) && f && dq && bw && vl && zmm_ok) feats |= 4;
        return feats;
    #else
        return 1;
    #endif
    }
    """
    int onnxep_cpu_features() noexcept nogil

#: Variants from best to worst; each needs the feature bit named here.
_VARIANTS = (("avx512", 4), ("avx2", 2), ("generic", 1))


def cpu_features():
    """The ISA variants this CPU (and OS) can run, best first."""
    cdef int feats = onnxep_cpu_features()
    return [name for name, bit in _VARIANTS if feats & bit]


def _load(isa):
    try:
        return importlib.import_module("onnxep._kernels_" + isa)
    except ImportError:
        return None


def _select():
    usable = cpu_features()
    if _env.ISA:
        if _env.ISA not in {name for name, _ in _VARIANTS}:
            raise ImportError(f"ONNXEP_ISA={_env.ISA!r}: expected one of avx512, avx2, generic")
        if _env.ISA not in usable:
            raise ImportError(f"ONNXEP_ISA={_env.ISA!r} but this CPU supports only {usable}")
        mod = _load(_env.ISA)
        if mod is None:
            raise ImportError(f"ONNXEP_ISA={_env.ISA!r} but onnxep was built without that variant")
        return _env.ISA, mod
    for isa in usable:
        mod = _load(isa)
        if mod is not None:
            return isa, mod
    raise ImportError("onnxep: no kernel variant could be imported (was the package built?)")


ISA, impl = _select()
#: Every variant this machine could run and that was built (for tests comparing variants).
AVAILABLE = [name for name in cpu_features() if _load(name) is not None]

globals().update({k: v for k, v in vars(impl).items() if not k.startswith("_")})


from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer


def address_of(obj):
    """Address of the first byte of a C-contiguous buffer (numpy array, bytes, ...), without going through ctypes."""
    cdef Py_buffer view
    PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE)
    cdef size_t addr = <size_t>view.buf
    PyBuffer_Release(&view)
    return addr
