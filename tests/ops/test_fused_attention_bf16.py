"""FusedAttention in bf16 sessions (onnxep.compute_precision=bf16, ops/_bf16.py bf16_attention): oracle, the fp32
session of the same model (cosine >= 0.999, and a per-element bound of a few bf16 roundings of the output's scale);
forced off it is bit-identical to fp32, forced on it is not (the bf16 kernel ran), in the Python loop and the
compiled run loop alike. Skipped where the CPU lacks AVX512_BF16 (bf16 sessions run fp32 attention there)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep import _kernels
from onnxep.ops import _bf16
from tests.graph.test_exporter_attention import _sdpa_nodes

needs_bf16 = pytest.mark.skipif(not _kernels.bgemm_hw(), reason="needs AVX512_BF16 (vdpbf16ps)")


def _model(B, H, S, D, q_rows=None):
    nodes = _sdpa_nodes("q", "k", "v", "y", scale_split=False, nan_guard=False, masks=[("add", "am", None)])
    M = S if q_rows is None else q_rows
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [B, H, M if n == "q" else S, D]) for n in "qkv"]
    ins.append(helper.make_tensor_value_info("am", TensorProto.FLOAT, [B, 1, 1, S]))
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [B, M, H, D])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _run(model, feeds, precision, runs=3):
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 2
    so.add_session_config_entry("onnxep.compute_precision", precision)
    sess = onnxep.InferenceSession(model, so)
    outs = [sess.run(None, feeds)[0] for _ in range(runs)]   # the later runs take the compiled run loop
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    return outs[0]


@pytest.fixture
def force():
    yield _bf16.force_bf16_attention
    _bf16.force_bf16_attention(None)


@needs_bf16
@pytest.mark.parametrize("B,H,S,D", [(1, 4, 40, 64), (2, 3, 77, 32)])
def test_bf16_attention_close_to_fp32(force, B, H, S, D):
    rng = np.random.default_rng(S)
    feeds = {n: rng.standard_normal((B, H, S, D)).astype(np.float32) for n in "qkv"}
    feeds["am"] = np.where(rng.uniform(size=(B, 1, 1, S)) < 0.2, -1e4, 0).astype(np.float32)
    model = _model(B, H, S, D)
    y32 = _run(model, feeds, "fp32")
    force(False)
    np.testing.assert_array_equal(_run(model, feeds, "bf16"), y32)
    force(True)
    y16 = _run(model, feeds, "bf16")
    assert not np.array_equal(y16, y32)
    a, b = y32.ravel().astype(np.float64), y16.ravel().astype(np.float64)
    assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= 0.999
    # scores of |q . k| / sqrt(D) ~ 1 with 2**-7 relative error, probabilities and V rounded: a few 2**-8 of max |v|
    assert np.max(np.abs(y16 - y32)) <= 8 * 2 ** -8 * np.max(np.abs(feeds["v"]))


@needs_bf16
def test_rule_keeps_short_heads_fp32(force):
    """Below ATTN_MIN_KEYS keys the rule keeps the fp32 kernel (bit-identical to the fp32 session)."""
    S = _bf16.ATTN_MIN_KEYS - 1
    rng = np.random.default_rng(1)
    feeds = {n: rng.standard_normal((1, 2, S, 16)).astype(np.float32) for n in "qkv"}
    feeds["am"] = np.zeros((1, 1, 1, S), np.float32)
    model = _model(1, 2, S, 16)
    force(None)
    np.testing.assert_array_equal(_run(model, feeds, "bf16"), _run(model, feeds, "fp32"))


def test_rule_needs_vdpbf16ps(force, monkeypatch):
    """Without AVX512_BF16 the attention stays fp32 even when forced on (as the bf16 GEMM does); with it, the rule
    takes bf16 from ATTN_MIN_KEYS keys only where vdpbf16ps outruns the FMA (DP_CONV_MIN_RATIO)."""
    force(True)
    monkeypatch.setattr(_kernels, "bgemm_hw", lambda: False)
    assert not _bf16.bf16_attention(197, 197, 64, 64)
    monkeypatch.setattr(_kernels, "bgemm_hw", lambda: True)
    assert _bf16.bf16_attention(197, 16, 64, 64)
    force(None)
    for ratio, want in ((2.0, True), (1.0, False)):
        monkeypatch.setattr(_kernels, "bgemm_dp_ratio", lambda r=ratio: r)
        assert _bf16.bf16_attention(197, _bf16.ATTN_MIN_KEYS, 64, 64) is want
        assert not _bf16.bf16_attention(197, _bf16.ATTN_MIN_KEYS - 1, 64, 64)


def test_rule_keeps_a_decoding_step_fp32(force, monkeypatch):
    """Up to ATTN_DIRECT_ROWS query rows (a decoding step's one) the fp32 kernel reads K and V as stored: the rule
    keeps it there (the bf16 path would pack every head's K and V first), and takes bf16 from one row more."""
    force(None)
    monkeypatch.setattr(_kernels, "bgemm_hw", lambda: True)
    monkeypatch.setattr(_kernels, "bgemm_dp_ratio", lambda: 2.0)
    rows = _kernels.ATTN_DIRECT_ROWS
    assert not _bf16.bf16_attention(1, 1500, 64, 64)
    assert not _bf16.bf16_attention(rows, 1500, 64, 64)
    assert _bf16.bf16_attention(rows + 1, 1500, 64, 64)
    force(True)
    assert _bf16.bf16_attention(1, 1500, 64, 64)         # (forced: tests and A/B runs still reach the bf16 path)


@needs_bf16
def test_a_decoding_step_matches_the_fp32_session(force):
    """One query row against many keys (a decoder's step) in a bf16 session: the rule's fp32 kernel, the fp32
    session's bits (oracle: the fp32 session, itself checked against onnxruntime elsewhere)."""
    rng = np.random.default_rng(2)
    S = 300
    feeds = {"q": rng.standard_normal((1, 2, 1, 16)).astype(np.float32),
             "k": rng.standard_normal((1, 2, S, 16)).astype(np.float32),
             "v": rng.standard_normal((1, 2, S, 16)).astype(np.float32),
             "am": np.zeros((1, 1, 1, S), np.float32)}
    force(None)
    model = _model(1, 2, S, 16, q_rows=1)
    np.testing.assert_array_equal(_run(model, feeds, "bf16"), _run(model, feeds, "fp32"))
