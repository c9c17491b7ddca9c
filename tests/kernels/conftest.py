"""Fixtures the kernel tests share."""
import pytest

from onnxep import _kernels
from tests.kernels.test_conv import VARIANTS

#: the bf16 GEMM micro-kernels this CPU runs (bgemm.h: the portable one, and vdpbf16ps where AVX512_BF16 is present)
BG_KERNELS = [k for k in ("generic", "avx512bf16") if _kernels.bgemm_have(k)]


@pytest.fixture(params=BG_KERNELS)
def bg_kernel(request):
    """Each bgemm micro-kernel this CPU runs, forced in every variant for the test's duration."""
    for mod in VARIANTS.values():
        mod.bgemm_force(request.param)
    yield request.param
    for mod in VARIANTS.values():
        mod.bgemm_force(None)
