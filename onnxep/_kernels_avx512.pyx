# Kernel variant "avx512": the shared source compiled with this ISA's flags (see setup.py).
include "_kernels_impl.pxi"
