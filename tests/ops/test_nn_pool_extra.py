"""LpPool, GlobalLpPool, MaxUnpool, Col2Im on the cpu backend, float16 / float32 / float64 (Col2Im: its numeric
types). Oracles: onnxruntime (LpPool: onnx.reference averages over the taps inside the input and then multiplies by
the full kernel size, wrong beside padding), numpy (GlobalLpPool; MaxUnpool as the inverse of MaxPool's indices),
onnx.reference (MaxUnpool with output_shape, Col2Im)."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort, \
    run_reference
from tests.ops._eltshape import node, rand

DTYPES = [np.float32, np.float64, np.float16]


def _run(n, feeds, opset, inits=None):
    m = make_model([n], feeds, list(n.output), opset=opset, initializers=inits)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    return m, got


LP_CASES = [  # x shape, attributes
    ((1, 2, 5, 6), {"kernel_shape": [2, 2]}),
    ((2, 3, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 6, 7), {"kernel_shape": [3, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 6, 7), {"kernel_shape": [3, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 9), {"kernel_shape": [3], "p": 1, "strides": [2]}),
    ((1, 2, 4, 5, 4), {"kernel_shape": [2, 2, 2], "p": 3}),
    ((1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 7, 7), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("xs,attrs", LP_CASES)
def test_lp_pool(xs, attrs, dtype):
    x = rand(xs, 0, dtype)
    opset = 18 if "ceil_mode" in attrs or "dilations" in attrs else 11
    m, got = _run(node("LpPool", ["x"], ["y"], **attrs), {"x": x}, opset)
    m32 = make_model(m.graph.node, {"x": x.astype(np.float32)}, ["y"], opset=opset)
    want = run_ort(m32, {"x": x.astype(np.float32)})[0]
    assert got[0].dtype == dtype and got[0].shape == want.shape
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got[0].astype(np.float32), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 2, 6), (2, 2, 2, 3, 2)])
def test_global_lp_pool(shape, p, dtype):
    """Oracle: numpy (the spec's formula in float64) and onnxruntime (float32)."""
    x = rand(shape, 0, dtype)
    m, got = _run(node("GlobalLpPool", ["x"], ["y"], p=p), {"x": x}, 22 if dtype == np.float64 else 2)
    ax = tuple(range(2, len(shape)))
    want = (np.abs(x.astype(np.float64)) ** p).sum(ax, keepdims=True) ** (1 / p)
    assert got[0].dtype == dtype
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got[0], want, rtol=tol, atol=tol)
    if dtype == np.float32:
        assert_outputs_match(got, run_ort(m, {"x": x}), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opset", [9, 11, 22])
def test_max_unpool_inverts_max_pool(opset, dtype):
    """Oracle: numpy -- unpooling MaxPool's values at its indices puts each maximum back in place, zeros elsewhere."""
    x = rand((2, 3, 4, 6), 1)
    pool = make_model([node("MaxPool", ["x"], ["v", "i"], kernel_shape=[2, 2], strides=[2, 2])], {"x": x},
                      ["v", "i"], opset=12)
    v, i = run_ort(pool, {"x": x})
    feeds = {"v": v.astype(dtype), "i": i}
    m, got = _run(node("MaxUnpool", ["v", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2]), feeds, opset)
    want = np.zeros(x.size, dtype)
    want[i.ravel()] = v.ravel().astype(dtype)
    assert got[0].dtype == dtype
    np.testing.assert_array_equal(got[0], want.reshape(x.shape))


def test_max_unpool_output_shape():
    """Oracle: onnx.reference (the inferred result at the start of a larger output_shape)."""
    feeds = {"v": rand((1, 2, 2, 2)), "i": np.array([[[[0, 3], [9, 14]], [[17, 19], [25, 31]]]], np.int64),
             "s": np.array([1, 2, 5, 6], np.int64)}
    m, got = _run(node("MaxUnpool", ["v", "i", "s"], ["y"], kernel_shape=[2, 2], strides=[2, 2]), feeds, 11)
    assert_outputs_match(got, run_reference(m, feeds), rtol=0, atol=0)


def test_max_unpool_errors():
    """Oracle: none -- an index past the inferred output, and an output_shape asking for ~8 TB, raise named errors
    (the latter before allocating); the session still runs afterwards."""
    feeds = {"v": rand((1, 1, 2, 2)), "i": np.array([[[[0, 3], [9, 16]]]], np.int64),
             "s": np.array([1, 1, 4, 4], np.int64)}
    m = make_model([node("MaxUnpool", ["v", "i", "s"], ["y"], kernel_shape=[2, 2], strides=[2, 2])], feeds, ["y"],
                   opset=11)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"maxunpool_0.*indices must be in \[0, 15\]"):
        sess.run(None, feeds)
    with pytest.raises(Fail, match="maxunpool_0.*bytes"):
        sess.run(None, {**feeds, "s": np.array([1, 1, 1 << 20, 1 << 20], np.int64)})
    feeds["i"][0, 0, 1, 1] = 15
    assert sess.run(None, feeds)[0].shape == (1, 1, 4, 4)


COL_CASES = [  # input shape, image_shape, block_shape, attributes
    ((1, 5, 5), [5, 5], [1, 5], {}),
    ((1, 9, 4), [4, 4], [3, 3], {"strides": [1, 1], "pads": [0, 0, 0, 0], "dilations": [1, 1]}),
    ((2, 8, 9), [5, 5], [2, 2], {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 4), [5, 5], [2, 2], {"dilations": [3, 3]}),
    ((1, 8, 12), [3, 4, 5], [2, 2, 2], {"strides": [1, 2, 2], "pads": [0, 1, 0, 0, 0, 1]}),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("xs,img,blk,attrs", COL_CASES)
def test_col2im(xs, img, blk, attrs, dtype):
    """Oracle: onnx.reference."""
    x = (rand(xs, 0) * 10).astype(dtype)
    feeds = {"x": x}
    inits = {"img": np.array(img, np.int64), "blk": np.array(blk, np.int64)}
    m, got = _run(node("Col2Im", ["x", "img", "blk"], ["y"], **attrs), feeds, 18, inits)
    tol = 1e-2 if dtype == np.float16 else 1e-6
    assert_outputs_match(got, run_reference(m, feeds), rtol=tol, atol=tol)


def test_col2im_errors():
    """Oracle: none -- a block count that does not match image_shape raises InvalidArgument; an image_shape of ~10^12
    pixels is refused with a named error before allocating; the session still runs afterwards."""
    feeds = {"x": rand((1, 4, 9)), "img": np.array([4, 4], np.int64), "blk": np.array([2, 2], np.int64)}
    m = make_model([node("Col2Im", ["x", "img", "blk"], ["y"])], feeds, ["y"], opset=18,
                   input_shapes={"x": ["N", "CK", "L"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    assert sess.run(None, feeds)[0].shape == (1, 1, 4, 4)
    with pytest.raises(InvalidArgument, match="col2im_0.*input has 9 blocks"):
        sess.run(None, {**feeds, "img": np.array([5, 4], np.int64)})
    big = {**feeds, "x": rand((1, 1, 1)), "blk": np.array([1, 1], np.int64),
           "img": np.array([1 << 20, 1 << 20], np.int64)}
    with pytest.raises((InvalidArgument, Fail), match="col2im_0"):
        sess.run(None, big)
    assert sess.run(None, feeds)[0].shape == (1, 1, 4, 4)
