"""Gather, Shape, ConstantOfShape, Constant, Dropout. Oracle: onnx.reference."""
import numpy as np
import onnx
import pytest

import onnxep
from tests._util import fallback_nodes, make_model, run_reference
from tests.ops._eltshape import check_node, node, rand


GATHER_IDX = [np.array([0, 2, 1]), np.array(1), np.zeros((0,)), np.array([[2, 0], [1, 1]])]


@pytest.mark.parametrize("opset,axis,idx", [(1, a, i) for a in (0, 1, 2) for i in GATHER_IDX] +
                         [(v, a, i) for v in (11, 13) for a in (0, 1, -1)
                          for i in GATHER_IDX + [np.array([[1, -1], [0, -3]])]])
@pytest.mark.parametrize("itype", [np.int64, np.int32])
def test_gather(opset, axis, idx, itype):
    """Negative axis and indices are defined from opset 11."""
    check_node(node("Gather", ["x", "i"], ["y"], axis=axis), {"x": rand((3, 4, 3)), "i": idx.astype(itype)}, opset)


def test_gather_int_data():
    check_node(node("Gather", ["x", "i"], ["y"], axis=0),
               {"x": np.arange(12, dtype=np.int64).reshape(4, 3), "i": np.array([3, 0], np.int64)}, 13)


def test_gather_out_of_range_raises():
    """Oracle: none -- an out-of-range index must raise an error naming the node."""
    m = make_model([node("Gather", ["x", "i"], ["y"])], {"x": rand((3, 2)), "i": np.array([3], np.int64)}, ["y"],
                   opset=13)
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(Exception, match="gather_0"):
        sess.run(None, {"x": rand((3, 2)), "i": np.array([3], np.int64)})


@pytest.mark.parametrize("opset,attrs", [(1, {}), (13, {}), (15, {"start": 1}), (15, {"end": -1}),
                                         (15, {"start": -2, "end": 10}), (15, {"start": 3, "end": 1}),
                                         (19, {"start": -10}), (21, {})])
def test_shape(opset, attrs):
    check_node(node("Shape", ["x"], ["y"], **attrs), {"x": rand((2, 3, 4))}, opset)


def test_shape_of_scalar_and_int():
    check_node(node("Shape", ["x"], ["y"]), {"x": np.array(3, np.int64)}, 13)


@pytest.mark.parametrize("opset", [9, 20, 21])
@pytest.mark.parametrize("value", [None, np.array([0.02], np.float32), np.array([7], np.int64),
                                   np.array([True]), np.array([1.5], np.float64)])
@pytest.mark.parametrize("shape", [[2, 3], [0], [], [1, 4, 1]])
def test_constant_of_shape(opset, value, shape):
    attrs = {} if value is None else {"value": onnx.numpy_helper.from_array(value)}
    check_node(node("ConstantOfShape", ["s"], ["y"], **attrs), {"s": np.array(shape, np.int64)}, opset,
               input_shapes={"s": [None]})


@pytest.mark.parametrize("shape", [[10 ** 13], [10 ** 7, 10 ** 7], [-1, 2]])
def test_constant_of_shape_huge_raises_before_allocating(shape):
    """Oracle: none -- a terabyte-scale or negative shape must raise a clear error, not allocate."""
    m = make_model([node("ConstantOfShape", ["s"], ["y"])], {"s": np.array([1], np.int64)}, ["y"], opset=9,
                   input_shapes={"s": [None]})
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert fallback_nodes(sess) == []
    with pytest.raises(Exception, match="constantofshape_0") as e:
        sess.run(None, {"s": np.array(shape, np.int64)})
    assert "negative" in str(e.value) or "limit" in str(e.value)


@pytest.mark.parametrize("opset,attrs", [
    (9, {"value": onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))}),
    (13, {"value": onnx.numpy_helper.from_array(np.array([1, -2], np.int64))}),
    (12, {"value_float": 2.5}), (13, {"value_floats": [1.0, 2.0]}), (13, {"value_int": 3}),
    (19, {"value_ints": [4, 5, 6]})])
def test_constant(opset, attrs):
    y = check_node(node("Constant", [], ["y"], **attrs), {}, opset)
    y[0][...] = 0   # a caller mutating an output must not change the next run
    check_node(node("Constant", [], ["y"], **attrs), {}, opset)


def test_constant_string_runs_on_cpu():
    """Oracle: onnx.reference -- value_strings and a string tensor value, on the cpu backend."""
    for attrs in ({"value_strings": ["a", "bc"]},
                  {"value": onnx.helper.make_tensor("v", onnx.TensorProto.STRING, [2, 1], [b"x", b"yz"])}):
        m = make_model([node("Constant", [], ["y"], **attrs)], {}, ["y"], opset=13)
        sess = onnxep.InferenceSession(m.SerializeToString())
        assert fallback_nodes(sess) == []
        (got,), (want,) = sess.run(None, {}), run_reference(m, {})
        assert got.dtype == object and got.shape == want.shape and got.tolist() == want.tolist()


@pytest.mark.parametrize("opset", [7, 9, 10, 12, 13, 22])
@pytest.mark.parametrize("mask", [False, True])
def test_dropout_inference(opset, mask):
    """Oracle: onnx.reference for the output (and the opset-10+ bool mask); for opsets 7-9 the mask must be ones of
    the data type (the schema types it T; onnx.reference returns bool ones)."""
    outs = ["y", "m"] if mask else ["y"]
    x = rand((2, 5))
    attrs = {"ratio": 0.3} if opset < 12 else {}
    if mask and opset < 10:
        m = make_model([node("Dropout", ["x"], outs, **attrs)], {"x": x}, outs, opset=opset)
        sess = onnxep.InferenceSession(m.SerializeToString())
        assert fallback_nodes(sess) == []
        y, msk = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, x)
        assert msk.dtype == np.float32 and msk.shape == x.shape and (msk == 1).all()
        return
    check_node(node("Dropout", ["x"], outs, **attrs), {"x": x}, opset)


@pytest.mark.parametrize("training", [False, True])
def test_dropout_training_mode(training):
    """On the cpu backend whether training_mode is a constant or an input. Not training: output = x, mask all True
    (oracle: onnx.reference). Training with a seed: the first run equals onnx.reference's (both draw from numpy's
    RandomState with that seed); every output is 0 or x / (1 - ratio), and the mask says which."""
    n = node("Dropout", ["x", "r", "t"], ["y", "m"], seed=3)
    x = rand((30, 40)) + 2.0
    inits = {"r": np.array(0.25, np.float32), "t": np.array(training)}
    m = make_model([n], {"x": x}, ["y", "m"], opset=13, initializers=inits)
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert fallback_nodes(sess) == []
    (y, mask), (want_y, want_m) = sess.run(None, {"x": x}), run_reference(m, {"x": x})
    np.testing.assert_allclose(y, want_y, rtol=1e-6)
    np.testing.assert_array_equal(mask, want_m)
    if training:
        assert 0.6 < mask.mean() < 0.9
        np.testing.assert_allclose(y, np.where(mask, x / 0.75, 0), rtol=1e-6)
    else:
        np.testing.assert_array_equal(y, x)
        assert mask.all()
    m = make_model([n], {"x": x, "t": np.array(training)}, ["y", "m"], opset=13,
                   initializers={"r": np.array(0.25, np.float32)})
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert fallback_nodes(sess) == []
    y, mask = sess.run(None, {"x": x, "t": np.array(training)})
    np.testing.assert_allclose(y, np.where(mask, x / 0.75, 0) if training else x, rtol=1e-6)


