"""The pointwise-then-depthwise kernel (_k_pwdw.pxi pw_dw_nhwc_f32, com.onnxep NhwcPwDw) and its pass
(graph/passes/fuse_pw_dw.py).

Oracles: the two kernels it fuses run one after the other (ConvNhwc / BConvNhwc, then conv_depthwise_nhwc_f32) --
the same bits are expected, since each pointwise output depends only on its pixel and each depthwise output row on
the same input rows --, numpy in float64 for the fp32 path, onnxruntime for the whole models."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from onnxep import _kernels
from tests.kernels.test_conv import VARIANTS

ACTS = [("",), ("Relu",), ("Clip", 0.0, 6.0), ("HardSwish",)]


def _pack(m, w1, w2, xshape, bf16, act1):
    N, H, W, Cin = xshape
    Cm = w1.shape[0]
    if bf16:
        wp1 = np.empty(m.bconv_pack_weight_size(Cm, Cin, 1, 1), np.float32)
        m.bconv_pack_weight(w1, 1, wp1)
        pw = m.BConvNhwc(xshape, wp1, Cm, (1, 1), (1, 1), (1, 1), (0, 0), (H, W), act1, 1)
    else:
        wp1 = np.empty(m.conv_nhwc_pack_weight_size(Cm, Cin, 1), np.float32)
        m.conv_nhwc_pack_weight(w1, 1, wp1)
        pw = m.ConvNhwc(xshape, wp1, Cm, 1, (1, 1), (1, 1), (1, 1), (0, 0), (H, W), False, act1, "auto")
    kh, kw = w2.shape[2:]
    wp2 = np.empty(m.dw_pack_weight_nhwc_size(Cm, kh, kw), np.float32)
    m.dw_pack_weight_nhwc(w2.reshape(-1), Cm, kh, kw, wp2)
    return pw, wp1, wp2


def _ref(x, w1, b1, act1, w2, b2, act2, s, p):
    """float64: act2(depthwise(act1(x @ w1 + b1)) + b2), NHWC."""
    def act(v, a):
        if a[0] == "Relu":
            return np.maximum(v, 0)
        if a[0] == "Clip":
            return np.clip(v, a[1], a[2])
        if a[0] == "HardSwish":
            return v * np.clip(v / 6 + 0.5, 0, 1)
        return v
    e = act(np.einsum("nhwc,oc->nhwo", x.astype(np.float64), w1[:, :, 0, 0].astype(np.float64)) + b1, a=act1)
    N, H, W, C = e.shape
    kh, kw = w2.shape[2:]
    Ho, Wo = (H + 2 * p - kh) // s + 1, (W + 2 * p - kw) // s + 1
    ep = np.zeros((N, H + 2 * p, W + 2 * p, C))
    ep[:, p:p + H, p:p + W] = e
    y = np.zeros((N, Ho, Wo, C)) + b2
    for b in range(kh):
        for d in range(kw):
            y += ep[:, b:b + s * (Ho - 1) + 1:s, d:d + s * (Wo - 1) + 1:s] * w2[:, 0, b, d].astype(np.float64)
    return act(y, act2)


CASES = [   # N, H, W, Cin, Cm, k, stride, pad
    (1, 40, 40, 16, 96, 3, 2, 1),
    (1, 37, 29, 24, 144, 3, 1, 1),
    (2, 21, 23, 8, 40, 5, 2, 2),
    (1, 9, 9, 32, 64, 3, 1, 1),
    (3, 6, 7, 4, 20, 3, 2, 0),
]


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("nthreads", [1, 2, 3])
def test_pw_dw_matches_two_kernels(isa, case, bf16, nthreads):
    """Oracle: the two kernels one after the other (same bits), and numpy float64 for the fp32 path."""
    m = VARIANTS[isa]
    if bf16 and not m.bgemm_have("generic"):
        pytest.skip("no bf16 GEMM in this variant")
    N, H, W, Cin, Cm, k, s, p = case
    rng = np.random.default_rng(hash(case) % 2**32)
    x = rng.standard_normal((N, H, W, Cin)).astype(np.float32)
    w1 = (rng.standard_normal((Cm, Cin, 1, 1)) * 0.3).astype(np.float32)
    w2 = (rng.standard_normal((Cm, 1, k, k)) * 0.3).astype(np.float32)
    b1, b2 = rng.standard_normal(Cm).astype(np.float32), rng.standard_normal(Cm).astype(np.float32)
    for act1, act2 in ((ACTS[2], ACTS[2]), (ACTS[0], ACTS[1]), (ACTS[3], ACTS[3])):
        pw, wp1, wp2 = _pack(m, w1, w2, (N, H, W, Cin), bf16, act1)
        Ho, Wo = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
        geo = ((k, k), (s, s), (1, 1), (p, p), (Ho, Wo))
        di, df = m.dw_nhwc_step_args((N, H, W, Cm), Cm, *geo, act2)
        ints, floats = m.pw_dw_nhwc_step_args(pw, Cin, di, df)
        for band in (1, 2, ints[-1]):       # one output row a band, two, and the L2 rule's
            ints[-1] = band
            y = np.full(N * Ho * Wo * Cm, np.nan, np.float32)
            m.pw_dw_nhwc_f32(ints, floats, x.reshape(-1), wp1, b1, wp2, b2, y, nthreads)
            e = np.empty(N * H * W * Cm, np.float32)
            pw.run(x.reshape(-1), b1, None, e, nthreads)
            y2 = np.empty_like(y)
            m.conv_depthwise_nhwc_f32(e, (N, H, W, Cm), wp2, Cm, *geo, b2, y2, False, nthreads, act2)
            assert np.array_equal(y, y2), (act1, act2, band)
        if not bf16:
            ref = _ref(x, w1, b1, act1, w2, b2, act2, s, p)
            np.testing.assert_allclose(y.reshape(ref.shape), ref, rtol=1e-4, atol=1e-4)


def test_pw_dw_checks_sizes():
    """A wrong x, y or bias length is a ValueError naming it, before anything runs."""
    m = _kernels
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 8, 4)).astype(np.float32)
    w1 = rng.standard_normal((16, 4, 1, 1)).astype(np.float32)
    w2 = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    pw, wp1, wp2 = _pack(m, w1, w2, (1, 8, 8, 4), False, ("",))
    di, df = m.dw_nhwc_step_args((1, 8, 8, 16), 16, (3, 3), (1, 1), (1, 1), (1, 1), (8, 8), None)
    ints, floats = m.pw_dw_nhwc_step_args(pw, 4, di, df)
    y = np.empty(8 * 8 * 16, np.float32)
    with pytest.raises(ValueError, match="x has"):
        m.pw_dw_nhwc_f32(ints, floats, x.reshape(-1)[:-1], wp1, None, wp2, None, y)
    with pytest.raises(ValueError, match="y has"):
        m.pw_dw_nhwc_f32(ints, floats, x.reshape(-1), wp1, None, wp2, None, y[:-1])
    with pytest.raises(ValueError, match="bias"):
        m.pw_dw_nhwc_f32(ints, floats, x.reshape(-1), wp1, np.zeros(3, np.float32), wp2, None, y)


def _block_model(H, cin, cm, stride, readers=1):
    """NCHW: Conv 1x1 -> Clip -> depthwise Conv 3x3 -> Clip (MobileNetV2's expansion and depthwise), and with
    readers=2 the expansion also read by a second output."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array((rng.standard_normal((cm, cin, 1, 1)) * 0.3).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(cm).astype(np.float32) * 0.1, "b1"),
             numpy_helper.from_array((rng.standard_normal((cm, 1, 3, 3)) * 0.3).astype(np.float32), "w2"),
             numpy_helper.from_array(rng.standard_normal(cm).astype(np.float32) * 0.1, "b2"),
             numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["e"], kernel_shape=[1, 1]),
             helper.make_node("Clip", ["e", "lo", "hi"], ["ec"]),
             helper.make_node("Conv", ["ec", "w2", "b2"], ["d"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              strides=[stride, stride], group=cm),
             helper.make_node("Clip", ["d", "lo", "hi"], ["y"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if readers == 2:
        nodes.append(helper.make_node("ReduceMax", ["ec"], ["m"], keepdims=0))
        outs.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         ["batch", cin, H, H])], outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def _fused_ops(model, tmp_path, precision):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.compute_precision", precision)
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    s = onnxep.InferenceSession(model, so)
    return s, [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
@pytest.mark.parametrize("stride", [1, 2])
def test_pass_fuses_large_expansion(tmp_path, precision, stride):
    """The pass fires where the pointwise output (here 112x112x96, 4.8 MB) is larger than the L2; the session's
    output is the unfused session's, bit for bit (in bf16 both pointwise convs take the bf16 GEMM: 16 input channels,
    nhwc_conv.BF16_POINTWISE_MIN_K), and onnxruntime's within float32 (bf16) rounding."""
    ort = pytest.importorskip("onnxruntime")
    model = _block_model(112, 16, 96, stride)
    s, ops = _fused_ops(model, tmp_path, precision)
    assert "NhwcPwDw" in ops and ops.count("NhwcConv") == 0, ops
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.compute_precision", precision)
    plain = onnxep.InferenceSession(model, so, disabled_optimizers=["fuse_pw_dw"])
    x = np.random.default_rng(2).standard_normal((2, 16, 112, 112)).astype(np.float32)
    y = s.run(None, {"x": x})[0]
    assert np.array_equal(y, plain.run(None, {"x": x})[0])
    assert np.array_equal(y, s.run(None, {"x": x})[0])        # the compiled run loop's step: the same again
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4 if precision == "fp32" else 3e-2)


def test_pass_leaves_small_or_shared_expansion(tmp_path):
    """Not taken: a pointwise output that fits the L2 (28x28x96, 301 KB), or one read by a second node."""
    _, ops = _fused_ops(_block_model(28, 16, 96, 1), tmp_path, "fp32")
    assert "NhwcPwDw" not in ops and ops.count("NhwcConv") == 2
    _, ops = _fused_ops(_block_model(112, 16, 96, 1, readers=2), tmp_path, "fp32")
    assert "NhwcPwDw" not in ops and ops.count("NhwcConv") == 2


@pytest.mark.parametrize("model", ["resnet50", "pw_dw"])
def test_bf16_without_prepacking(model):
    """session.disable_prepacking with onnxep.compute_precision=bf16: each conv packs its weight per run with the
    rules the pre-packed path uses (it packed bf16 and planned fp32 before: a packed-size error). Oracle: the
    pre-packed bf16 session, the same bits."""
    from onnxep._bench import random_feeds
    from onnxep._light import light_model
    src = light_model(model).SerializeToString() if model == "resnet50" else _block_model(112, 16, 96, 2)
    outs, feeds = [], None
    for disable in ("0", "1"):
        so = onnxep.SessionOptions()
        so.add_session_config_entry("onnxep.compute_precision", "bf16")
        so.add_session_config_entry("session.disable_prepacking", disable)
        s = onnxep.InferenceSession(src, so)
        feeds = random_feeds(s) if feeds is None else feeds
        outs.append(s.run(None, feeds)[0])
    assert np.array_equal(outs[0], outs[1])


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_epcontext_round_trip(tmp_path, precision):
    """An EPContext export of a session with an NhwcPwDw node saves both packed weights (inputs 1 and 3, each in its
    sub-kernel's format); the loaded session gives the same bits (oracle: the session that exported it)."""
    model = _block_model(112, 16, 96, 2)
    out = tmp_path / "ctx.onnx"
    cfg = {"onnxep.compute_precision": precision}
    sessions = []
    for extra in ({"ep.context_enable": "1", "ep.context_file_path": str(out)}, {}):
        so = onnxep.SessionOptions()
        for k, v in dict(cfg, **extra).items():
            so.add_session_config_entry(k, v)
        sessions.append(onnxep.InferenceSession(model if extra else str(out), so))
    x = np.random.default_rng(3).standard_normal((1, 16, 112, 112)).astype(np.float32)
    assert np.array_equal(sessions[1].run(None, {"x": x})[0], sessions[0].run(None, {"x": x})[0])
