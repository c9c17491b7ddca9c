"""The NCW / NCHW / NCDHW Conv as a compiled run loop step (RL_CONV_NCHW, Conv_1.c_step; wav2vec2's 1-D feature convs).

Oracles: the session's own Python run loop (compiled runs of the same kernel give the same bits: compiled_vs_python),
and onnxruntime (tests._util.run_ort) for closeness; 2 threads against onnxruntime too.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import assert_outputs_match, make_model, run_ort
from tests.graph.test_runloop import _programs, compiled_vs_python

CASES = [
    # x shape, W shape, attrs, bias: wav2vec2's first conv (one channel, kernel 10, stride 5), a strided 3-tap
    # conv, its grouped positional conv (pads 8, 16 taps, 4 groups), a 3-D conv, odd sizes
    ((3, 1, 1100), (32, 1, 10), {"strides": [5]}, False),
    ((3, 32, 219), (32, 32, 3), {"strides": [2]}, False),
    ((3, 64, 54), (64, 16, 16), {"group": 4, "pads": [8, 8]}, True),
    ((2, 5, 37), (7, 5, 4), {"dilations": [2], "pads": [1, 2]}, True),
    ((1, 3, 5, 6, 7), (4, 3, 2, 3, 3), {"pads": [1, 0, 1, 1, 1, 0], "strides": [1, 2, 1]}, True),
]


def _model(xshape, wshape, attrs, bias, seed=0):
    rng = np.random.default_rng(seed)
    inits = {"W": (rng.standard_normal(wshape) * 0.2).astype(np.float32)}
    ins = ["x", "W"]
    if bias:
        inits["B"] = rng.standard_normal(wshape[0]).astype(np.float32)
        ins.append("B")
    nodes = [helper.make_node("Conv", ins, ["c"], **attrs),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Conv", ["r", "W2"], ["y"], kernel_shape=[1] * (len(xshape) - 2))]
    inits["W2"] = (rng.standard_normal((3, wshape[0]) + (1,) * (len(xshape) - 2)) * 0.2).astype(np.float32)
    x = rng.standard_normal(xshape).astype(np.float32)
    return make_model(nodes, {"x": x}, ["y", "c"], initializers=inits), x


@pytest.mark.parametrize("xshape, wshape, attrs, bias", CASES)
def test_conv_nchw_runs_in_c(xshape, wshape, attrs, bias):
    model, x = _model(xshape, wshape, attrs, bias)
    rng = np.random.default_rng(1)
    feeds = [{"x": x}] + [{"x": rng.standard_normal(x.shape).astype(np.float32)} for _ in range(2)]
    got, progs = compiled_vs_python(model, feeds)
    assert progs and all(p.n_py == 0 for p in progs), [(p.n_c, p.n_py) for p in progs]
    for f, g in zip(feeds, got[:len(feeds)]):
        assert_outputs_match(g, run_ort(model, f), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("xshape, wshape, attrs, bias", CASES[:3])
def test_conv_nchw_two_threads(xshape, wshape, attrs, bias):
    model, x = _model(xshape, wshape, attrs, bias, seed=2)
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 2
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    for _ in range(3):
        got = sess.run(None, {"x": x})
    assert all(p.n_py == 0 for p in _programs(sess))
    assert_outputs_match(got, run_ort(model, {"x": x}), rtol=1e-4, atol=1e-5)
