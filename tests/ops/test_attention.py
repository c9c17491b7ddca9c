"""Attention (opsets 23, 24, 25) on the cpu backend: 3-D and 4-D inputs, grouped-query heads, bool / float / short
masks, is_causal with and without a past cache, softcap, scale, the qk_matmul_output modes, nonpad_kv_seqlen (24),
sliding windows (25); float16 / float32 / float64. Oracles: onnx.reference, and numpy (plain softmax attention)."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, \
    run_reference
from tests.ops._eltshape import node, rand

B, HQ, HK, SQ, SK, D = 2, 4, 2, 3, 5, 8


def _run(feeds, ins, outs, opset=23, tol=1e-5, **attrs):
    ins = list(ins)
    while not ins[-1]:
        ins.pop()
    m = make_model([node("Attention", ins, outs, **attrs)], feeds, outs, opset=opset, ir_version=10)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, run_reference(m, feeds), rtol=tol, atol=tol)
    return got


def _qkv(dtype, three_d=False, hq=HQ, hk=HK, sk=SK):
    if three_d:
        return {"q": rand((B, SQ, hq * D), 0, dtype), "k": rand((B, sk, hk * D), 1, dtype),
                "v": rand((B, sk, hk * D), 2, dtype)}
    return {"q": rand((B, hq, SQ, D), 0, dtype), "k": rand((B, hk, sk, D), 1, dtype),
            "v": rand((B, hk, sk, D), 2, dtype)}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("heads", [(HQ, HQ), (HQ, HK)])
def test_attention_basic(heads, causal, three_d, dtype):
    feeds = _qkv(dtype, three_d, *heads)
    attrs = {"is_causal": causal}
    if three_d:
        attrs.update(q_num_heads=heads[0], kv_num_heads=heads[1])
    _run(feeds, ["q", "k", "v"], ["y"], tol=1e-2 if dtype == np.float16 else 1e-5, **attrs)


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("mask", ["bool", "float", "short_bool", "2d", "rank1"])
def test_attention_masks(mask, causal):
    feeds = _qkv(np.float32)
    rng = np.random.default_rng(5)
    if mask == "bool":
        feeds["m"] = rng.random((B, 1, SQ, SK)) > 0.3
    elif mask == "float":
        feeds["m"] = rand((B, HQ, SQ, SK), 6)
    elif mask == "short_bool":
        feeds["m"] = rng.random((1, 1, SQ, SK - 2)) > 0.2
    elif mask == "2d":
        feeds["m"] = rand((SQ, SK), 7)
    else:
        if causal:
            pytest.skip("onnx.reference fails on a rank-1 mask with is_causal")
        feeds["m"] = rng.random((SK,)) > 0.3
    _run(feeds, ["q", "k", "v", "m"], ["y"], is_causal=causal)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_past_and_outputs(causal, mode):
    feeds = _qkv(np.float32)
    feeds["pk"], feeds["pv"] = rand((B, HK, 4, D), 8), rand((B, HK, 4, D), 9)
    feeds["m"] = rand((B, 1, SQ, SK + 4), 10)
    _run(feeds, ["q", "k", "v", "m", "pk", "pv"], ["y", "present_k", "present_v", "qk"], is_causal=causal,
         qk_matmul_output_mode=mode, scale=0.3, softcap=0.0 if mode == 0 else 2.0)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_nonpad_kv_seqlen(causal):
    feeds = _qkv(np.float32)
    feeds["n"] = np.array([3, 5], np.int64)
    _run(feeds, ["q", "k", "v", "", "", "", "n"], ["y"], opset=24, is_causal=causal)


@pytest.mark.parametrize("window", [(1, -1), (-1, 0), (2, 1)])
@pytest.mark.parametrize("causal", [0, 1])
def test_attention_sliding_window(window, causal):
    feeds = _qkv(np.float32)
    _run(feeds, ["q", "k", "v"], ["y"], opset=25, is_causal=causal, left_window_size=window[0],
         right_window_size=window[1])


def test_attention_matches_numpy():
    """Oracle: numpy -- softmax(Q K^T / sqrt(D)) V per head (no mask, equal heads)."""
    feeds = _qkv(np.float64, hq=HQ, hk=HQ)
    got = _run(feeds, ["q", "k", "v"], ["y"])[0]
    s = feeds["q"] @ feeds["k"].transpose(0, 1, 3, 2) / np.sqrt(D)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(got, (p / p.sum(-1, keepdims=True)) @ feeds["v"], rtol=1e-10)


def test_attention_bad_heads():
    """Oracle: none -- query heads not a multiple of the key heads raise InvalidArgument naming the node."""
    feeds = _qkv(np.float32, hq=3, hk=2)
    m = make_model([node("Attention", ["q", "k", "v"], ["y"])], feeds, ["y"], opset=23, ir_version=10,
                   input_shapes={"q": ["B", "H", "S", "D"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="attention_0.*multiple of the key"):
        sess.run(None, feeds)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_bfloat16(causal):
    """Oracle: onnx.reference (bfloat16 through ml_dtypes), every step rounded to bfloat16 as the spec's graph."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    from onnx import TensorProto, helper
    feeds = {k: v.astype(ml_dtypes.bfloat16) for k, v in _qkv(np.float32).items()}
    ins = [helper.make_tensor_value_info(k, TensorProto.BFLOAT16, v.shape) for k, v in feeds.items()]
    g = helper.make_graph([node("Attention", ["q", "k", "v"], ["y"], is_causal=causal)], "t", ins,
                          [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    want = run_reference(m, feeds)[0]
    assert got[0].dtype == want.dtype and got[0].shape == want.shape
    np.testing.assert_allclose(got[0].astype(np.float32), want.astype(np.float32), rtol=2e-2, atol=2e-2)
