"""CausalConvWithState (opset 27) on the cpu backend, float16 / float32. Oracles: onnx.reference, and numpy (a
decode step by step equals the whole sequence at once)."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, \
    run_reference
from tests.ops._eltshape import node, rand


def _run(feeds, ins, activation="none"):
    n = node("CausalConvWithState", ins, ["y", "state"], activation=activation)
    m = make_model([n], feeds, ["y", "state"], opset=27, ir_version=10)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    return m, got


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
@pytest.mark.parametrize("k,bias,past", [(4, True, True), (3, False, True), (4, True, False), (1, False, False)])
def test_causal_conv_with_state(k, bias, past, activation, dtype):
    B, C, L = 2, 3, 5
    feeds = {"x": rand((B, C, L), 0, dtype), "w": rand((C, 1, k), 1, dtype)}
    ins = ["x", "w", "", ""]
    if bias:
        feeds["b"] = rand((C,), 2, dtype)
        ins[2] = "b"
    if past:
        feeds["p"] = rand((B, C, k - 1), 3, dtype)
        ins[3] = "p"
    while not ins[-1]:
        ins.pop()
    m, got = _run(feeds, ins, activation)
    tol = 1e-2 if dtype == np.float16 else 1e-5
    assert_outputs_match(got, run_reference(m, feeds), rtol=tol, atol=tol)


def test_causal_conv_decode_matches_prefill():
    """Oracle: numpy -- feeding the sequence one step at a time, carrying present_state, gives the whole-sequence
    output."""
    x, w, b = rand((1, 4, 6), 0), rand((4, 1, 3), 1), rand((4,), 2)
    _, (full, last) = _run({"x": x, "w": w, "b": b}, ["x", "w", "b"])
    state = np.zeros((1, 4, 2), np.float32)
    steps = []
    for t in range(6):
        _, (y, state) = _run({"x": x[:, :, t:t + 1], "w": w, "b": b, "p": state}, ["x", "w", "b", "p"])
        steps.append(y)
    np.testing.assert_allclose(np.concatenate(steps, axis=2), full, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(state, last)


def test_causal_conv_bad_state():
    """Oracle: none -- a past_state of the wrong length raises InvalidArgument naming the node."""
    feeds = {"x": rand((1, 2, 4)), "w": rand((2, 1, 3)), "p": rand((1, 2, 3))}
    m = make_model([node("CausalConvWithState", ["x", "w", "", "p"], ["y", "s"])], feeds, ["y", "s"], opset=27,
                   ir_version=10, input_shapes={"p": ["B", "C", "K"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"causalconvwithstate_0.*past_state has shape \(1, 2, 3\)"):
        sess.run(None, feeds)
