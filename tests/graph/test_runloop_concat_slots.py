"""Concat elimination in the compiled run loop (onnxep/backends/cpu/runloop.py _concat_slots, RL_CONV_NHWC_LDY): the
convs feeding a channel Concat write their slices in place as C steps and the Concat does not run.

Oracles: onnxruntime (tests._util.run_ort) on the same model, and the session's own Python run loop (its first run
records the plan and runs in Python; the compiled runs must give the same bits).
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import assert_outputs_match, make_model, run_ort
from tests.graph.test_runloop import _programs

pytest.importorskip("onnxruntime")


def _fire_model(n, h, w, c, s, e1, e3, tail="relu", pool=False):
    """SqueezeNet's fire module twice (squeeze 1x1, expand 1x1 and 3x3, Concat on channels), then a 1x1 conv:
    the Concat's inputs are two convs written in place; `tail` "none" makes the second Concat a graph output;
    `pool` adds a third Concat input, a max pool of the squeeze (no conv: copied into the Concat's channels)."""
    rng = np.random.default_rng(n * 1000 + h * 10 + c)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    inits = {}
    nodes = []
    prev, cin = "x", c
    for k in range(2):
        for name, co, ci, ks in ((f"sq{k}", s, cin, 1), (f"e1_{k}", e1, s, 1), (f"e3_{k}", e3, s, 3)):
            inits[f"{name}_w"] = (rng.standard_normal((co, ci, ks, ks)) / np.sqrt(ci * ks * ks)).astype(np.float32)
            inits[f"{name}_b"] = rng.standard_normal(co).astype(np.float32) * 0.1
        nodes += [
            helper.make_node("Conv", [prev, f"sq{k}_w", f"sq{k}_b"], [f"sq{k}"], pads=[0, 0, 0, 0]),
            helper.make_node("Relu", [f"sq{k}"], [f"sqr{k}"]),
            helper.make_node("Conv", [f"sqr{k}", f"e1_{k}_w", f"e1_{k}_b"], [f"e1{k}"]),
            helper.make_node("Relu", [f"e1{k}"], [f"e1r{k}"]),
            helper.make_node("Conv", [f"sqr{k}", f"e3_{k}_w", f"e3_{k}_b"], [f"e3{k}"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", [f"e3{k}"], [f"e3r{k}"]),
            helper.make_node("MaxPool", [f"sqr{k}"], [f"mp{k}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            helper.make_node("Concat", [f"e1r{k}", f"e3r{k}"] + ([f"mp{k}"] if pool else []), [f"cat{k}"], axis=1),
        ]
        prev, cin = f"cat{k}", e1 + e3 + (s if pool else 0)
    outs = ["cat1"]
    if tail == "relu":
        inits["t_w"] = (rng.standard_normal((8, cin, 1, 1)) / np.sqrt(cin)).astype(np.float32)
        nodes.append(helper.make_node("Conv", ["cat1", "t_w"], ["y"]))
        outs = ["y"]
    return make_model(nodes, {"x": x}, outs, initializers=inits), {"x": x}


def _compiled(sess):
    progs = _programs(sess)
    assert progs, "no compiled program"
    return progs


@pytest.mark.parametrize("pool", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("shape", [(1, 13, 13, 16, 8, 16, 16), (2, 7, 9, 12, 6, 10, 14), (1, 28, 28, 32, 16, 64, 64)])
def test_fire_modules_match_onnxruntime(shape, threads, pool):
    n, h, w, c, s, e1, e3 = shape
    model, feeds = _fire_model(n, h, w, c, s, e1, e3, pool=pool)
    want = run_ort(model, feeds)
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = threads
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    first = sess.run(None, feeds)            # recorded: the Python loop
    assert_outputs_match(first, want, rtol=1e-4, atol=1e-4)
    for _ in range(3):                        # captured, then compiled
        got = sess.run(None, feeds)
        np.testing.assert_array_equal(got[0], first[0])
    progs = _compiled(sess)
    plan = sess.plans[0]
    ops = [s[6] for s in plan.run_list()]
    if plan.slots:       # the pass made NHWC convs writing into the Concats: no Concat nor conv left in Python
        py = [plan.run_list()[seg[1]][6] for p in progs for seg in p.segments if not seg[0]]
        assert "Concat" not in py and not any("Conv" in op for op in py), py
        assert ops.count("Concat") == 2
    # new feeds through the same program
    x2 = np.random.default_rng(7).standard_normal(feeds["x"].shape).astype(np.float32)
    assert_outputs_match(sess.run(None, {"x": x2}), run_ort(model, {"x": x2}), rtol=1e-4, atol=1e-4)


def test_concat_graph_output_stays_out_of_the_arena():
    """A Concat that is a graph output is not placed in the arena: the caller owns each run's result."""
    model, feeds = _fire_model(1, 9, 9, 8, 4, 8, 8, tail="none")
    want = run_ort(model, feeds)
    sess = onnxep.InferenceSession(model.SerializeToString())
    outs = [sess.run(None, feeds)[0] for _ in range(4)]
    for o in outs:
        assert_outputs_match([o], want, rtol=1e-4, atol=1e-4)
    assert len({o.__array_interface__["data"][0] for o in outs}) == len(outs)
