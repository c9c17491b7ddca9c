"""graph/passes/fuse_qdq_ops.py: DequantizeLinear -> Conv (DequantizeLinear weight, bias) [-> Relu] -> QuantizeLinear
folds into QLinearConv (then com.onnxep QLinearConvNhwc through the layout pass); cases it must leave alone stay.

Oracle: onnxruntime's CPU provider on the same QDQ graph -- it folds the same node groups into its QLinearConv
(selector / action transformer) and requantizes as MLAS (float32(acc + bias) * x_scale * w_scale / y_scale, round half
to even), so the quantized outputs are compared to one quantization step (onnxruntime may compute the multiplier in
another order, and where it does not fold, its float32 conv rounds differently); most elements must be equal. Also
onnxep itself without the pass (disabled_optimizers), to one step."""
import importlib

import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import make_model, run_ort


@pytest.fixture(autouse=True)
def _fold_every_conv(monkeypatch):
    """The models here are small: fold whatever the pattern matches (the size rule has its own test)."""
    mod = importlib.import_module("onnxep.graph.passes.fuse_qdq_ops")
    monkeypatch.setattr(mod, "MIN_MACS_PER_PIXEL", 0)
    monkeypatch.setattr(mod, "FOLD_DEPTHWISE", True)
    return mod


def _model(xtype, per_channel, group, relu_zp_min=True, bias=True, stride=1, seed=0):
    rng = np.random.default_rng(seed)
    c = 8 if group == 1 else 12
    m = 16 if group == 1 else c
    zp = (lambda v: np.array(v, xtype))
    lo = -128 if xtype == np.int8 else 0
    w = rng.integers(-127, 128, (m, c // group, 3, 3)).astype(np.int8)
    ws = (rng.uniform(0.002, 0.01, m) if per_channel else np.array(0.005)).astype(np.float32)
    xs, ys, ys2 = np.float32(0.03), np.float32(0.08), np.float32(0.1)
    inits = {"xs": xs, "xz": zp(lo + 7), "w": w, "ws": ws, "wz": np.zeros(ws.shape, np.int8),
             "ys": ys, "yz": zp(lo if relu_zp_min else lo + 40),
             "b": rng.integers(-3000, 3000, m).astype(np.int32), "bs": (xs * ws).astype(np.float32),
             "bz": np.zeros(ws.shape, np.int32),
             "w2": rng.integers(-127, 128, (4, m, 1, 1)).astype(np.int8), "ws2": np.float32(0.01),
             "ys2": ys2, "yz2": zp(lo + 100)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
             helper.make_node("Conv", ["xd", "wd"] + (["bd"] if bias else []), ["c1"], pads=[1, 1, 1, 1],
                              strides=[stride, stride], group=group),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("QuantizeLinear", ["r1", "ys", "yz"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "ys", "yz"], ["d1"]),
             helper.make_node("DequantizeLinear", ["w2", "ws2"], ["w2d"]),
             helper.make_node("Conv", ["d1", "w2d"], ["c2"]),
             helper.make_node("QuantizeLinear", ["c2", "ys2", "yz2"], ["y"])]
    feeds = {"x": rng.uniform(-3, 3, (2, c, 11, 9)).astype(np.float32)}
    return make_model(nodes, feeds, ["y"], opset=13, initializers=inits), feeds


def _session(model, threads=0, **kw):
    """(also the MatMul / Add fold tests') an onnxep session of model, intra_op_num_threads=threads."""
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = threads
    return onnxep.InferenceSession(model.SerializeToString(), so, **kw)


def _ops(sess):
    return [st[6] for p in sess.plans for st in getattr(p, "steps", ())]


def _close(got, want, max_diff=1, min_equal=0.9):
    """Quantized outputs at most max_diff steps apart, at least min_equal of them equal."""
    assert got.dtype == want.dtype and got.shape == want.shape
    d = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert d.max() <= max_diff and (d == 0).mean() >= min_equal, (d.max(), (d == 0).mean())


def _compiled_matches(model, feeds):
    """(also the MatMul / Add fold tests') feeds and two random variants of them through the compiled run loop and the
    Python loop (bit-identical: test_runloop.compiled_vs_python), every step a C step, each output close to
    onnxruntime's."""
    from tests.graph.test_runloop import compiled_vs_python
    rng = np.random.default_rng(1)
    feeds_list = [feeds] + [{k: rng.uniform(-3, 3, v.shape).astype(np.float32) for k, v in feeds.items()}
                            for _ in range(2)]
    got, progs = compiled_vs_python(model, feeds_list)
    assert progs and max(p.n_py for p in progs) == 0, [(p.n_c, p.n_py) for p in progs]
    for f, g in zip(feeds_list, got):
        _close(g[0], run_ort(model, f)[0])


@pytest.mark.parametrize("xtype", [np.int8, np.uint8])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("group", [1, "dw"])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv_folds_and_matches_ort(xtype, per_channel, group, stride):
    model, feeds = _model(xtype, per_channel, 12 if group == "dw" else 1, stride=stride)
    sess = _session(model)
    ops = _ops(sess)
    # the depthwise conv reads the input quantized in NCHW: it stays QLinearConv (no channel-last region starts at
    # a depthwise conv); the 1x1 after it is dense
    assert ops.count("QLinearConvNhwc") + ops.count("QLinearConv") == 2, ops
    assert "Conv" not in ops and "NhwcConv" not in ops and "Relu" not in ops, ops
    got = sess.run(None, feeds)[0]
    _close(got, run_ort(model, feeds)[0])
    _close(got, _session(model, disabled_optimizers=["fuse_qdq_ops"]).run(None, feeds)[0])


def test_no_bias():
    model, feeds = _model(np.int8, True, 1, bias=False)
    sess = _session(model)
    assert _ops(sess).count("QLinearConvNhwc") == 2
    _close(sess.run(None, feeds)[0], run_ort(model, feeds)[0])


@pytest.mark.parametrize("xtype", [np.int8, np.uint8])
def test_relu_that_clamps_stays(xtype):
    """A Relu whose quantized bound (the zero point) is inside the output range is not folded: that conv stays
    float32 (the second one still folds)."""
    model, feeds = _model(xtype, True, 1, relu_zp_min=False)
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("QLinearConvNhwc") + ops.count("QLinearConv") == 1, ops
    assert ops.count("NhwcConv") == 1 and ops.count("QuantizeLinear") == 1, ops      # (the Relu fused into it)
    _close(sess.run(None, feeds)[0], run_ort(model, feeds)[0])


def test_disabled_by_name():
    model, feeds = _model(np.int8, True, 1)
    ops = _ops(_session(model, disabled_optimizers=["fuse_qdq_ops"]))
    assert "QLinearConvNhwc" not in ops and "QLinearConv" not in ops, ops


def _dense_then_depthwise(seed=3):
    """x -> Q -> DQ -> 1x1 Conv (8 -> 12) -> Q -> DQ -> 3x3 depthwise Conv -> Q: both fold, both channel-last."""
    rng = np.random.default_rng(seed)
    inits = {"xs": np.float32(0.03), "xz": np.array(-5, np.int8), "w1": rng.integers(-127, 128, (12, 8, 1, 1)).astype(
        np.int8), "ws1": rng.uniform(0.002, 0.01, 12).astype(np.float32), "ys1": np.float32(0.05),
        "yz1": np.array(3, np.int8), "w2": rng.integers(-127, 128, (12, 1, 3, 3)).astype(np.int8),
        "ws2": rng.uniform(0.002, 0.01, 12).astype(np.float32), "ys2": np.float32(0.02), "yz2": np.array(-9, np.int8)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w1", "ws1"], ["w1d"], axis=0),
             helper.make_node("Conv", ["xd", "w1d"], ["c1"]),
             helper.make_node("QuantizeLinear", ["c1", "ys1", "yz1"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "ys1", "yz1"], ["d1"]),
             helper.make_node("DequantizeLinear", ["w2", "ws2"], ["w2d"], axis=0),
             helper.make_node("Conv", ["d1", "w2d"], ["c2"], group=12, pads=[1, 1, 1, 1], strides=[2, 1]),
             helper.make_node("QuantizeLinear", ["c2", "ys2", "yz2"], ["y"])]
    feeds = {"x": rng.uniform(-3, 3, (2, 8, 11, 9)).astype(np.float32)}
    return make_model(nodes, feeds, ["y"], opset=13, initializers=inits), feeds


@pytest.mark.parametrize("which", ["dense", "depthwise"])
def test_compiled_run_loop(which):
    """The folded convs run as C steps (RL_QCONV) of the compiled run loop, bit-identical to the Python loop."""
    model, feeds = _model(np.int8, True, 1) if which == "dense" else _dense_then_depthwise()
    assert _ops(_session(model)).count("QLinearConvNhwc") == 2
    _compiled_matches(model, feeds)


def test_size_rule(_fold_every_conv, monkeypatch):
    """By default a dense conv folds from MIN_MACS_PER_PIXEL products per output pixel, a depthwise one not at all."""
    monkeypatch.setattr(_fold_every_conv, "MIN_MACS_PER_PIXEL", 8 * 9 * 16)          # the first conv's exactly
    monkeypatch.setattr(_fold_every_conv, "FOLD_DEPTHWISE", False)
    model, feeds = _model(np.int8, True, 1)
    ops = _ops(_session(model))
    assert ops.count("QLinearConvNhwc") == 1 and ops.count("NhwcConv") == 1, ops    # the 1x1 16 -> 4 (64) stays
    _close(_session(model).run(None, feeds)[0], run_ort(model, feeds)[0])
    model, feeds = _dense_then_depthwise()
    monkeypatch.setattr(_fold_every_conv, "MIN_MACS_PER_PIXEL", 0)
    ops = _ops(_session(model))
    assert ops.count("QLinearConvNhwc") == 1 and ops.count("NhwcConv") == 1, ops    # the depthwise one stays float
