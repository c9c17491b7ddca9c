"""The bf16 GEMM's compiled run-loop step (RL_BGEMM, onnxep/_k_runloop.pxi; onnxep.compute_precision=bf16).

Oracle: the same bf16 session run through the Python loop (device.COMPILED_RUNS off): the compiled runs must give the
same bits (the step calls the kernel compute calls, with the same epilogue); and the fp32 session for closeness."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep import _kernels
from onnxep.backends.cpu import device
from tests._util import make_model
from tests.graph.test_runloop import _programs

pytestmark = pytest.mark.skipif(not _kernels.bgemm_hw(), reason="bf16 runs in fp32 without AVX512_BF16")


def _model(act="Relu"):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5, 40)).astype(np.float32)
    inits = {"W1": (rng.standard_normal((40, 48)) * 0.2).astype(np.float32),
             "b1": rng.standard_normal(48).astype(np.float32),
             "W2": (rng.standard_normal((48, 40)) * 0.2).astype(np.float32),
             "W3": (rng.standard_normal((24, 40)) * 0.2).astype(np.float32),
             "b3": rng.standard_normal(24).astype(np.float32),
             "shape": np.array([15, 40], np.int64)}
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["m1"]),
             helper.make_node("Add", ["m1", "b1"], ["h1"]),
             helper.make_node(act, ["h1"], ["r1"]),                          # FusedMatMul, bias + Relu | Gelu
             helper.make_node("MatMul", ["r1", "W2"], ["m2"]),
             helper.make_node("Add", ["m2", "x"], ["res"]),                  # FusedMatMul, residual
             helper.make_node("Reshape", ["res", "shape"], ["flat"]),
             helper.make_node("Gemm", ["flat", "W3", "b3"], ["y"], transB=1)]
    return make_model(nodes, {"x": x}, ["y", "res"], initializers=inits, opset=20 if act == "Gelu" else 17), x


def _session(model, precision):
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 1
    so.add_session_config_entry("onnxep.compute_precision", precision)
    return onnxep.InferenceSession(model.SerializeToString(), so)


@pytest.mark.parametrize("act", ["Relu", "Gelu"])
def test_bgemm_steps_compiled_match_python_loop(act):
    """The ONNX Gelu (opset 20) joins the FusedMatMul: its epilogue over each stored tile (bgemm.h), in both loops."""
    model, x = _model(act)
    rng = np.random.default_rng(1)
    feeds = [{"x": x}] + [{"x": rng.standard_normal(x.shape).astype(np.float32)} for _ in range(3)]
    sess = _session(model, "bf16")
    got = [sess.run(None, f) for f in feeds + feeds]
    progs = _programs(sess)
    assert progs and all(p.n_py == 0 for p in progs), [(p.n_c, p.n_py) for p in progs]
    ops = [st[6] for p in sess.plans for st in getattr(p, "steps", ())]
    assert "FusedMatMul" in ops and act not in ops, ops
    device.COMPILED_RUNS = False
    try:
        ref = _session(model, "bf16")
        want = [ref.run(None, f) for f in feeds + feeds]
        assert not _programs(ref)
    finally:
        device.COMPILED_RUNS = True
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)
    s32 = _session(model, "fp32")
    for f, g in zip(feeds, got):
        for a, b in zip(g, s32.run(None, f)):
            assert not np.array_equal(a, b)                                  # bf16 ran
            np.testing.assert_allclose(a, b, rtol=0, atol=0.05 * float(np.max(np.abs(b))))
