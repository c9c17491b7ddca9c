"""Build: one Cython source compiled once per ISA, plus a baseline entry module that picks one at import.

onnxep/_kernels.pyx          baseline x86-64; CPUID + XGETBV probe; imports the chosen variant
onnxep/_native/*.h           the C (intrinsics micro-kernels, thread pool, run-loop steps) that the .pxi files
                             declare and wrap; compiled inside each variant with that variant's flags
onnxep/_kernels_<isa>.pyx    thin files that `include "_kernels_impl.pxi"` (Cython 3.3 crashes when one
                             .pyx is listed in two extensions, so each variant gets its own stem)

Never -march=native: every flag set below names the ISA it targets, so a wheel runs on any x86-64.
ONNXEP_DEBUG_CYTHON=1 turns bounds checking on for debugging.
"""
import os
import platform

from Cython.Build import cythonize
from setuptools import Extension, setup

IS_X86 = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")

BASE_FLAGS = ["-O3", "-fno-math-errno", "-fno-trapping-math", "-fopenmp", "-std=gnu11"]
ISA_FLAGS = {
    "generic": [],
    "avx2": ["-mavx2", "-mfma", "-mf16c"],
    "avx512": ["-mavx2", "-mfma", "-mf16c", "-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl"],
}
if not IS_X86:  # other architectures build the generic variant only
    ISA_FLAGS = {"generic": []}

debug = os.environ.get("ONNXEP_DEBUG_CYTHON") == "1"
directives = {
    "language_level": 3,
    "boundscheck": debug,
    "wraparound": False,
    "initializedcheck": debug,
    "nonecheck": False,
    "cdivision": True,
    "freethreading_compatible": True,
}

extensions = [
    Extension(
        "onnxep._kernels",
        ["onnxep/_kernels.pyx"],
        include_dirs=["onnxep"],
        extra_compile_args=["-O2"],
    )
]
for isa, flags in ISA_FLAGS.items():
    extensions.append(
        Extension(
            f"onnxep._kernels_{isa}",
            [f"onnxep/_kernels_{isa}.pyx"],
            include_dirs=["onnxep"],
            extra_compile_args=BASE_FLAGS + flags,
            extra_link_args=["-fopenmp"],
            define_macros=[("ONNXEP_ISA_NAME", f'"{isa}"')],
        )
    )

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives=directives,
        include_path=["onnxep"],
        compile_time_env={"ONNXEP_X86": IS_X86},
    ),
)
