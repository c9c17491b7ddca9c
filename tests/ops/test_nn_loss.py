"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss on the cpu backend (fallback off): reductions none / sum /
mean, class weights, ignore_index (inside and outside [0, C), negative), inputs of rank 2 to 5, int32 / int64 targets,
float16 / float32 / float64, SoftmaxCrossEntropyLoss's log_prob output, every opset (12, 13, 22).
Oracle: onnxruntime (run_ort); bfloat16, which onnxruntime does not run for these ops: onnxruntime in float32 on the
same bfloat16-rounded inputs, rounded to bfloat16."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort
from tests.ops._eltshape import node, rand

NLL, SCE = "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"
C = 5


def _feeds(shape, dtype, tdtype, weight, ignore, seed=0):
    rng = np.random.default_rng(seed)
    x = rand(shape, seed, dtype)
    t = rng.integers(0, C, (shape[0],) + shape[2:]).astype(tdtype)
    if ignore is not None:
        t.flat[::3] = ignore
    feeds = {"x": x, "t": t}
    if weight:
        feeds["w"] = rng.uniform(0.2, 2.0, C).astype(dtype)
    return feeds


def _model(op, feeds, opset, log_prob=False, **attrs):
    outs = ["y", "lp"] if log_prob else ["y"]
    return make_model([node(op, list(feeds), outs, **attrs)], feeds, outs, opset=opset)


def _check(m, feeds, tol):
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, run_ort(m, feeds), rtol=tol, atol=tol)
    return got


@pytest.mark.parametrize("op", [NLL, SCE])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("shape", [(4, C), (3, C, 4), (2, C, 3, 2), (2, C, 2, 1, 3)])
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("ignore", [None, 2, -1])
def test_loss_float32(op, reduction, shape, weight, ignore):
    feeds = _feeds(shape, np.float32, np.int64, weight, ignore)
    if op == NLL:
        feeds["x"] = -np.abs(feeds["x"])         # log-probability-like
    attrs = {"reduction": reduction} if reduction != "mean" else {}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    _check(_model(op, feeds, 13, **attrs), feeds, 1e-5)


@pytest.mark.parametrize("op,opset", [(NLL, 12), (NLL, 13), (NLL, 22), (SCE, 12), (SCE, 13)])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize("tdtype", [np.int32, np.int64])
def test_loss_dtypes_opsets(op, opset, dtype, tdtype):
    feeds = _feeds((3, C, 4), dtype, tdtype, True, 1)
    tol = 3e-3 if dtype == np.float16 else 1e-10
    _check(_model(op, feeds, opset, reduction="mean", ignore_index=1), feeds, tol)
    feeds.pop("w")
    _check(_model(op, feeds, opset, reduction="none"), feeds, tol)


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weight", [False, True])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_sce_log_prob(reduction, weight, dtype):
    feeds = _feeds((2, C, 3), dtype, np.int64, weight, 0)
    tol = 3e-3 if dtype == np.float16 else 1e-5
    got = _check(_model(SCE, feeds, 13, log_prob=True, reduction=reduction, ignore_index=0), feeds, tol)
    assert got[1].shape == feeds["x"].shape


@pytest.mark.parametrize("op,opset", [(NLL, 22), (SCE, 13)])
@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_loss_bfloat16(op, opset, reduction):
    bf = ml_dtypes.bfloat16
    f32 = _feeds((3, C, 2), np.float32, np.int64, True, 4)
    f32["x"] = f32["x"].astype(bf).astype(np.float32)
    f32["w"] = f32["w"].astype(bf).astype(np.float32)
    outs = ["y", "lp"] if op == SCE else ["y"]
    n = node(op, ["x", "t", "w"], outs, reduction=reduction, ignore_index=4)
    ins = [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, f32["x"].shape),
           helper.make_tensor_value_info("t", TensorProto.INT64, f32["t"].shape),
           helper.make_tensor_value_info("w", TensorProto.BFLOAT16, (C,))]
    g = helper.make_graph([n], "g", ins, [helper.make_empty_tensor_value_info(o) for o in outs])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    feeds = {"x": f32["x"].astype(bf), "t": f32["t"], "w": f32["w"].astype(bf)}
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    want = run_ort(_model(op, f32, 13, log_prob=op == SCE, reduction=reduction, ignore_index=4), f32)
    for g_, w_ in zip(got, want):
        assert g_.dtype == bf and g_.shape == w_.shape
        np.testing.assert_allclose(g_.astype(np.float32), w_.astype(bf).astype(np.float32), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("op", [NLL, SCE])
def test_loss_all_ignored_mean_is_nan(op):
    """Every target ignored: mean is 0 / 0 = nan, as onnxruntime gives."""
    feeds = {"x": rand((3, C), 1), "t": np.full(3, 2, np.int64)}
    _check(_model(op, feeds, 13, ignore_index=2), feeds, 1e-6)


@pytest.mark.parametrize("op", [NLL, SCE])
def test_loss_bad_target(op):
    """Oracle: none -- a target outside [0, C) (and not ignore_index) raises InvalidArgument naming the node; the
    session still runs good input afterwards."""
    feeds = _feeds((3, C), np.float32, np.int64, False, None)
    m = make_model([node(op, ["x", "t"], ["y"])], feeds, ["y"], opset=13, input_shapes={"x": ["N", C], "t": ["M"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=rf"{op.lower()}_0.*target values must be in \[0, {C}\).*got {C}"):
        sess.run(None, {**feeds, "t": np.array([0, C, 1], np.int64)})
    with pytest.raises(InvalidArgument, match=rf"{op.lower()}_0.*target has shape"):
        sess.run(None, {**feeds, "t": np.array([0, 1], np.int64)})
    np.testing.assert_allclose(sess.run(None, feeds)[0], run_ort(m, feeds)[0], rtol=1e-5)


def test_loss_bad_reduction():
    """An unknown reduction is refused when the session is made, naming it."""
    feeds = _feeds((3, C), np.float32, np.int64, False, None)
    m = _model(NLL, feeds, 13, reduction="avg")
    with pytest.raises(InvalidArgument, match="negativeloglikelihoodloss_0'?: reduction must be one of none, sum, mean, got 'avg'"):
        onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
