"""gemv_rows_f32 (the tiny-N GEMM's kernel, ops/_gemv.py): Y := act(A @ W.T + bias) for A (M, K), W (N, K) as stored.

Oracles: float64 numpy on every ISA variant the machine runs, 1 and 2 threads; the variant's gemv_f32 row by row for
the same bits (each output is summed the same way whatever the row count and thread split)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
EPS = float(np.finfo(np.float32).eps)


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("M,N,K", [(1, 2, 1280), (3, 1, 16), (13, 5, 37), (70, 8, 300), (2, 3, 1), (130, 70, 33)])
@pytest.mark.parametrize("relu", [False, True])
def test_gemv_rows_vs_numpy_every_variant(isa, M, N, K, relu):
    V = VARIANTS[isa]
    rng = np.random.default_rng(M * 1000 + N * 10 + K)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    W = rng.uniform(-1, 1, (N, K)).astype(np.float32)
    for bias in (rng.uniform(-1, 1, N).astype(np.float32), None):
        want = A.astype(np.float64) @ W.T.astype(np.float64) + (0.0 if bias is None else bias)
        if relu:
            want = np.maximum(want, 0.0)
        for nth in (1, 2):
            Y = np.full((M, N), np.nan, np.float32)
            V.gemv_rows_f32(A, W, bias, Y, relu, nth)
            # |a|, |w| <= 1: the sum's error is at most K eps (K terms) plus the bias's rounding, x2 slack
            np.testing.assert_allclose(Y, want, rtol=0, atol=2 * (K + 2) * EPS)
            ref = np.empty(N, np.float32)
            for m in range(M):
                V.gemv_f32(A[m], W, True, bias, ref, relu, 1)
                np.testing.assert_array_equal(Y[m], ref)


def test_gemv_rows_checks_shapes():
    A = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="W"):
        _kernels.gemv_rows_f32(A, np.zeros((2, 5), np.float32), None, np.zeros((3, 2), np.float32))
    with pytest.raises(ValueError, match="Y"):
        _kernels.gemv_rows_f32(A, np.zeros((2, 4), np.float32), None, np.zeros((3, 3), np.float32))
    with pytest.raises(ValueError, match="bias"):
        _kernels.gemv_rows_f32(A, np.zeros((2, 4), np.float32), np.zeros(3, np.float32), np.zeros((3, 2), np.float32))
    Y = np.full((0, 2), np.nan, np.float32)
    _kernels.gemv_rows_f32(np.zeros((0, 4), np.float32), np.zeros((2, 4), np.float32), None, Y)   # nothing to do


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("K", [17, 64, 100, 675, 2048, 2049, 2115, 4100])
def test_gemv_one_row_and_four_row_forms_same_bits(isa, K):
    """_native/gemv.h reads a batch-1 weight one row at a time (rows of at most 8 KB) or four at a time (longer rows,
    and A with several rows); both forms give the same sums. Shifting W by one row moves every row between a group of
    four and the leftover rows taken one at a time; the M = 5 call takes the four-row form for every K. Oracle: float64
    numpy for the value, the same kernel's other form for the bits."""
    V = VARIANTS[isa]
    rng = np.random.default_rng(K)
    N = 11
    a = rng.uniform(-1, 1, K).astype(np.float32)
    W = rng.uniform(-1, 1, (N + 1, K)).astype(np.float32)
    bias = rng.uniform(-1, 1, N + 1).astype(np.float32)
    want = W.astype(np.float64) @ a.astype(np.float64) + bias
    y = np.empty(N + 1, np.float32)
    V.gemv_f32(a, W, True, bias, y, False, 1)
    np.testing.assert_allclose(y, want, rtol=0, atol=2 * (K + 2) * EPS)
    shifted = np.empty(N, np.float32)
    for nth in (1, 2):
        V.gemv_f32(a, np.ascontiguousarray(W[1:]), True, bias[1:], shifted, False, nth)
        np.testing.assert_array_equal(shifted, y[1:])
    Y = np.empty((5, N + 1), np.float32)
    V.gemv_rows_f32(np.tile(a, (5, 1)), W, bias, Y, False, 2)
    for m in range(5):
        np.testing.assert_array_equal(Y[m], y)


@pytest.mark.skipif(not {"avx2", "avx512"} <= set(VARIANTS), reason="needs the avx2 and avx512 variants")
@pytest.mark.parametrize("K", [100, 768, 2115, 9216])
def test_gemv_avx2_halves_give_the_avx512_bits(K):
    """Without AVX-512, _native/gemv.h holds each 16-lane sum as two 8-float halves, with the same operations lane by
    lane (both variants contract a * w + s to one FMA): the avx2 and avx512 variants give the same bits, one row at a
    time (N = 3) and four at a time (N = 9). Oracle: the avx512 variant."""
    rng = np.random.default_rng(K + 1)
    a = rng.uniform(-1, 1, K).astype(np.float32)
    for N in (3, 9):
        W = rng.uniform(-1, 1, (N, K)).astype(np.float32)
        y2, y5 = np.empty(N, np.float32), np.empty(N, np.float32)
        VARIANTS["avx2"].gemv_f32(a, W, True, None, y2, False, 1)
        VARIANTS["avx512"].gemv_f32(a, W, True, None, y5, False, 1)
        np.testing.assert_array_equal(y2, y5)
        Y2, Y5 = np.empty((3, N), np.float32), np.empty((3, N), np.float32)
        VARIANTS["avx2"].gemv_rows_f32(np.tile(a, (3, 1)), W, None, Y2, False, 1)
        VARIANTS["avx512"].gemv_rows_f32(np.tile(a, (3, 1)), W, None, Y5, False, 1)
        np.testing.assert_array_equal(Y2, Y5)
