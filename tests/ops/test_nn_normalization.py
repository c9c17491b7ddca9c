"""InstanceNormalization, GroupNormalization (opsets 18, 21), MeanVarianceNormalization, LpNormalization,
RMSNormalization: float16 / float32 / float64 on the cpu backend. Oracles: onnx.reference (ReferenceEvaluator on the
one-node model; it runs the function bodies of GroupNormalization and MeanVarianceNormalization), numpy, and
onnxruntime where onnx.reference departs from the spec (LpNormalization p=1: onnx.reference sums x, not |x|)."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, fallback_nodes, make_model, run_onnxep, run_ort
from tests.ops._eltshape import check_node, node, rand

DTYPES = [np.float32, np.float64, np.float16]


def _tol(dtype):
    return dict(rtol=2e-2, atol=2e-2) if dtype == np.float16 else dict(rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 4, 3, 5), (2, 2, 2, 3, 2)])
def test_instance_normalization(shape, dtype):
    C = shape[1]
    feeds = {"x": rand(shape, 0, dtype) * 3 + 1, "s": rand((C,), 1, dtype), "b": rand((C,), 2, dtype)}
    for opset in (6, 22):
        check_node(node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3), feeds, opset, **_tol(dtype))


def test_instance_normalization_matches_numpy():
    """Oracle: numpy, the spec's formula in float64."""
    x, s, b = rand((2, 3, 4, 4)), rand((3,), 1), rand((3,), 2)
    got = check_node(node("InstanceNormalization", ["x", "s", "b"], ["y"]), {"x": x, "s": s, "b": b}, 6)[0]
    xd = x.astype(np.float64)
    m, v = xd.mean((2, 3), keepdims=True), xd.var((2, 3), keepdims=True)
    want = s[:, None, None] * (xd - m) / np.sqrt(v + 1e-5) + b[:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("shape,groups", [((2, 4, 3, 3), 2), ((1, 6, 5), 3), ((2, 4, 2, 2), 4), ((3, 2, 4), 1)])
def test_group_normalization(shape, groups, opset, dtype):
    n = groups if opset == 18 else shape[1]
    feeds = {"x": rand(shape, 0, dtype) * 2 - 1, "s": rand((n,), 1, dtype), "b": rand((n,), 2, dtype)}
    check_node(node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=1e-2), feeds, opset,
               **_tol(dtype))


def test_group_normalization_bad_groups():
    """Oracle: none -- channels not divisible by num_groups raise InvalidArgument; the session still runs after."""
    feeds = {"x": rand((1, 6, 4)), "s": rand((4,)), "b": rand((4,))}
    m = make_model([node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=4)], feeds, ["y"], opset=18,
                   input_shapes={"x": ["N", "C", "L"]})
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sess = onnxep.InferenceSession(m.SerializeToString(), so)
    with pytest.raises(InvalidArgument, match="groupnormalization_0.*num_groups 4"):
        sess.run(None, feeds)
    assert sess.run(None, {**feeds, "x": rand((1, 8, 4))})[0].shape == (1, 8, 4)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("axes", [None, (1,), (0, 1, 2, 3), (-1, -2)])
def test_mean_variance_normalization(axes, opset, dtype):
    kw = {} if axes is None else {"axes": list(axes)}
    feeds = {"x": rand((2, 3, 4, 5), 0, dtype) * 2 + 3}
    n = node("MeanVarianceNormalization", ["x"], ["y"], **kw)
    if dtype == np.float32:
        check_node(n, feeds, opset, **_tol(dtype))
        return
    # onnx.reference's function body adds a float32 epsilon and fails on other types: numpy oracle
    m = make_model([n], feeds, ["y"], opset=opset)
    got, sess = run_onnxep(m, feeds)
    assert fallback_nodes(sess) == []
    x = feeds["x"].astype(np.float64)
    ax = (0, 2, 3) if axes is None else axes
    want = (x - x.mean(ax, keepdims=True)) / (x.std(ax, keepdims=True) + 1e-9)
    assert got[0].dtype == dtype
    np.testing.assert_allclose(got[0], want, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("opset", [1, 22])
def test_lp_normalization_p2(axis, opset, dtype):
    x = rand((3, 4, 5), 0, dtype)
    x[1, 1] = 0   # a zero row: 0, not NaN
    check_node(node("LpNormalization", ["x"], ["y"], axis=axis, p=2), {"x": x}, opset, **_tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lp_normalization_p1(dtype):
    """Oracle: onnxruntime (L1 norm = sum |x|) and numpy."""
    x = rand((3, 4), 0, dtype)
    feeds = {"x": x}
    m = make_model([node("LpNormalization", ["x"], ["y"], axis=1, p=1)], feeds, ["y"], opset=13)
    got, sess = run_onnxep(m, feeds)
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, run_ort(m, feeds))
    np.testing.assert_allclose(got[0], x / np.abs(x).sum(1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis,sshape", [(-1, (5,)), (1, (4, 5)), (0, (3, 4, 5)), (1, (1, 5))])
def test_rms_normalization(axis, sshape, dtype):
    feeds = {"x": rand((3, 4, 5), 0, dtype), "s": rand(sshape, 1, dtype)}
    check_node(node("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-3), feeds, 23, **_tol(dtype))


def test_rms_normalization_bad_scale():
    """Oracle: none -- a scale that does not broadcast to X raises InvalidArgument naming the node."""
    feeds = {"x": rand((2, 3)), "s": rand((2,))}
    m = make_model([node("RMSNormalization", ["x", "s"], ["y"])], feeds, ["y"], opset=23,
                   input_shapes={"s": ["K"]})
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(InvalidArgument, match="rmsnormalization_0.*does not broadcast"):
        sess.run(None, feeds)
