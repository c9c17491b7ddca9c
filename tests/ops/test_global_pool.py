"""GlobalAveragePool / GlobalMaxPool on the cpu backend.

Oracles: numpy (mean / max over axes 2.. with keepdims) for every case; onnxruntime as well up to rank 5 (it rejects
rank 6 as "Unsupported pooling size"); onnx.reference as well except GlobalMaxPool at rank != 4, where onnx.reference
(1.23.2) returns a wrong shape (e.g. (N, C) for rank 3)."""
import numpy as np
import pytest
from onnx import helper

from tests._util import fallback_nodes, make_model, run_onnxep, run_ort, run_reference
from tests.ops._pool_cases import assert_same


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(1, 1, 1), (2, 3, 5), (2, 3, 7, 9), (1, 1, 1, 1), (1, 2, 3, 4, 5),
                                   (1, 2, 2, 2, 2, 3), (3, 64, 40, 41)])
@pytest.mark.parametrize("opset", [1, 13, 22])
def test_global_pool(op, shape, opset):
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32) + 3.0
    m = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"], opset=opset)
    got, sess = run_onnxep(m, {"x": x})
    assert fallback_nodes(sess) == []
    axes = tuple(range(2, x.ndim))
    want = x.astype(np.float64).mean(axis=axes, keepdims=True) if op == "GlobalAveragePool" else x.max(
        axis=axes, keepdims=True)
    assert_same(got, [want.astype(np.float32)])
    if x.ndim <= 5:
        assert_same(got, run_ort(m, {"x": x}))
    if op == "GlobalAveragePool" or x.ndim == 4:
        assert_same(got, run_reference(m, {"x": x}))
