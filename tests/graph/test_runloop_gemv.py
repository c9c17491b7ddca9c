"""FusedMatMul's one-row path as a compiled run-loop step (RL_GEMV, onnxep/_k_runloop.pxi): a batch-1 fully connected
layer with B stored (N, K) runs gemv_f32 on the weight as stored, and used to be the one Python step of such models.

Oracles: float64 numpy for the step on every ISA variant the machine runs (a Program of one step), gemv_f32 of the
same variant for the same bits; for whole models the session's own Python loop (device.COMPILED_RUNS off: the compiled
runs must give the same bits) and onnxruntime (tests._util.run_ort) for closeness."""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from onnx import helper

from onnxep import _kernels
from onnxep.ops.onnxep.fused_mat_mul import FusedMatMul_1
from tests._util import assert_outputs_match, make_model, run_ort
from tests.graph.test_runloop import check_c_step_on_off, compiled_vs_python

# the pass's module (the package exports the pass function under the same name)
fuse_matmul_bias = importlib.import_module("onnxep.graph.passes.fuse_matmul_bias")
VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
RNG = np.random.default_rng(24)
ACTS = {0: "", 1: "Relu", 2: "Gelu"}


def _gelu64(v):
    return 0.5 * v * (1.0 + np.vectorize(math.erf)(v / math.sqrt(2.0)))


def _run_step(V, a, W, trans_b, bias, act, nthreads):
    """y from a Program of one "gemv" step of variant V."""
    K = a.shape[0]
    N = W.shape[0] if trans_b else W.shape[1]
    y = np.full(N, np.nan, np.float32)
    prog = V.Program(1, 5)
    prog.set_step(0, V.RUNLOOP_FNS["gemv"], [1, 2, 3 if bias is not None else 0, 4],
                  [K, N, int(trans_b), V.ACTIVATIONS[ACTS[act]][0], 1], [], nthreads)
    for slot, v in ((1, a), (2, W), (3, bias), (4, y)):
        if v is not None:
            prog.set_ptr(slot, v)
    assert prog.run(0, 1) == -1
    return y


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("trans_b", [1, 0])
@pytest.mark.parametrize("K,N", [(37, 70), (300, 530), (1, 5)])
@pytest.mark.parametrize("act", [0, 1, 2])
def test_gemv_step_vs_numpy_every_variant(isa, trans_b, K, N, act):
    V = VARIANTS[isa]
    a = RNG.standard_normal(K).astype(np.float32)
    W = RNG.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
    for bias in (RNG.standard_normal(N).astype(np.float32), None):
        want = a.astype(np.float64) @ (W.T if trans_b else W).astype(np.float64)
        if bias is not None:
            want += bias
        want = np.maximum(want, 0.0) if act == 1 else _gelu64(want) if act == 2 else want
        for nth in (1, 2):
            got = _run_step(V, a, W, trans_b, bias, act, nth)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * math.sqrt(K))
            # the same bits as gemv_f32 of the variant with that epilogue activation: the step runs that kernel
            ref = np.empty(N, np.float32)
            V.gemv_f32(a, W, bool(trans_b), bias, ref, False, nth, ACTS[act] or None)
            np.testing.assert_array_equal(got, ref)


def _fc_model(act, bias=True):
    """x (1, 48) -> Gemm(transB=1) [-> Relu | Erf-Gelu] -> Gemm(transB=1): two batch-1 layers, B stored (N, K)."""
    x = RNG.standard_normal((1, 48)).astype(np.float32)
    inits = {"W1": (RNG.standard_normal((70, 48)) * 0.2).astype(np.float32),
             "b1": RNG.standard_normal(70).astype(np.float32),
             "W2": (RNG.standard_normal((10, 70)) * 0.2).astype(np.float32),
             "b2": RNG.standard_normal(10).astype(np.float32),
             "s2": np.float32(np.sqrt(2.0)).reshape(()), "one": np.float32(1.0).reshape(()),
             "half": np.float32(0.5).reshape(())}
    nodes = [helper.make_node("Gemm", ["x", "W1"] + (["b1"] if bias else []), ["h"], transB=1)]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["h"], ["r"]))
    elif act == "Gelu":
        nodes += [helper.make_node("Div", ["h", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["e1"]), helper.make_node("Mul", ["h", "e1"], ["he"]),
                  helper.make_node("Mul", ["he", "half"], ["r"])]
    else:
        nodes.append(helper.make_node("Identity", ["h"], ["r"]))
    nodes.append(helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], transB=1))
    return make_model(nodes, {"x": x}, ["y"], initializers=inits), x


@pytest.mark.parametrize("act", ["Relu", "Gelu", ""])
@pytest.mark.parametrize("bias", [True, False])
def test_fc_layers_run_as_gemv_steps(monkeypatch, act, bias):
    """Both layers become FusedMatMuls on the GEMV (the lone ones through LONE_GEMV, its size bar lowered) and run as
    C steps: no Python step left, the same bits as the Python loop, close to onnxruntime. With the entry taken away
    (c_step off) the same model keeps its GEMVs as Python steps (no C step left: the Python loop runs it) and gives
    the same bits."""
    monkeypatch.setattr(fuse_matmul_bias, "LONE_GEMV_BYTES", 0)
    model, x = _fc_model(act, bias)
    feeds = [{"x": x}] + [{"x": RNG.standard_normal(x.shape).astype(np.float32)} for _ in range(3)]
    check_c_step_on_off(monkeypatch, FusedMatMul_1, model, feeds, "gemv", None, rtol=1e-4, atol=1e-5)


def test_residual_gemv_stays_python(monkeypatch):
    """A one-row FusedMatMul with a residual has no C entry (gemv_f32 has no residual epilogue): a Python step, still
    the same bits as the Python loop."""
    monkeypatch.setattr(fuse_matmul_bias, "LONE_GEMV_BYTES", 0)
    x = RNG.standard_normal((1, 48)).astype(np.float32)
    inits = {"W": (RNG.standard_normal((48, 48)) * 0.2).astype(np.float32),
             "b": RNG.standard_normal(48).astype(np.float32)}
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"], transB=1), helper.make_node("Add", ["h", "x"], ["s"]),
             helper.make_node("Mul", ["s", "s"], ["y"])]                    # (a C step: a program is made)
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    feeds = [{"x": x}] + [{"x": RNG.standard_normal(x.shape).astype(np.float32)} for _ in range(2)]
    got, progs = compiled_vs_python(model, feeds)
    assert progs and all(p.n_py == 1 for p in progs), [(p.n_c, p.n_py) for p in progs]
    for f, g in zip(feeds, got):
        assert_outputs_match(g, run_ort(model, f), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("M,N,K", [(3, 2, 40), (17, 8, 300)])
@pytest.mark.parametrize("act", [0, 1, 2])
def test_gemv_step_rows_every_variant(isa, M, N, K, act):
    """The step over M rows (n4; the tiny-N GEMM of ops/_gemv.py): float64 numpy, and the variant's gemv_rows_f32
    with the same epilogue activation for the same bits."""
    V = VARIANTS[isa]
    A = RNG.standard_normal((M, K)).astype(np.float32)
    W = RNG.standard_normal((N, K)).astype(np.float32)
    bias = RNG.standard_normal(N).astype(np.float32)
    want = A.astype(np.float64) @ W.T.astype(np.float64) + bias
    want = np.maximum(want, 0.0) if act == 1 else _gelu64(want) if act == 2 else want
    for nth in (1, 2):
        Y = np.full((M, N), np.nan, np.float32)
        prog = V.Program(1, 5)
        prog.set_step(0, V.RUNLOOP_FNS["gemv"], [1, 2, 3, 4], [K, N, 1, V.ACTIVATIONS[ACTS[act]][0], M], [], nth)
        for slot, v in ((1, A), (2, W), (3, bias), (4, Y)):
            prog.set_ptr(slot, v)
        assert prog.run(0, 1) == -1
        np.testing.assert_allclose(Y, want, rtol=1e-4, atol=1e-4 * math.sqrt(K))
        ref = np.empty((M, N), np.float32)
        V.gemv_rows_f32(A, W, bias, ref, False, nth, ACTS[act] or None)
        np.testing.assert_array_equal(Y, ref)
