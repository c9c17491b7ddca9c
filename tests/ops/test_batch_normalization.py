"""BatchNormalization on the cpu backend (inference, and training mode from opset 14).

Oracles: a numpy oracle of the inference formula y = (x - mean) / sqrt(var + epsilon) * scale + B for every opset
(onnx.reference uses the training formula below opset 14, so it cannot serve there); onnx.reference as well from
opset 14; onnxruntime as well from opset 7 (it has no BatchNormalization-6 kernel)."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import fallback_nodes, make_model, run_onnxep, run_ort, run_reference
from tests.ops._pool_cases import assert_same


def numpy_bn(x, scale, b, mean, var, eps):
    """Oracle: the inference formula in float64."""
    sh = (1, -1) + (1,) * (x.ndim - 2)
    x64 = x.astype(np.float64)
    y = (x64 - mean.reshape(sh)) / np.sqrt(var.astype(np.float64).reshape(sh) + eps) * scale.reshape(sh) \
        + b.reshape(sh)
    return y.astype(np.float32)


def _params(c, rng):
    return dict(scale=rng.uniform(0.5, 2, c).astype(np.float32), b=rng.standard_normal(c).astype(np.float32),
                mean=rng.standard_normal(c).astype(np.float32), var=rng.uniform(0.1, 3, c).astype(np.float32))


def _model(x, p, opset, eps, as_inputs, extra=None):
    attrs = {} if eps is None else {"epsilon": eps}
    attrs.update(extra or {})
    names = ["scale", "b", "mean", "var"]
    node = helper.make_node("BatchNormalization", ["x"] + names, ["y"], **attrs)
    if as_inputs:
        return make_model([node], {"x": x, **{n: p[n] for n in names}}, ["y"], opset=opset), {"x": x, **p}
    return make_model([node], {"x": x}, ["y"], opset=opset, initializers=p), {"x": x}


OPSET_ATTRS = [(6, {"is_test": 1}), (7, {}), (7, {"spatial": 1}), (9, {}), (14, {}), (14, {"training_mode": 0}),
               (15, {})]


@pytest.mark.parametrize("opset,extra", OPSET_ATTRS)
@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (2, 3, 7), (2, 4, 5, 6), (1, 3, 2, 3, 4), (1, 1, 1, 1),
                                   (2, 64, 33, 17)])
@pytest.mark.parametrize("eps", [None, 1e-3])
@pytest.mark.parametrize("as_inputs", [False, True])
def test_batchnorm(opset, extra, shape, eps, as_inputs):
    rng = np.random.default_rng(len(shape) * 7 + opset)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    p = _params(shape[1], rng)
    m, feeds = _model(x, p, opset, eps, as_inputs, extra)
    got, sess = run_onnxep(m, feeds)
    assert fallback_nodes(sess) == []
    e = 1e-5 if eps is None else eps
    assert_same(got, [numpy_bn(x, p["scale"], p["b"], p["mean"], p["var"], e)], rtol=1e-5, atol=1e-5)
    if opset >= 7:  # onnxruntime has no BatchNormalization-6 kernel
        assert_same(got, run_ort(m, feeds), rtol=1e-5, atol=1e-5)
    if opset >= 14:
        assert_same(got, run_reference(m, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset,attrs", [(6, {}), (6, {"is_test": 0}), (6, {"is_test": 1, "spatial": 0}),
                                         (7, {"spatial": 0}), (14, {"training_mode": 1}), (15, {"training_mode": 1})])
def test_batchnorm_refuses_training_and_non_spatial(opset, attrs):
    """supports() must refuse these: the node is not placed on the cpu backend."""
    x = np.zeros((2, 3, 4), np.float32)
    p = _params(3, np.random.default_rng(0))
    m, _ = _model(x, p, opset, None, False, attrs)
    if opset < 14:
        # no backend takes it (the reference backend refuses BatchNormalization < 14): a clear session error
        with pytest.raises(Exception, match="BatchNormalization"):
            onnxep.InferenceSession(m.SerializeToString())
    else:
        sess = onnxep.InferenceSession(m.SerializeToString())
        assert len(fallback_nodes(sess)) == 1


def test_batchnorm_training_mode_runs_on_cpu():
    """training_mode=1 with the running mean / var outputs runs on the cpu backend (oracle: onnxruntime)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    p = _params(3, rng)
    node = helper.make_node("BatchNormalization", ["x", "scale", "b", "mean", "var"], ["y", "rm", "rv"],
                            training_mode=1, momentum=0.8)
    m = make_model([node], {"x": x}, ["y", "rm", "rv"], opset=15, initializers=p)
    got, sess = run_onnxep(m, {"x": x})
    assert fallback_nodes(sess) == []
    assert_same(got, run_ort(m, {"x": x}), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [9, 15])
def test_batchnorm_symbolic_shapes_and_runtime_check(opset):
    """Symbolic dims still run on cpu (numpy oracle); a wrong parameter length at run time is a clear error."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    p = _params(3, rng)
    names = ["scale", "b", "mean", "var"]
    node = helper.make_node("BatchNormalization", ["x"] + names, ["y"])
    shapes = {"x": ["N", "C", "L"], **{n: ["C"] for n in names}}
    m = make_model([node], {"x": x, **p}, ["y"], opset=opset, input_shapes=shapes)
    got, sess = run_onnxep(m, {"x": x, **p})
    assert fallback_nodes(sess) == []
    assert_same(got, [numpy_bn(x, p["scale"], p["b"], p["mean"], p["var"], 1e-5)], rtol=1e-5, atol=1e-5)
    bad = dict(p, var=np.ones(4, np.float32))
    with pytest.raises(Exception, match="input_var has shape"):
        sess.run(None, {"x": x, **bad})
    assert_same(sess.run(None, {"x": x, **p}), got)  # the session still works after the error
