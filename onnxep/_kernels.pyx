"""Native entry module: probe the CPU once (CPUID + XGETBV), import the best kernel variant, re-export it.

`from onnxep import _kernels; _kernels.relu_f32(x, y)` calls whichever variant was chosen; `_kernels.ISA` names it.
ONNXEP_ISA=avx512|avx2|generic forces one (an error if this CPU or build cannot run it).
"""
import importlib

from onnxep import _env

cdef extern from "_native/cpuid.h":
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
