"""LinearAttention (opset 27) on the cpu backend: update rules linear / gated / delta / gated_delta, grouped query
heads, decay per head or per key dim, beta per head or shared, past_state, explicit scale; float16 / float32.
Oracles: onnx.reference, and the recurrence itself (a prefill split in two calls carrying the state equals one
call)."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, \
    run_reference
from tests.ops._eltshape import node, rand

B, T, HQ, HK, DK, DV = 2, 5, 4, 2, 3, 4


def _feeds(rule, dtype, per_dim=False, beta_shared=False, past=True, hq=HQ, hk=HK, t=T):
    f = {"q": rand((B, t, hq * DK), 0, dtype), "k": rand((B, t, hk * DK), 1, dtype) * 0.5,
         "v": rand((B, t, hk * DV), 2, dtype)}
    ins = ["q", "k", "v", "", "", ""]
    if past:
        f["s"] = rand((B, hk, DK, DV), 3, dtype)
        ins[3] = "s"
    if rule in ("gated", "gated_delta"):
        f["g"] = (-np.abs(rand((B, t, hk * DK if per_dim else hk), 4))).astype(dtype)
        ins[4] = "g"
    if rule in ("delta", "gated_delta"):
        f["b"] = (1 / (1 + np.exp(-rand((B, t, 1 if beta_shared else hk), 5)))).astype(dtype)
        ins[5] = "b"
    while not ins[-1]:
        ins.pop()
    return f, ins


def _run(feeds, ins, rule, hq=HQ, hk=HK, **attrs):
    n = node("LinearAttention", ins, ["y", "state"], update_rule=rule, q_num_heads=hq, kv_num_heads=hk, **attrs)
    m = make_model([n], feeds, ["y", "state"], opset=27, ir_version=10)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    return m, got


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("heads", [(HQ, HK), (HK, HK), (HQ, 1)])
@pytest.mark.parametrize("rule,per_dim,beta_shared", [("linear", 0, 0), ("gated", 0, 0), ("gated", 1, 0),
                                                      ("delta", 0, 0), ("gated_delta", 0, 1), ("gated_delta", 1, 0)])
def test_linear_attention(rule, per_dim, beta_shared, heads, dtype):
    feeds, ins = _feeds(rule, dtype, per_dim, beta_shared, hq=heads[0], hk=heads[1])
    m, got = _run(feeds, ins, rule, *heads)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    assert_outputs_match(got, run_reference(m, feeds), rtol=tol, atol=tol)


@pytest.mark.parametrize("rule", ["linear", "gated_delta"])
def test_linear_attention_no_past_scale(rule):
    feeds, ins = _feeds(rule, np.float32, past=False)
    m, got = _run(feeds, ins, rule, scale=0.25)
    assert_outputs_match(got, run_reference(m, feeds), rtol=1e-5, atol=1e-5)


def test_linear_attention_split_prefill():
    """Oracle: the recurrence -- two calls carrying present_state give the one-call output and state."""
    feeds, ins = _feeds("gated_delta", np.float32, past=True)
    _, (y, s) = _run(feeds, ins, "gated_delta")
    first = {k: (v[:, :2] if k != "s" else v) for k, v in feeds.items()}
    _, (y1, s1) = _run(first, ins, "gated_delta")
    second = {k: (v[:, 2:] if k != "s" else s1) for k, v in feeds.items()}
    _, (y2, s2) = _run(second, ins, "gated_delta")
    np.testing.assert_allclose(np.concatenate([y1, y2], axis=1), y, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(s2, s, rtol=1e-5, atol=1e-5)


def test_linear_attention_bad_past():
    """Oracle: none -- a past_state of the wrong shape raises InvalidArgument naming the node."""
    feeds, ins = _feeds("linear", np.float32)
    # (both outputs: the schema requires two, and the session refuses a node with one at load -- issue 26)
    n = node("LinearAttention", ins, ["y", "state"], update_rule="linear", q_num_heads=HQ, kv_num_heads=HK)
    m = make_model([n], feeds, ["y", "state"], opset=27, ir_version=10, input_shapes={"s": ["B", "H", "K", "V"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="linearattention_0.*past_state has shape"):
        sess.run(None, {**feeds, "s": feeds["s"][:, :, :2]})
