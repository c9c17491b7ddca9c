"""graph/passes/fuse_qdq_ops.py, Add: DequantizeLinear(a), DequantizeLinear(b) -> Add -> QuantizeLinear folds into
com.onnxep QLinearAdd (ops/onnxep/q_linear_add.py); cases onnxruntime's selector leaves alone (mixed 8-bit types) and
4-D Adds (channel-last regions) stay.

Oracles: onnxep without the pass (disabled_optimizers) -- QLinearAdd computes the unfolded nodes' float32 operations
in order, so bit-identical; onnxruntime on the same QDQ graph to one quantization step (its QLinearAdd forms
(a - za) * (sa / ys) + (b - zb) * (sb / ys), which rounds differently at some .5 boundaries), most elements equal; the
compiled run loop against the Python loop, bit for bit."""
import importlib

import numpy as np
import pytest
from onnx import helper

from tests._util import make_model, run_ort
from tests.graph.test_fuse_qdq_ops import _close, _compiled_matches, _ops, _session


@pytest.fixture(autouse=True)
def _fold_adds(monkeypatch):
    """The Add fold is off by default (measured no faster on the zoo's QDQ encoders): on for these tests."""
    monkeypatch.setattr(importlib.import_module("onnxep.graph.passes.fuse_qdq_ops"), "FOLD_ADD", True)


def _model(t, bias, shape=(3, 11, 40), seed=0, ytype=None):
    rng = np.random.default_rng(seed)
    lo = -128 if t == np.int8 else 0
    yt = t if ytype is None else ytype
    ylo = -128 if yt == np.int8 else 0
    inits = {"s1": np.float32(0.03), "z1": np.array(lo + 100, t), "s2": np.float32(0.05), "z2": np.array(lo + 90, t),
             "ys": np.float32(0.07), "yz": np.array(ylo + 120, yt)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s1", "z1"], ["xd"])]
    feeds = {"x": rng.uniform(-3, 3, shape).astype(np.float32)}
    if bias:
        inits["bq"] = rng.integers(lo, lo + 256, shape[-1:]).astype(t)
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "s2", "z2"], ["bd"]))
    else:
        feeds["r"] = rng.uniform(-3, 3, shape).astype(np.float32)
        nodes += [helper.make_node("QuantizeLinear", ["r", "s2", "z2"], ["rq"]),
                  helper.make_node("DequantizeLinear", ["rq", "s2", "z2"], ["bd"])]
    nodes += [helper.make_node("Add", ["bd", "xd"] if bias else ["xd", "bd"], ["s"]),
              helper.make_node("QuantizeLinear", ["s", "ys", "yz"], ["y"])]
    return make_model(nodes, feeds, ["y"], opset=13, initializers=inits), feeds


@pytest.mark.parametrize("t", [np.int8, np.uint8])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(3, 11, 40), (5, 1000), (7,)])
def test_add_folds(t, bias, shape):
    model, feeds = _model(t, bias, shape)
    sess = _session(model, threads=2)
    ops = _ops(sess)
    assert ops.count("QLinearAdd") == 1 and "Add" not in ops, ops
    got = sess.run(None, feeds)[0]
    unfolded = _session(model, threads=2, disabled_optimizers=["fuse_qdq_ops"])
    np.testing.assert_array_equal(got, unfolded.run(None, feeds)[0])
    _close(got, run_ort(model, feeds)[0])


def test_mixed_types_stay():
    model, feeds = _model(np.uint8, False, ytype=np.int8)
    assert "QLinearAdd" not in _ops(_session(model, threads=2))


def test_4d_stays():
    model, feeds = _model(np.uint8, False, shape=(1, 4, 5, 6))
    ops = _ops(_session(model, threads=2))
    assert "QLinearAdd" not in ops, ops


@pytest.mark.parametrize("bias", [False, True])
def test_compiled_run_loop(bias):
    _compiled_matches(*_model(np.int8, bias))
