"""Reshape (opsets 5, 13, 14, 19, 21), Flatten, Squeeze, Unsqueeze, Identity. Oracle: onnx.reference."""
import numpy as np
import pytest

import onnxep
from tests._util import make_model
from tests.ops._eltshape import check_node, node, rand


@pytest.mark.parametrize("opset", [5, 13, 14, 19, 21])
@pytest.mark.parametrize("in_shape,target", [((2, 3, 4), (6, 4)), ((2, 3, 4), (-1,)), ((2, 3, 4), (0, -1)),
                                             ((2, 3, 4), (0, 0, 2, 2)), ((1, 256, 6, 6), (1, -1)), ((6,), (1, 2, 1, 3)),
                                             ((), (1,)), ((1,), ()), ((0, 3), (-1, 3))])
def test_reshape(opset, in_shape, target):
    check_node(node("Reshape", ["x", "s"], ["y"]), {"x": rand(in_shape)}, opset,
               initializers={"s": np.array(target, np.int64)})


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.float16, np.uint8])
def test_reshape_dtypes_dynamic_shape(dtype):
    x = (rand((2, 6)) > 0).astype(dtype)
    check_node(node("Reshape", ["x", "s"], ["y"]), {"x": x, "s": np.array([3, -1], np.int64)}, 14)


@pytest.mark.parametrize("opset", [14, 19, 21])
def test_reshape_allowzero(opset):
    check_node(node("Reshape", ["x", "s"], ["y"], allowzero=1), {"x": rand((0, 4))}, opset,
               initializers={"s": np.array([4, 0], np.int64)})


@pytest.mark.parametrize("target", [[5, -1], [-1, -1], [7], [0, 0, 0, 0]])
def test_reshape_bad_shape_raises(target):
    """Oracle: none -- an impossible target shape must raise an error naming the node."""
    m = make_model([node("Reshape", ["x", "s"], ["y"])], {"x": rand((2, 3)), "s": np.array([6], np.int64)}, ["y"],
                   opset=14, input_shapes={"s": [None]})
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(Exception, match="reshape_0"):
        sess.run(None, {"x": rand((2, 3)), "s": np.array(target, np.int64)})


@pytest.mark.parametrize("opset,axis", [(1, 0), (1, 1), (9, 2), (9, 3), (11, -1), (13, -3), (21, 1)])
def test_flatten(opset, axis):
    check_node(node("Flatten", ["x"], ["y"], axis=axis), {"x": rand((2, 3, 1, 5))}, opset)


def test_flatten_default_axis():
    check_node(node("Flatten", ["x"], ["y"]), {"x": rand((2, 3, 4))}, 13)


@pytest.mark.parametrize("opset,axes", [(1, [0]), (1, [0, 1]), (11, [-1]), (11, [0, 3]), (9, [2])])
def test_unsqueeze_attr(opset, axes):
    check_node(node("Unsqueeze", ["x"], ["y"], axes=axes), {"x": rand((3, 4))}, opset)


@pytest.mark.parametrize("opset,axes", [(1, [3, 0]), (11, [-1, 1]), (13, [4, 0])])
def test_unsqueeze_unsorted_axes_vs_onnxruntime(opset, axes):
    """Oracle: onnxruntime (onnx.reference's Unsqueeze-1 inserts unsorted axes one by one, which the spec does not:
    axes index the output)."""
    from tests._util import run_onnxep, run_ort
    x = rand((3, 4, 2))
    if opset < 13:
        m = make_model([node("Unsqueeze", ["x"], ["y"], axes=axes)], {"x": x}, ["y"], opset=opset)
    else:
        m = make_model([node("Unsqueeze", ["x", "a"], ["y"])], {"x": x}, ["y"], opset=opset,
                       initializers={"a": np.array(axes, np.int64)})
    got, sess = run_onnxep(m, {"x": x})
    want = run_ort(m, {"x": x})
    assert got[0].shape == want[0].shape and got[0].dtype == want[0].dtype
    np.testing.assert_array_equal(got[0], want[0])


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("axes", [[0], [-1], [0, 4], [1, 3]])
def test_unsqueeze_input(opset, axes):
    check_node(node("Unsqueeze", ["x", "a"], ["y"]), {"x": rand((3, 4, 2))}, opset,
               initializers={"a": np.array(axes, np.int64)})


def test_unsqueeze_scalar():
    check_node(node("Unsqueeze", ["x", "a"], ["y"]), {"x": rand(())}, 13, initializers={"a": np.array([0], np.int64)})


@pytest.mark.parametrize("opset,axes", [(1, None), (1, [0]), (11, [-2, 0]), (11, None)])
def test_squeeze_attr(opset, axes):
    attrs = {} if axes is None else {"axes": axes}
    check_node(node("Squeeze", ["x"], ["y"], **attrs), {"x": rand((1, 3, 1, 4))}, opset)


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("axes", [None, [0], [2, -4]])
def test_squeeze_input(opset, axes):
    ins = ["x"] if axes is None else ["x", "a"]
    inits = None if axes is None else {"a": np.array(axes, np.int64)}
    check_node(node("Squeeze", ins, ["y"]), {"x": rand((1, 3, 1, 4))}, opset, initializers=inits)


def test_squeeze_non_one_axis_raises():
    """Oracle: none -- squeezing a dim that is not 1 must raise an error naming the node."""
    m = make_model([node("Squeeze", ["x", "a"], ["y"])], {"x": rand((1, 3)), "a": np.array([1], np.int64)}, ["y"],
                   opset=13)
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(Exception, match="squeeze_0"):
        sess.run(None, {"x": rand((1, 3)), "a": np.array([1], np.int64)})


@pytest.mark.parametrize("opset", [1, 13, 14, 16, 21])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_identity(opset, dtype):
    check_node(node("Identity", ["x"], ["y"]), {"x": (rand((2, 3)) * 5).astype(dtype)}, opset)
