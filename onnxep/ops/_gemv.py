"""The tiny-N GEMM of Gemm, MatMul and FusedMatMul: a constant B with few output columns N is kept as W (N, K), fp32,
and each output is a dot product of a row of A with a row of W (gemv_rows_f32: _native/gemv.h onnxep_gemv_nk, four
rows of W per pass over a row of A, four sums of 16 lanes over k), in fp32 and bf16 sessions alike.

The packed GEMMs (SGEMM and the bf16 one) pad B to NR-wide panels and run an MR x NR micro-kernel: with N far below
NR most of each panel is zeros that are read and multiplied all the same (a classifier's 1280 -> 2 Gemm reads 160 KB
of fp32 panels, 80 KB of bf16 ones, for a 10 KB weight, and it comes in cold from L3 after the layers before it). The
dot form reads K * N floats per row of A and does one vector FMA per 16 products; the packed micro-kernel does
MR * NR / L FMAs per k per MR rows whatever N is (L floats per vector): per row and k, NR / L FMAs against the dot's
ceil(N / 4) * 5 / L loads. TINY_N_OF_NR = 4, i.e. N <= NR / 4 (8 of the 32-column AVX-512 panel, 4 of AVX2's 16), keeps
the dot form at or under a third of the packed path's work with room for its horizontal sums (kernel-alone figures in
bench/NOTES.md). A B that is not packed (fed at run time, or pre-packing disabled) takes the dot form by the same rule,
so both give the same bits."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels

F32 = np.float32

#: N <= NR / TINY_N_OF_NR takes the dot form (see the module docstring)
TINY_N_OF_NR = 4
#: packing format key of W (N, K) fp32: no ISA, NR or KC in it (the layout is the plain transposed weight)
GEMV_NK_FORMAT = "gemv-nk-f32"
_force = None


def force_tiny_n(on):
    """Tests and in-process A/B: True sends every constant 2-D float32 B to the dot form, False none, None: the rule
    (tiny_n)."""
    global _force
    _force = None if on is None else bool(on)


def tiny_n(N: int) -> bool:
    """Whether a GEMM with a constant B of N output columns takes the dot form (N <= NR / TINY_N_OF_NR)."""
    if _force is not None:
        return _force
    return 0 < N <= _kernels.NR // TINY_N_OF_NR


def gemv_nk_pack_spec(tensor, trans_b):
    """((K, N), nfloats, fill) of W (N, K) fp32 from a float32 2-D weight B (K x N; N x K when trans_b), or None when
    the rule (tiny_n) keeps B on the packed GEMM."""
    K, N = (int(tensor.shape[1]), int(tensor.shape[0])) if trans_b else (int(tensor.shape[0]), int(tensor.shape[1]))
    if not tiny_n(N):
        return None
    b = tensor

    def fill(out):
        np.copyto(out[:N * K].reshape(N, K), b if trans_b else b.T)

    return (K, N), N * K, fill


def gemv_nk_weight(packed, K, N):
    """The (N, K) view of a dot-form packing."""
    return packed[:N * K].reshape(N, K)


def gemv_nk_of(B, trans_b):
    """W (N, K) float32, C-contiguous, of an unpacked 2-D B (K x N; N x K when trans_b): a B fed at run time with few
    columns takes the dot form too, so it gives the packed path's bits (the packing contract)."""
    return np.ascontiguousarray(B if trans_b else B.T, dtype=F32)
