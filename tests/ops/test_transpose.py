"""Transpose and Concat. Oracle: onnx.reference."""
import numpy as np
import pytest

from tests.ops._eltshape import check_node, node, rand


@pytest.mark.parametrize("opset", [1, 13, 21])
@pytest.mark.parametrize("shape,perm", [((2, 3), None), ((2, 3, 4), None), ((2, 3, 4), [1, 0, 2]),
                                        ((1, 4, 17, 3, 3), [0, 2, 1, 3, 4]), ((5,), [0]), ((0, 3), [1, 0]),
                                        ((2, 3, 4, 5), [3, 1, 0, 2])])
def test_transpose(opset, shape, perm):
    attrs = {} if perm is None else {"perm": perm}
    check_node(node("Transpose", ["x"], ["y"], **attrs), {"x": rand(shape)}, opset)


@pytest.mark.parametrize("dtype", [np.int64, np.uint8, np.float64, np.float16, np.int8, np.int32, np.bool_])
def test_transpose_dtypes(dtype):
    """Every element size goes through the native kernel (1, 2, 4, 8 bytes)."""
    check_node(node("Transpose", ["x"], ["y"], perm=[2, 0, 1]), {"x": (rand((2, 3, 4)) * 9).astype(dtype)}, 13)
    check_node(node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1]), {"x": (rand((1, 9, 70, 70)) * 9).astype(dtype)}, 13)


@pytest.mark.parametrize("shape,perm", [((1, 64, 112, 112), [0, 2, 3, 1]), ((1, 56, 56, 256), [0, 3, 1, 2]),
                                        ((2, 3, 64, 65), [0, 2, 3, 1]), ((1, 224, 224, 3), [0, 3, 1, 2])])
def test_transpose_layout_changes(shape, perm):
    """NCHW <-> NHWC at activation sizes (the native kernel goes multi-threaded above 256 KB)."""
    check_node(node("Transpose", ["x"], ["y"], perm=perm), {"x": rand(shape)}, 13)


@pytest.mark.parametrize("shape", [(1, 3, 224, 224), (2, 3, 50, 61), (1, 2, 300, 301), (3, 4, 7, 9), (1, 8, 130, 130),
                                   (1, 5, 200, 200)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_transpose_to_nhwc_with_few_channels(shape, dtype):
    """NCHW -> NHWC with 2, 3, 4 or 8 channels (4-byte elements: transpose_copy runs channel_shuffle_4b's loop, one
    image's pixels split over the threads above 256 KB), 5 channels and 8-byte elements (its tiles)."""
    check_node(node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1]), {"x": (rand(shape) * 99).astype(dtype)}, 13)


@pytest.mark.parametrize("opset,axis", [(4, 0), (4, 1), (11, -1), (11, 2), (13, -3)])
def test_concat(opset, axis):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for i, s in enumerate(shapes):
        s[axis] = i + 1    # different sizes along axis, incl. 1
    feeds = {f"x{i}": rand(s, i) for i, s in enumerate(shapes)}
    check_node(node("Concat", list(feeds), ["y"], axis=axis), feeds, opset)


@pytest.mark.parametrize("rows", [1, 8, 40])       # 24..960 bytes: numpy.concatenate; 2,880 and up: copy_rows
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_concat_both_sides_of_the_small_path(rows, dtype):
    for axis in (0, 1):
        feeds = {"a": (rand((rows, 3)) * 9).astype(dtype), "b": (rand((rows, 3), 1) * 9).astype(dtype)}
        check_node(node("Concat", ["a", "b"], ["y"], axis=axis), feeds, 13)
        feeds = {"a": (rand((rows, 30)) * 9).astype(dtype), "b": (rand((rows, 2), 1) * 9).astype(dtype)}
        check_node(node("Concat", ["a", "b"], ["y"], axis=1), feeds, 13)


def test_concat_single_and_empty_inputs():
    feeds = {"a": rand((2, 0, 3)), "b": rand((2, 2, 3), 1), "c": rand((2, 0, 3), 2)}
    check_node(node("Concat", list(feeds), ["y"], axis=1), feeds, 13)
    check_node(node("Concat", ["a"], ["y"], axis=1), {"a": rand((2, 4))}, 13)


@pytest.mark.parametrize("dtype", [np.int64, np.bool_, np.float16])
def test_concat_dtypes(dtype):
    feeds = {"a": (rand((2, 3)) > 0).astype(dtype), "b": (rand((1, 3), 1) > 0).astype(dtype)}
    check_node(node("Concat", ["a", "b"], ["y"], axis=0), feeds, 13)


def test_concat_inception_pattern():
    """Channel concat of four NCHW branches (the light inception/squeezenet pattern)."""
    feeds = {f"x{i}": rand((1, c, 13, 13), i) for i, c in enumerate([112, 288, 64, 64])}
    check_node(node("Concat", list(feeds), ["y"], axis=1), feeds, 9)
