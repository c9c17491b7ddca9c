"""Scatter (opset 9-10, ScatterElements semantics without reduction). Oracles: onnx.reference's ScatterElements (the
same node renamed: onnx.reference has no Scatter), numpy (np.put_along_axis), and onnxruntime's Scatter."""
import numpy as np
import pytest
import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, fallback_nodes, make_model, run_onnxep, run_ort, run_reference
from tests.ops._eltshape import node, rand


def _idx(shape, n, seed, negative=False, unique_axis=None):
    rng = np.random.default_rng(seed)
    if unique_axis is not None:  # a permutation along the axis: no repeated target, so every oracle agrees
        idx = np.argsort(rng.random(shape), axis=unique_axis) % n
    else:
        idx = rng.integers(0, n, size=shape)
    return idx - n * (rng.random(shape) < 0.5) if negative else idx


CASES = [  # data shape, indices shape, axis
    ((3, 3), (2, 3), 0), ((3, 3), (3, 2), 1), ((1, 5), (1, 2), 1), ((4, 3, 5), (2, 3, 4), 2),
    ((4, 3, 5), (4, 2, 1), -2), ((4, 3, 5), (3, 1, 5), 0), ((6,), (4,), 0), ((4, 3), (0, 3), 0), ((2, 0), (2, 0), 1)]


def _check(data, idx, upd, axis, opset=10):
    feeds = {"x": data, "i": idx, "u": upd}
    m = make_model([node("Scatter", ["x", "i", "u"], ["y"], axis=axis)], feeds, ["y"], opset=opset)
    got, sess = run_onnxep(m, feeds)
    assert fallback_nodes(sess) == []
    # onnx.reference implements the same semantics as ScatterElements (it has no Scatter)
    ref = make_model([node("ScatterElements", ["x", "i", "u"], ["y"], axis=axis)], feeds, ["y"], opset=11)
    assert_outputs_match(got, run_reference(ref, feeds), rtol=0, atol=0)
    assert_outputs_match(got, run_ort(m, feeds), rtol=0, atol=0)
    return got[0]


@pytest.mark.parametrize("opset", [9, 10])
@pytest.mark.parametrize("itype", [np.int64, np.int32])
@pytest.mark.parametrize("negative", [False, True])
@pytest.mark.parametrize("dshape,ishape,axis", CASES)
def test_scatter(dshape, ishape, axis, negative, itype, opset):
    ax = axis % len(dshape)
    n = dshape[ax]
    idx = _idx(ishape, max(n, 1), 1, negative, unique_axis=ax if ishape[ax] <= n else None).astype(itype)
    if 0 in ishape:
        idx = np.zeros(ishape, itype)
    upd = rand(ishape, seed=2)
    _check(rand(dshape), idx, upd, axis, opset)


def test_scatter_matches_put_along_axis():
    """Oracle: numpy -- with indices of data's full shape, Scatter is np.put_along_axis."""
    data, idx, upd = rand((5, 4, 3)), _idx((5, 4, 3), 4, 3, unique_axis=1), rand((5, 4, 3), seed=4)
    want = data.copy()
    np.put_along_axis(want, idx, upd, axis=1)
    np.testing.assert_array_equal(_check(data, idx, upd, 1), want)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.uint8, np.bool_, np.float16])
def test_scatter_dtypes(dtype):
    data = (rand((4, 3)) * 10).astype(dtype)
    upd = (rand((2, 3), seed=5) * 10).astype(dtype)
    _check(data, np.array([[1, 0, 3], [2, 3, 0]], np.int64), upd, 0)


def test_scatter_does_not_change_input():
    data = rand((3, 4))
    before = data.copy()
    _check(data, np.array([[1, 2]], np.int64), rand((1, 2), seed=1), 1)
    np.testing.assert_array_equal(data, before)


@pytest.mark.parametrize("bad", [3, -4])
def test_scatter_out_of_range_raises(bad):
    """Oracle: none -- an index outside [-n, n-1] raises InvalidArgument naming the node; the session still works."""
    feeds = {"x": rand((3, 2)), "i": np.array([[0, bad]], np.int64), "u": rand((1, 2))}
    m = make_model([node("Scatter", ["x", "i", "u"], ["y"], axis=0)], feeds, ["y"], opset=10)
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(InvalidArgument, match=r"scatter_0.*indices must be in \[-3, 2\]"):
        sess.run(None, feeds)
    feeds["i"] = np.array([[0, 2]], np.int64)
    assert sess.run(None, feeds)[0][2, 1] == feeds["u"][0, 1]


def test_scatter_shape_mismatch_raises():
    feeds = {"x": rand((3, 2)), "i": np.array([[0, 1]], np.int64), "u": rand((1, 1))}
    m = make_model([node("Scatter", ["x", "i", "u"], ["y"], axis=0)], feeds, ["y"], opset=10)
    m.graph.ClearField("value_info")
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(InvalidArgument, match="scatter_0"):
        sess.run(None, feeds)


def test_scatter_from_opset_11_is_not_native():
    """Scatter is deprecated from opset 11 (ScatterElements): the cpu kernel covers opsets 9-10 only."""
    from onnxep.ops import _registry
    assert _registry.lookup("", "Scatter", 10).__name__ == "Scatter_9"
    assert _registry.lookup("", "Scatter", 11) is None
