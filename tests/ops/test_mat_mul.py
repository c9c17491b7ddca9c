"""MatMul op. Oracles: onnx.reference (numpy.matmul semantics), onnxruntime for shape/dtype; packed vs unpacked."""
import numpy as np
import pytest
from onnx import helper

from tests._util import fallback_nodes, make_model, run_onnxep, run_ort, run_reference
from tests.ops._packing import assert_packing_modes_agree

EPS = float(np.finfo(np.float32).eps)

SHAPES = [
    ((3,), (3,)), ((4,), (4, 5)), ((2, 4), (4,)), ((1, 1), (1, 1)), ((5, 7), (7, 3)), ((2, 5, 7), (7, 3)),
    ((2, 3, 5, 7), (7, 33)), ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)), ((2, 3, 4), (2, 4, 1)), ((7,), (2, 7, 3)),
    ((2, 3, 8), (8,)), ((0, 4), (4, 5)), ((3, 0), (0, 5)), ((2, 0, 3, 4), (4, 2)), ((37, 300), (300, 70)),
    # attention's per-head products (both operands computed), and broadcast batch dims on both sides
    ((1, 12, 128, 64), (1, 12, 64, 128)), ((1, 12, 128, 128), (1, 12, 128, 64)), ((2, 1, 5, 3), (1, 4, 3, 6)),
    ((3, 1, 4, 0), (1, 2, 0, 5)),
]


@pytest.mark.parametrize("opset", [1, 9, 13])
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_matmul(opset, sa, sb):
    """Oracle: onnx.reference; shape/dtype against onnxruntime too."""
    rng = np.random.default_rng(len(sa) * 10 + len(sb))
    A = rng.uniform(-1, 1, sa).astype(np.float32)
    B = rng.uniform(-1, 1, sb).astype(np.float32)
    node = helper.make_node("MatMul", ["A", "B"], ["Y"])
    feeds = {"A": A, "B": B}
    model = make_model([node], feeds, ["Y"], opset=opset)
    got, sess = run_onnxep(model, feeds)
    assert fallback_nodes(sess) == []
    ref = run_reference(model, feeds)[0]
    assert got[0].dtype == np.float32 and got[0].shape == ref.shape
    K = sa[-1]
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=2 * (K + 2) * EPS)
    if opset == 13:
        o = run_ort(model, feeds)[0]
        assert o.shape == got[0].shape and o.dtype == got[0].dtype


@pytest.mark.parametrize("sa,sb", [((4,), (4, 5)), ((2, 5, 7), (7, 3)), ((37, 300), (300, 70)), ((1, 1), (1, 1))])
def test_matmul_packing_modes(sa, sb):
    """Oracle: the unpacked path (B as graph input); packed, prepacking disabled and non-sharing mode identical."""
    rng = np.random.default_rng(5)
    A = rng.uniform(-1, 1, sa).astype(np.float32)
    B = rng.uniform(-1, 1, sb).astype(np.float32)
    node = helper.make_node("MatMul", ["A", "B"], ["Y"], name="mm")
    out = assert_packing_modes_agree(node, {"A": A}, "B", B, 13)
    np.testing.assert_allclose(out, np.matmul(A.astype(np.float64), B), rtol=0, atol=2 * (sa[-1] + 2) * EPS)


def test_matmul_constant_batched_b_not_packed():
    """Oracle: onnx.reference; a constant 3-D B is not pre-packed (only 2-D B is) and still runs on the cpu backend."""
    rng = np.random.default_rng(6)
    A = rng.uniform(-1, 1, (2, 3, 4)).astype(np.float32)
    B = rng.uniform(-1, 1, (2, 4, 5)).astype(np.float32)
    node = helper.make_node("MatMul", ["A", "B"], ["Y"])
    model = make_model([node], {"A": A}, ["Y"], opset=13, initializers={"B": B})
    got, sess = run_onnxep(model, {"A": A})
    assert fallback_nodes(sess) == []
    np.testing.assert_allclose(got[0], run_reference(model, {"A": A})[0], rtol=0, atol=12 * EPS)


def test_matmul_bad_shapes_raise():
    """Oracle: the documented error -- mismatched inner dims raise an error naming the node."""
    import onnxep
    node = helper.make_node("MatMul", ["A", "B"], ["Y"], name="bad_mm")
    A = np.ones((2, 3), np.float32)
    B = np.ones((4, 5), np.float32)
    model = make_model([node], {"A": A, "B": B}, ["Y"], opset=13, input_shapes={"A": ["m", "k"], "B": ["k2", "n"]})
    sess = onnxep.InferenceSession(model.SerializeToString())
    with pytest.raises(Exception, match="bad_mm"):
        sess.run(None, {"A": A, "B": B})
