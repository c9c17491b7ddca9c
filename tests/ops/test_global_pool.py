"""GlobalAveragePool / GlobalMaxPool on the cpu backend. Oracles: onnxruntime always, onnx.reference as well except
for GlobalMaxPool on rank-3 input, where onnx.reference (1.23.2) drops the trailing 1 (returns (N, C))."""
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
    assert_same(got, run_ort(m, {"x": x}))
    if not (op == "GlobalMaxPool" and len(shape) == 3):
        assert_same(got, run_reference(m, {"x": x}))
