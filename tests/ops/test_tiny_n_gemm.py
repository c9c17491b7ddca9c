"""The tiny-N GEMM (ops/_gemv.py): Gemm, MatMul and FusedMatMul with a constant B of few output columns keep B as
W (N, K) fp32 and run dot products (gemv_rows_f32, the run loop's "gemv" step), in fp32 and bf16 sessions.

Oracles: float64 numpy for every path, forced on and off (force_tiny_n), fp32 and bf16 sessions (the dot form is fp32
in both, so the fp32 bound holds there too), each ISA variant the machine runs (ONNXEP_ISA in a subprocess is what the
session would pick; here the kernels' variants are covered by tests/kernels/test_gemv_rows.py); compiled runs against
the Python loop for the same bits (tests/graph/test_runloop.py compiled_vs_python)."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep import _kernels
from onnxep.ops import _gemv
from onnxep.ops.math.gemm import Gemm_7
from onnxep.ops.math.mat_mul import MatMul_1
from onnxep.ops.onnxep.fused_mat_mul import FusedMatMul_1
from tests._util import make_model
from tests.graph.test_runloop import compiled_vs_python

EPS = float(np.finfo(np.float32).eps)
BF16 = bool(_kernels.bgemm_hw())


@pytest.fixture(params=[None, True, False], ids=["rule", "on", "off"])
def tiny(request):
    _gemv.force_tiny_n(request.param)
    yield request.param
    _gemv.force_tiny_n(None)


def _session(model, precision):
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 2
    if precision == "bf16":
        so.add_session_config_entry("onnxep.compute_precision", "bf16")
    return onnxep.InferenceSession(model.SerializeToString(), so)


def _nk_kernels(sess, cls):
    """The session's kernels of class cls, and whether each took the dot form."""
    out = []
    for plan in sess.plans:
        for k, *_ in getattr(plan, "steps", ()):
            if isinstance(k, cls):
                out.append(bool(k.__dict__.get("_nk")))
    return out


def _expect_nk(tiny, N):
    return tiny if tiny is not None else 0 < N <= _kernels.NR // _gemv.TINY_N_OF_NR


def _bound(K, precision, nk):
    """|A|, |B| <= 1: K eps per sum (x4 slack) in fp32; bf16 operands (2^-8 each) on the bf16 GEMM otherwise."""
    return 4 * (K + 2) * (EPS if precision == "fp32" or nk else 2.0 ** -7)


PRECISIONS = ["fp32"] + (["bf16"] if BF16 else [])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("M,N,K,trans_a,trans_b,alpha,beta,c_shape", [
    (1, 2, 1280, 0, 1, 1.0, 1.0, (2,)),       # a two-class classifier head
    (5, 3, 37, 0, 0, 1.0, 1.0, (1, 3)),
    (4, 8, 64, 1, 1, 0.5, 2.0, (4, 1)),       # alpha, a column C: the slow epilogue of the dot form
    (3, 1, 20, 0, 1, 1.0, 0.5, (3, 1)),
    (6, 2, 33, 0, 1, 1.0, 1.0, (6, 2)),       # full C
    (2, 5, 10, 0, 0, 1.0, 1.0, None),
    (7, 40, 50, 0, 1, 1.0, 1.0, (40,)),       # past the rule: packed unless forced on
])
def test_gemm_tiny_n(tiny, precision, M, N, K, trans_a, trans_b, alpha, beta, c_shape):
    rng = np.random.default_rng(M * 100 + N + K)
    A = rng.uniform(-1, 1, (K, M) if trans_a else (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (N, K) if trans_b else (K, N)).astype(np.float32)
    inits = {"B": B}
    ins = ["A", "B"]
    if c_shape is not None:
        inits["C"] = rng.uniform(-1, 1, c_shape).astype(np.float32)
        ins.append("C")
    node = helper.make_node("Gemm", ins, ["Y"], transA=trans_a, transB=trans_b, alpha=alpha, beta=beta)
    model = make_model([node], {"A": A}, ["Y"], opset=13, initializers=inits)
    sess = _session(model, precision)
    nk = _expect_nk(tiny, N)
    assert _nk_kernels(sess, Gemm_7) == [nk]
    a64 = A.astype(np.float64).T if trans_a else A.astype(np.float64)
    want = alpha * (a64 @ (B.T if trans_b else B).astype(np.float64))
    if c_shape is not None:
        want = want + beta * inits["C"].astype(np.float64)
    got = sess.run(None, {"A": A})[0]
    assert got.shape == (M, N) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=_bound(K, precision, nk) * 3)
    if precision == "fp32":
        compiled_vs_python(model, [{"A": A}])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("a_shape,N", [((2, 3, 48), 4), ((1, 130), 2), ((5, 16), 9)])
def test_matmul_tiny_n(tiny, precision, a_shape, N):
    rng = np.random.default_rng(N)
    A = rng.uniform(-1, 1, a_shape).astype(np.float32)
    K = a_shape[-1]
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    model = make_model([helper.make_node("MatMul", ["A", "B"], ["Y"])], {"A": A}, ["Y"], opset=13,
                       initializers={"B": B})
    sess = _session(model, precision)
    nk = _expect_nk(tiny, N)
    assert _nk_kernels(sess, MatMul_1) == [nk]
    got = sess.run(None, {"A": A})[0]
    want = A.astype(np.float64) @ B.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=0, atol=_bound(K, precision, nk))
    if precision == "fp32":
        compiled_vs_python(model, [{"A": A}])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("act", ["Relu", None])
@pytest.mark.parametrize("rows", [1, 6])
def test_fused_matmul_tiny_n(tiny, precision, act, rows):
    """MatMul + Add(bias) [+ Relu] -> FusedMatMul (graph/passes/fuse_matmul_bias.py) with 3 output columns."""
    rng = np.random.default_rng(rows)
    K, N = 70, 3
    A = rng.uniform(-1, 1, (rows, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    b = rng.uniform(-1, 1, N).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["A", "B"], ["P"]),
             helper.make_node("Add", ["P", "b"], ["Q" if act else "Y"])]
    if act:
        nodes.append(helper.make_node(act, ["Q"], ["Y"]))
    model = make_model(nodes, {"A": A}, ["Y"], opset=13, initializers={"B": B, "b": b})
    sess = _session(model, precision)
    nk = _expect_nk(tiny, N)
    assert _nk_kernels(sess, FusedMatMul_1) == [nk]
    want = A.astype(np.float64) @ B.astype(np.float64) + b
    if act:
        want = np.maximum(want, 0.0)
    got = sess.run(None, {"A": A})[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=_bound(K, precision, nk))
    if precision == "fp32":
        compiled_vs_python(model, [{"A": A}])


def test_rule_follows_the_panel_width():
    """N <= NR / TINY_N_OF_NR takes the dot form (the rule, not forced)."""
    _gemv.force_tiny_n(None)
    edge = _kernels.NR // _gemv.TINY_N_OF_NR
    assert _gemv.tiny_n(edge) and not _gemv.tiny_n(edge + 1) and not _gemv.tiny_n(0)


@pytest.mark.parametrize("op,trans_b", [("Gemm", 0), ("Gemm", 1), ("MatMul", 0)])
def test_unpacked_b_takes_the_same_path(tiny, op, trans_b):
    """Oracle: the unpacked path (B fed as a graph input, tests/ops/_packing.py): packed, pre-packing disabled and
    non-sharing mode give its bits, with the dot form on, off and by the rule (N = 3)."""
    from tests.ops._packing import assert_packing_modes_agree
    rng = np.random.default_rng(5)
    K, N = 45, 3
    A = rng.uniform(-1, 1, (4, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (N, K) if trans_b else (K, N)).astype(np.float32)
    node = (helper.make_node("Gemm", ["A", "B"], ["Y"], transB=trans_b, name="g") if op == "Gemm"
            else helper.make_node("MatMul", ["A", "B"], ["Y"], name="m"))
    out = assert_packing_modes_agree(node, {"A": A}, "B", B, 13)
    np.testing.assert_allclose(out, A.astype(np.float64) @ (B.T if trans_b else B).astype(np.float64), rtol=0,
                               atol=_bound(K, "fp32", True))
