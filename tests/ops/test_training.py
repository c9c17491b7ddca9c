"""The ai.onnx.preview.training optimizers Adagrad, Adam, Momentum on the cpu backend (fallback off). Oracle:
onnx.reference (onnxruntime's CPU build has none of them)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import InvalidArgument
from tests.ops._tensor_cases import cpu_session, reference

DOMAIN = "ai.onnx.preview.training"
NAMES = {"Adagrad": "GH", "Adam": "GVH", "Momentum": "GV"}


def _model(op, n, dtype, **attrs):
    """op over n optimized tensors of `dtype` (any shape): inputs R, T, X1..Xn, then the states."""
    et = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    groups = "X" + NAMES[op]
    ins = ["R", "T"] + [f"{k}{i}" for k in groups for i in range(n)]
    outs = [f"{k}_new{i}" for k in "X" + NAMES[op][1:] for i in range(n)]
    node = helper.make_node(op, ins, outs, domain=DOMAIN, name=f"{op.lower()}_0", **attrs)
    vi = [helper.make_tensor_value_info("R", et, None), helper.make_tensor_value_info("T", TensorProto.INT64, None)]
    vi += [helper.make_tensor_value_info(k, et, None) for k in ins[2:]]
    g = helper.make_graph([node], "t", vi, [helper.make_tensor_value_info(o, et, None) for o in outs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=8)


def _feeds(op, shapes, dtype, t, seed=0):
    rng = np.random.default_rng(seed)
    f = {"R": np.array(0.1, dtype), "T": np.array(t, np.int64)}
    for k in "X" + NAMES[op]:
        for i, s in enumerate(shapes):
            v = rng.standard_normal(s)
            f[f"{k}{i}"] = (np.abs(v) if k == "H" else v).astype(dtype)
    return f


CASES = [
    ("Adagrad", dict(decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.001)),
    ("Adagrad", {}),
    ("Adam", dict(alpha=0.95, beta=0.85, epsilon=1e-2, norm_coefficient=0.001, norm_coefficient_post=0.01)),
    ("Adam", {}),
    ("Momentum", dict(alpha=0.95, beta=0.1, mode="standard", norm_coefficient=0.001)),
    ("Momentum", dict(alpha=0.9, beta=0.5, mode="nesterov", norm_coefficient=0.01)),
]


@pytest.mark.parametrize("op,attrs", CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t", [0, 3])
@pytest.mark.parametrize("shapes", [[(5,)], [(2, 3), (4,), ()]])
def test_optimizer(op, attrs, dtype, t, shapes):
    m = _model(op, len(shapes), dtype, **attrs)
    feeds = _feeds(op, shapes, dtype, t)
    sess = cpu_session(m)
    assert set(sess.node_assignment.values()) == {"cpu"}
    got = sess.run(None, feeds)
    want = reference(m, feeds)
    assert len(got) == len(want) == len(shapes) * (len(NAMES[op]))
    # float64: onnx.reference reads the float attributes as np.float32 and computes e.g. 1 - alpha in float32; its
    # multi-tensor Adam returns float32 outputs
    tol = 1e-5 if dtype is np.float32 or op == "Adam" and len(shapes) > 1 else 1e-7
    for g, w in zip(got, want):
        assert g.dtype == np.dtype(dtype) and g.shape == np.shape(w)
        np.testing.assert_allclose(g, np.asarray(w), rtol=tol, atol=tol)


def test_optimizer_bad_inputs():
    """X and its gradient of different shapes, or a non-scalar R: InvalidArgument naming the node; the session
    still runs."""
    m = _model("Adam", 1, np.float32)
    sess = cpu_session(m)
    ok = _feeds("Adam", [(3,)], np.float32, 1)
    want = sess.run(None, ok)
    for k, v in (("G0", np.zeros(4, np.float32)), ("R", np.zeros(2, np.float32))):
        with pytest.raises(InvalidArgument, match="Adam node 'adam_0'"):
            sess.run(None, {**ok, k: v})
    for a, b in zip(sess.run(None, ok), want):
        np.testing.assert_array_equal(a, b)


def test_momentum_without_required_attributes_is_refused():
    """Momentum's attributes have no defaults: a node without them is refused when the model loads (InvalidGraph
    naming the node and the attribute, as onnxruntime's load-time check -- issue 26)."""
    m = _model("Momentum", 1, np.float32, alpha=0.9, beta=0.1, norm_coefficient=0.0)   # no mode
    with pytest.raises(onnxep.InvalidGraph, match="momentum_0.*Required attribute 'mode' is missing"):
        cpu_session(m)
