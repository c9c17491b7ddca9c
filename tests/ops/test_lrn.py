"""LRN on the cpu backend.

Oracles: a numpy oracle of the spec formula (window [c - floor((size-1)/2), c + ceil((size-1)/2)], alpha divided by
size) for every case, and onnxruntime for rank 4 and odd size (what onnxruntime's kernel takes). onnx.reference is not used:
in onnx 1.23.2 its loop runs over the batch dim instead of the channels (`for c in range(x.shape[0])`), so it leaves
the square sum of channels >= N at zero."""
import math

import numpy as np
import pytest
from onnx import helper

from tests._util import fallback_nodes, make_model, run_onnxep, run_ort
from tests.ops._pool_cases import assert_same


def numpy_lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    """Oracle: the ONNX spec formula in float64."""
    x64 = x.astype(np.float64)
    sq = np.zeros_like(x64)
    c1, c2 = math.floor((size - 1) / 2), math.ceil((size - 1) / 2)
    for c in range(x.shape[1]):
        lo, hi = max(0, c - c1), min(x.shape[1], c + c2 + 1)
        sq[:, c] = (x64[:, lo:hi] ** 2).sum(axis=1)
    return (x64 / (bias + alpha / size * sq) ** beta).astype(np.float32)


@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 5, 3, 4), (1, 7, 9, 11), (2, 3, 7), (1, 4, 2, 3, 2),
                                   (2, 32, 24, 25)])
@pytest.mark.parametrize("size,attrs", [(1, {}), (2, {}), (3, {"alpha": 0.01}), (4, {"beta": 0.5, "bias": 2.0}),
                                        (5, {"alpha": 0.02, "beta": 1.0, "bias": 0.5}), (9, {})])
@pytest.mark.parametrize("opset", [1, 13])
def test_lrn(shape, size, attrs, opset):
    x = np.random.default_rng(size).standard_normal(shape).astype(np.float32) * 2
    m = make_model([helper.make_node("LRN", ["x"], ["y"], size=size, **attrs)], {"x": x}, ["y"], opset=opset)
    got, sess = run_onnxep(m, {"x": x})
    assert fallback_nodes(sess) == []
    assert_same(got, [numpy_lrn(x, size, **attrs)], rtol=1e-5, atol=1e-6)
    if x.ndim == 4 and size % 2 == 1:
        assert_same(got, run_ort(m, {"x": x}), rtol=1e-5, atol=1e-6)
