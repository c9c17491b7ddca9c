"""The channel-last row kernels as a compiled run-loop step (RL_ROWS, onnxep/_k_runloop.pxi): com.onnxep ChannelAffine
(a BatchNormalization on channel-last activations, DenseNet's) and NhwcLRN (AlexNet's, ZFNet's), which ran as Python
steps.

Oracles: float64 numpy for the step on every ISA variant the machine runs (a Program of one step) and the same
variant's channel_affine_f32 / lrn_nhwc_f32 for the same bits; for models the session's own Python loop
(device.COMPILED_RUNS off: the compiled runs must give the same bits) and onnxruntime (tests._util.run_ort)."""
from __future__ import annotations

import importlib

import numpy as np
import pytest
from onnx import helper

from onnxep import _kernels
from onnxep.ops.onnxep.channel_affine import ChannelAffine_1
from onnxep.ops.onnxep.nhwc_lrn import NhwcLRN_1
from tests._util import make_model
from tests.graph.test_runloop import check_c_step_on_off

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
RNG = np.random.default_rng(5)


def _run_rows(V, x, a, b, ints, floats, nthreads):
    y = np.full(x.shape, np.nan, np.float32)
    prog = V.Program(1, 5)
    prog.set_step(0, V.RUNLOOP_FNS["rows"], [1, 2 if a is not None else 0, 3 if b is not None else 0, 4], ints,
                  floats, nthreads)
    for slot, v in ((1, x), (2, a), (3, b), (4, y)):
        if v is not None:
            prog.set_ptr(slot, v)
    assert prog.run(0, 1) == -1
    return y


def _lrn64(x, size, alpha, beta, bias):
    """ONNX LRN along the last axis, float64."""
    x = x.astype(np.float64)
    C = x.shape[-1]
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = np.zeros_like(x)
    for c in range(C):
        sq[..., c] = (x[..., max(0, c - lo):min(C, c + hi + 1)] ** 2).sum(-1)
    return x / (bias + alpha / size * sq) ** beta


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("R,C", [(7, 13), (4000, 24)])      # one thread / split rows (NORM_PAR_WORK)
@pytest.mark.parametrize("relu", [0, 1])
def test_affine_rows_vs_numpy_every_variant(isa, R, C, relu):
    V = VARIANTS[isa]
    x = RNG.standard_normal((R, C)).astype(np.float32)
    a, b = RNG.standard_normal(C).astype(np.float32), RNG.standard_normal(C).astype(np.float32)
    want = x.astype(np.float64) * a + b
    if relu:
        want = np.maximum(want, 0.0)
    for nth in (1, 2):
        got = _run_rows(V, x, a, b, [R, C, 1, relu, 0, 0, 1], [], nth)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        ref = np.empty_like(x)
        V.channel_affine_f32(x, ref, a, b, bool(relu), nth)
        np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("R,C", [(6, 11), (900, 40)])
@pytest.mark.parametrize("size,beta", [(5, 0.75), (4, 0.6), (1, 0.75)])
def test_lrn_rows_vs_numpy_every_variant(isa, R, C, size, beta):
    V = VARIANTS[isa]
    x = RNG.standard_normal((R, C)).astype(np.float32)
    alpha, bias = 1e-3, 2.0
    lo = (size - 1) // 2
    alpha_n = float(np.float32(alpha) / np.float32(size))
    for nth in (1, 2):
        got = _run_rows(V, x, None, None, [R, C, 3, 0, lo, size - 1 - lo, size], [alpha_n, beta, bias], nth)
        np.testing.assert_allclose(got, _lrn64(x, size, alpha, beta, bias), rtol=1e-5, atol=1e-6)
        ref = np.empty_like(x)
        V.lrn_nhwc_f32(x, ref, size, alpha, beta, bias, nth)
        np.testing.assert_array_equal(got, ref)


def _bn_params(c):
    return {"n_s": RNG.uniform(0.5, 1.5, c).astype(np.float32), "n_b": RNG.uniform(-0.5, 0.5, c).astype(np.float32),
            "n_m": RNG.uniform(-0.5, 0.5, c).astype(np.float32), "n_v": RNG.uniform(0.5, 1.5, c).astype(np.float32)}


def _check(model, x, monkeypatch, cls):
    """Compiled runs with the kernel's C step: no Python step, the Python loop's bits, close to onnxruntime; with its
    c_step taken away: one Python step, the same bits."""
    feeds = [{"x": x}] + [{"x": RNG.uniform(-1, 1, x.shape).astype(np.float32)} for _ in range(3)]
    check_c_step_on_off(monkeypatch, cls, model, feeds, "rows", 1, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("relu", [True, False])
def test_channel_affine_model(monkeypatch, relu):
    """A DenseNet block: Conv -> Concat -> BatchNormalization [-> Relu] -> Conv, the BatchNormalization a
    ChannelAffine on channel-last activations."""
    x = RNG.uniform(-1, 1, (2, 4, 6, 6)).astype(np.float32)
    inits = {"w0": RNG.uniform(-0.5, 0.5, (6, 4, 3, 3)).astype(np.float32),
             "w1": RNG.uniform(-0.5, 0.5, (3, 10, 1, 1)).astype(np.float32)}
    inits.update(_bn_params(10))
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["c0", "x"], ["cat"], axis=1),
             helper.make_node("BatchNormalization", ["cat", "n_s", "n_b", "n_m", "n_v"], ["bn"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["bn"], ["r"]))
    nodes.append(helper.make_node("Conv", ["r" if relu else "bn", "w1"], ["y"]))
    _check(make_model(nodes, {"x": x}, ["y"], initializers=inits), x, monkeypatch, ChannelAffine_1)


@pytest.mark.parametrize("size,beta", [(5, 0.75), (3, 0.6)])     # (onnxruntime takes odd sizes only)
def test_nhwc_lrn_model(monkeypatch, size, beta):
    """Conv -> Relu -> LRN -> MaxPool (AlexNet / ZFNet): the LRN an NhwcLRN."""
    x = RNG.uniform(-1, 1, (1, 3, 9, 9)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("LRN", ["r"], ["l"], size=size, alpha=1e-3, beta=beta, bias=2.0),
             helper.make_node("MaxPool", ["l"], ["y"], kernel_shape=[3, 3], strides=[2, 2])]
    inits = {"w": RNG.uniform(-0.5, 0.5, (12, 3, 3, 3)).astype(np.float32)}
    _check(make_model(nodes, {"x": x}, ["y"], initializers=inits), x, monkeypatch, NhwcLRN_1)
