"""Softmax and LogSoftmax on the cpu backend.

Oracles: onnxruntime for every case; onnx.reference as well at opset 13 (in onnx 1.23.2 it applies opset-13
semantics, softmax along `axis` only, to opsets 1/11 too, which coerce the input to 2-D at `axis`); and a numpy oracle
of the opset-1/11 coercion."""
import numpy as np
import pytest
from onnx import helper

from tests._util import fallback_nodes, make_model, run_onnxep, run_ort, run_reference
from tests.ops._pool_cases import assert_same


def numpy_softmax(x, axis, coerce, log):
    """Oracle: numpy in float64, max subtracted."""
    axis = axis % x.ndim if x.ndim else 0
    x64 = x.astype(np.float64)
    if coerce:
        x64 = x64.reshape(int(np.prod(x.shape[:axis])), -1)
        ax = 1
    else:
        ax = axis
    z = x64 - x64.max(axis=ax, keepdims=True)
    y = z - np.log(np.exp(z).sum(axis=ax, keepdims=True)) if log else np.exp(z) / np.exp(z).sum(axis=ax,
                                                                                                  keepdims=True)
    return y.reshape(x.shape).astype(np.float32)


SHAPES_AXES = [((1,), 0), ((7,), 0), ((3, 5), None), ((3, 5), 0), ((3, 5), -1), ((2, 3, 4), 1), ((2, 3, 4), 0),
               ((2, 3, 4), -1), ((2, 1, 5, 6), 1), ((2, 3, 5, 6), 2), ((2, 3, 5, 6), -2), ((1, 1, 1, 1), 3),
               ((64, 1000), -1), ((8, 37, 50), 1), ((4, 9, 33, 40), 1)]


# opset 1 allows no negative axis: those combinations are not generated
CASES = [(opset, shape, axis) for opset in (1, 11, 13) for shape, axis in SHAPES_AXES
         if not (opset == 1 and axis is not None and axis < 0)]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset,shape,axis", CASES)
def test_softmax(op, opset, shape, axis):
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 10 + 50).astype(np.float32)  # large offset: needs the max subtraction
    attrs = {} if axis is None else {"axis": axis}
    m = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset)
    got, sess = run_onnxep(m, {"x": x})
    assert fallback_nodes(sess) == []
    default_axis = -1 if opset >= 13 else 1
    ax = default_axis if axis is None else axis
    assert_same(got, [numpy_softmax(x, ax, opset < 13, op == "LogSoftmax")], rtol=1e-5, atol=2e-6)
    assert_same(got, run_ort(m, {"x": x}), rtol=1e-5, atol=2e-6)
    if opset >= 13:
        assert_same(got, run_reference(m, {"x": x}), rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("opset", [1, 11])
def test_softmax_default_axis_out_of_range_is_refused(opset):
    """Rank-1 input at opset 1/11: the default axis 1 is out of range; supports() refuses the node."""
    import onnxep
    x = np.zeros(5, np.float32)
    m = make_model([helper.make_node("Softmax", ["x"], ["y"])], {"x": x}, ["y"], opset=opset)
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert len(fallback_nodes(sess)) == 1


def test_softmax_extreme_values():
    """-inf and huge inputs stay finite where they should. Oracle: onnxruntime."""
    x = np.array([[0.0, -np.inf, 3e38, 1.0], [-1e30, -1e30, -1e30, -1e30]], np.float32)
    for op in ("Softmax", "LogSoftmax"):
        m = make_model([helper.make_node(op, ["x"], ["y"], axis=-1)], {"x": x}, ["y"], opset=13)
        got, sess = run_onnxep(m, {"x": x})
        assert fallback_nodes(sess) == []
        assert_same(got, run_ort(m, {"x": x}))
