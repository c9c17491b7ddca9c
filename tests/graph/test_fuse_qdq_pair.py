"""graph/passes/fuse_qdq_pair.py: per-tensor QuantizeLinear -> DequantizeLinear pairs with the same constant scale
and zero point become com.onnxep QuantizeDequantize; pairs with other parameters, per-axis pairs and a quantized
graph output stay.

Oracles: onnxep with graph_optimization_level=ORT_DISABLE_ALL (no pass ran: bit-identical, the fused kernel does the
same float32 operations), and onnxruntime's CPU provider (to one quantization step: onnxruntime drops a Relu between
DQ and Q whose zero point already clamps, which moves nothing here, but it may requantize in its own order)."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import make_model, run_ort

RNG = np.random.default_rng(2930)


def _model(qtype):
    zp = (lambda v: np.array(v, qtype))
    inits = {"s1": np.float32(0.05), "z1": zp(3 if qtype == np.uint8 else -3),
             "s2": np.float32(0.03), "z2": zp(10 if qtype == np.uint8 else 0), "s3": np.float32(0.07),
             "sa": np.array([0.02, 0.04, 0.05, 0.01], np.float32), "za": np.zeros(4, qtype)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["q1"]),
             helper.make_node("DequantizeLinear", ["q1", "s1", "z1"], ["d1"]),            # fused
             helper.make_node("Relu", ["d1"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s2", "z2"], ["q2"]),
             helper.make_node("DequantizeLinear", ["q2", "s2", "z2"], ["d2a"]),           # fused
             helper.make_node("DequantizeLinear", ["q2", "s3", "z2"], ["d2b"]),           # other scale: stays
             helper.make_node("Add", ["d2a", "d2b"], ["a"]),
             helper.make_node("QuantizeLinear", ["a", "sa", "za"], ["qa"], axis=1),       # per axis: stays
             helper.make_node("DequantizeLinear", ["qa", "sa", "za"], ["da"], axis=1),
             helper.make_node("QuantizeLinear", ["da", "s1", "z1"], ["yq"]),              # graph output: stays
             helper.make_node("DequantizeLinear", ["yq", "s1", "z1"], ["y"])]
    feeds = {"x": RNG.uniform(-8, 8, (2, 4, 5, 7)).astype(np.float32)}
    feeds["x"].reshape(-1)[::5] = ((RNG.integers(-100, 100, 56) + 0.5) * np.float32(0.05)).astype(np.float32)
    return make_model(nodes, feeds, ["y", "yq"], opset=13, initializers=inits), feeds


def _session(model, level=onnxep.GraphOptimizationLevel.ORT_ENABLE_ALL, **kw):
    so = onnxep.SessionOptions()
    so.graph_optimization_level = level
    return onnxep.InferenceSession(model.SerializeToString(), so, **kw)


def _ops(sess):
    return [st[6] for p in sess.plans for st in getattr(p, "steps", ())]


@pytest.mark.parametrize("qtype", [np.uint8, np.int8])
def test_pairs_fuse_and_match(qtype):
    model, feeds = _model(qtype)
    sess = _session(model)
    ops = _ops(sess)
    assert ops.count("QuantizeDequantize") == 2, ops
    assert ops.count("QuantizeLinear") == 3 and ops.count("DequantizeLinear") == 3, ops
    got = sess.run(None, feeds)
    ref = _session(model, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)
    for g, r in zip(got, ref):
        assert g.dtype == r.dtype
        np.testing.assert_array_equal(g, r)
    want = run_ort(model, feeds)
    assert np.abs(got[0] - want[0]).max() <= 0.05 * 1.001
    assert np.abs(got[1].astype(np.int32) - want[1].astype(np.int32)).max() <= 1


def test_disabled_by_name():
    model, feeds = _model(np.uint8)
    ops = _ops(_session(model, disabled_optimizers=["fuse_qdq_pair"]))
    assert "QuantizeDequantize" not in ops and ops.count("QuantizeLinear") == 4 and ops.count("DequantizeLinear") == 5, ops
