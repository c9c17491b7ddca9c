"""Normalization kernels (batchnorm, LRN, softmax): every ISA variant in onnxep._kernels.AVAILABLE against the generic
one and against numpy oracles, one thread vs many, and the wrappers' shape checks. Tolerance between variants: the
loops are the same scalar code, but the AVX variants may auto-vectorise and contract a*b+c into FMA, so a few ulp."""
import importlib
import math

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
GENERIC = VARIANTS["generic"]


@pytest.mark.parametrize("n,c,s", [(1, 1, 1), (2, 3, 7), (4, 16, 1025), (1, 5, 1)])
def test_batchnorm_kernel(n, c, s):
    rng = np.random.default_rng(s)
    x = rng.standard_normal((n * c, s)).astype(np.float32)
    mean, a, b = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    want = ((x.reshape(n, c, s) - mean[:, None]) * a[:, None] + b[:, None]).reshape(n * c, s)  # numpy oracle
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.empty_like(x)
            mod.batchnorm_f32(x, y, mean, a, b, nt)
            np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6, err_msg=isa)


def numpy_lrn(x, size, alpha, beta, bias):
    """Oracle: the ONNX spec formula in float64 on (N, C, S)."""
    sq = np.zeros(x.shape)
    lo, hi = math.floor((size - 1) / 2), math.ceil((size - 1) / 2)
    for c in range(x.shape[1]):
        sq[:, c] = (x[:, max(0, c - lo):min(x.shape[1], c + hi + 1)].astype(np.float64) ** 2).sum(axis=1)
    return (x / (bias + alpha / size * sq) ** beta).astype(np.float32)


@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 5, 9), (2, 32, 700)])
@pytest.mark.parametrize("size", [1, 2, 3, 6])
def test_lrn_kernel(shape, size):
    x = np.random.default_rng(size).standard_normal(shape).astype(np.float32)
    want = numpy_lrn(x, size, 0.05, 0.75, 1.5)
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.empty_like(x)
            mod.lrn_f32(x, y, size, 0.05, 0.75, 1.5, nt)
            np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-7, err_msg=isa)


@pytest.mark.parametrize("outer,k,inner", [(1, 1, 1), (1, 7, 1), (5, 3, 4), (3, 1, 9), (64, 1000, 1), (8, 37, 50),
                                           (40, 8, 200)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_kernel(outer, k, inner, log):
    x = (np.random.default_rng(k).standard_normal((outer, k, inner)) * 20).astype(np.float32)
    z = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    want = (z - np.log(np.exp(z).sum(axis=1, keepdims=True)) if log else
            np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)).astype(np.float32)  # numpy oracle
    ref = np.empty(x.size, np.float32)
    GENERIC.softmax_f32(x.reshape(-1), ref, outer, k, inner, log, 1)
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.empty(x.size, np.float32)
            mod.softmax_f32(x.reshape(-1), y, outer, k, inner, log, nt)
            np.testing.assert_allclose(y.reshape(x.shape), want, rtol=1e-5, atol=1e-6, err_msg=isa)
            np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-7, err_msg=isa)


def test_norm_wrappers_check_shapes():
    with pytest.raises(ValueError, match="batchnorm_f32"):
        _kernels.batchnorm_f32(np.zeros((6, 2), np.float32), np.zeros((6, 3), np.float32), np.zeros(3, np.float32),
                               np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="multiple"):
        _kernels.batchnorm_f32(np.zeros((5, 2), np.float32), np.zeros((5, 2), np.float32), np.zeros(3, np.float32),
                               np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(ValueError, match="lrn_f32"):
        _kernels.lrn_f32(np.zeros((1, 2, 3), np.float32), np.zeros((1, 2, 3), np.float32), 0, 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="softmax_f32"):
        _kernels.softmax_f32(np.zeros(6, np.float32), np.zeros(6, np.float32), 2, 2, 2)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("R,C", [(1, 1), (7, 3), (3136, 64), (50, 17)])
@pytest.mark.parametrize("relu", [False, True])
def test_channel_affine_f32(isa, R, C, relu):
    """Oracle: numpy (x * a + b per channel of the last axis, then relu); 1 and 2 threads identical; in place."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(R + C)
    x = rng.uniform(-1, 1, (R, C)).astype(np.float32)
    a, b = rng.uniform(-2, 2, C).astype(np.float32), rng.uniform(-1, 1, C).astype(np.float32)
    want = x * a + b
    if relu:
        want = np.maximum(want, 0)
    y1, y2 = np.empty_like(x), np.empty_like(x)
    mod.channel_affine_f32(x, y1, a, b, relu, 1)
    mod.channel_affine_f32(x, y2, a, b, relu, 2)
    np.testing.assert_allclose(y1, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(y1, y2)
    mod.channel_affine_f32(x, x, a, b, relu, 2)
    np.testing.assert_array_equal(x, y1)
    with pytest.raises(ValueError, match="channel_affine_f32"):
        mod.channel_affine_f32(x, y1, a[:-1] if C > 1 else np.empty(2, np.float32), b, relu, 1)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("R,C,size,beta", [(1, 1, 1, 0.75), (7, 5, 3, 0.75), (50, 96, 5, 0.75), (9, 17, 4, 0.6),
                                            (3, 8, 9, 1.0)])
def test_lrn_nhwc_matches_nchw_kernel(isa, R, C, size, beta):
    """Oracle: the NCHW lrn_f32 on the transposed data (the same window sums) and numpy float64 (the formula);
    1 and 2 threads identical."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(R * C + size)
    x = rng.uniform(-3, 3, (R, C)).astype(np.float32)
    y1, y2 = np.empty_like(x), np.empty_like(x)
    mod.lrn_nhwc_f32(x, y1, size, 0.01, beta, 1.5, 1)
    mod.lrn_nhwc_f32(x, y2, size, 0.01, beta, 1.5, 2)
    np.testing.assert_array_equal(y1, y2)
    yn = np.empty((1, C, R), np.float32)
    mod.lrn_f32(np.ascontiguousarray(x.T)[None], yn, size, 0.01, beta, 1.5, 1)
    np.testing.assert_allclose(y1, yn[0].T, rtol=2e-6, atol=0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    x64 = x.astype(np.float64)
    s = np.stack([np.sum(x64[:, max(0, c - lo):min(C, c + hi + 1)] ** 2, axis=1) for c in range(C)], axis=1)
    np.testing.assert_allclose(y1, x64 / (1.5 + 0.01 / size * s) ** beta, rtol=5e-6)
