"""The channel-last layout pass through per-tensor QuantizeLinear / DequantizeLinear (a QDQ model's Q / DQ pairs
between convs): the chain stays NHWC with one Transpose in and one out; per-axis Q / DQ of an activation stays NCHW.

Oracles: onnxruntime's CPU provider on the same model, and onnxep with graph_optimization_level=ORT_DISABLE_ALL (no
pass ran). onnxruntime runs the QDQ convs as integer QLinearConv (requantized in float32 from the int32 sum), onnxep
in float32 between the Q / DQ nodes: a value on a rounding tie may land one quantization step apart, so outputs are
compared to one step of the output scale, and nearly all must be equal."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import make_model, run_ort

RNG = np.random.default_rng(29)
SX, SY = np.float32(0.05), np.float32(0.04)


def _qdq(x, out, s, z, axis=None):
    kw = {} if axis is None else {"axis": axis}
    return [helper.make_node("QuantizeLinear", [x, s, z], [out + "_q"], **kw),
            helper.make_node("DequantizeLinear", [out + "_q", s, z], [out], **kw)]


def _model(per_axis_mid=False, qtype=np.uint8):
    c0, c1, c2 = 5, 12, 7
    inits = {"s_x": SX, "z_x": np.array(3 if qtype == np.uint8 else -2, qtype),
             "s_y": SY, "z_y": np.array(120 if qtype == np.uint8 else 1, qtype)}
    nodes = _qdq("x", "xd", "s_x", "z_x")
    for i, (ci, co, k) in enumerate(((c0, c1, 3), (c1, c2, 1))):
        w = RNG.integers(-127, 128, (co, ci, k, k)).astype(np.int8)
        ws = RNG.uniform(0.002, 0.01, co).astype(np.float32)
        inits.update({f"w{i}": w, f"ws{i}": ws, f"wz{i}": np.zeros(co, np.int8),
                      f"b{i}": RNG.integers(-500, 500, co).astype(np.int32), f"bs{i}": ws * SX,
                      f"bz{i}": np.zeros(co, np.int32)})
        src = "xd" if i == 0 else "r0d"
        nodes += [helper.make_node("DequantizeLinear", [f"w{i}", f"ws{i}", f"wz{i}"], [f"wd{i}"], axis=0),
                  helper.make_node("DequantizeLinear", [f"b{i}", f"bs{i}", f"bz{i}"], [f"bd{i}"], axis=0),
                  helper.make_node("Conv", [src, f"wd{i}", f"bd{i}"], [f"c{i}"], pads=[k // 2] * 4)]
        if i == 0:
            nodes += _qdq("c0", "c0d", "s_x", "z_x")
            nodes += [helper.make_node("Relu", ["c0d"], ["r0"])]
            if per_axis_mid:
                inits.update({"s_m": RNG.uniform(0.03, 0.06, c1).astype(np.float32), "z_m": np.zeros(c1, qtype)})
                nodes += _qdq("r0", "r0d", "s_m", "z_m", axis=1)
            else:
                nodes += _qdq("r0", "r0d", "s_x", "z_x")
    nodes += _qdq("c1", "y", "s_y", "z_y")
    feeds = {"x": RNG.uniform(-3, 3, (2, c0, 9, 11)).astype(np.float32)}
    return make_model(nodes, feeds, ["y"], opset=13, initializers=inits), feeds


def _session(model, level=onnxep.GraphOptimizationLevel.ORT_ENABLE_ALL):
    so = onnxep.SessionOptions()
    so.graph_optimization_level = level
    return onnxep.InferenceSession(model.SerializeToString(), so)


def _ops(sess):
    return [st[6] for p in sess.plans for st in getattr(p, "steps", ())]


def _close(got, want, scale):
    d = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert d.max() <= scale * 1.001, d.max()
    assert (d > 0).mean() < 0.02, (d > 0).mean()


@pytest.mark.parametrize("qtype", [np.uint8, np.int8])
def test_qdq_chain_stays_channel_last(qtype):
    model, feeds = _model(qtype=qtype)
    sess = _session(model)
    ops = _ops(sess)
    convs = [i for i, op in enumerate(ops) if op == "NhwcConv"]
    assert len(convs) == 2 and ops.count("Transpose") == 2, ops
    assert "Transpose" not in ops[convs[0]:convs[1]] and ops[-1] == "Transpose", ops    # in before, out at the end
    y = sess.run(None, feeds)[0]
    _close(y, run_ort(model, feeds)[0], SY)
    _close(y, _session(model, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)[0], SY)


def test_per_axis_activation_qdq_stays_nchw():
    model, feeds = _model(per_axis_mid=True)
    sess = _session(model)
    ops = _ops(sess)
    convs = [i for i, op in enumerate(ops) if op == "NhwcConv"]
    assert len(convs) == 2 and "Transpose" in ops[convs[0]:convs[1]], ops     # the per-axis pair runs NCHW
    y = sess.run(None, feeds)[0]
    _close(y, run_ort(model, feeds)[0], SY)
    _close(y, _session(model, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)[0], SY)
