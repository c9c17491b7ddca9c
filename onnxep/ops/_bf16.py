"""The kernels' side of onnxep.compute_precision=bf16 (issue 29): whether a kernel takes the bf16 GEMM
(_k_bgemm.pxi, onnxep/_native/bgemm.h) and the packing spec of its constant B in the bf16 layout.

bf16 is used only where the session asked for it AND the CPU has AVX512_BF16 (vdpbf16ps); elsewhere the kernels keep
their fp32 packing and GEMM (a fallback, not an error)."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels


def use_bf16(kernel) -> bool:
    """True when the kernel's session asked for bf16 compute and this CPU has vdpbf16ps."""
    info = getattr(kernel, "info", None)
    return getattr(info, "precision", "fp32") == "bf16" and bool(getattr(_kernels, "bgemm_hw", lambda: False)())


def bf16_format(trans_b) -> str:
    """The packed-weight cache's format key of a bf16 packing (distinct from every fp32 one)."""
    return f"{_kernels.BGEMM_FORMAT}:trans_b={int(bool(trans_b))}"


def bf16_pack_spec(tensor, trans_b):
    """((K, N), nfloats, fill) packing a float32 2-D weight (K x N; N x K when trans_b) to bf16 panels."""
    kn = (int(tensor.shape[1]), int(tensor.shape[0])) if trans_b else (int(tensor.shape[0]), int(tensor.shape[1]))
    b = np.ascontiguousarray(tensor, dtype=np.float32)
    return kn, _kernels.bgemm_pack_b_size(*kn), lambda out: _kernels.bgemm_pack_b(b, bool(trans_b), out)
