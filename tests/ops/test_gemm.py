"""Gemm op. Oracles: onnx.reference (spec semantics) and onnxruntime (shapes/dtype); packed vs unpacked paths."""
import numpy as np
import pytest
from onnx import helper

from tests._util import fallback_nodes, make_model, run_onnxep, run_ort, run_reference
from tests.ops._packing import assert_packing_modes_agree

EPS = float(np.finfo(np.float32).eps)


def _tol(K):
    return 4 * (K + 2) * EPS * 2.0  # |A|,|B| <= 1, |alpha| <= 2 (standard GEMM bound, x4 slack)


@pytest.mark.parametrize("opset", [7, 9, 11, 13])
@pytest.mark.parametrize("M,K,N", [(1, 1, 1), (3, 5, 4), (17, 33, 65), (40, 300, 7)])
@pytest.mark.parametrize("transA,transB", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", ["MN", "N", "1N", "M1", "scalar", "1"])
def test_gemm(opset, M, K, N, transA, transB, c_shape):
    """Oracle: onnx.reference; shape and dtype also against onnxruntime."""
    rng = np.random.default_rng(M * 7 + K * 3 + N)
    A = rng.uniform(-1, 1, (K, M) if transA else (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (N, K) if transB else (K, N)).astype(np.float32)
    cs = {"MN": (M, N), "N": (N,), "1N": (1, N), "M1": (M, 1), "scalar": (), "1": (1,)}[c_shape]
    C = rng.uniform(-1, 1, cs).astype(np.float32)
    node = helper.make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=0.5 if K % 2 else 1.0, beta=2.0,
                            transA=transA, transB=transB)
    feeds = {"A": A, "B": B, "C": C}
    model = make_model([node], feeds, ["Y"], opset=opset)
    got, sess = run_onnxep(model, feeds)
    assert fallback_nodes(sess) == []
    ref = run_reference(model, feeds)[0]
    assert got[0].dtype == np.float32 and got[0].shape == ref.shape == (M, N)
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=_tol(K) + 4 * EPS * 2)
    if opset == 13 and c_shape == "MN":
        o = run_ort(model, feeds)[0]
        assert o.shape == got[0].shape and o.dtype == got[0].dtype


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("M,K,N", [(2, 3, 4), (0, 3, 4), (3, 0, 4), (5, 9, 0)])
def test_gemm_no_c_and_empty(opset, M, K, N):
    """Oracle: onnx.reference (C omitted, zero-sized dims)."""
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    node = helper.make_node("Gemm", ["A", "B"], ["Y"], alpha=1.5)
    feeds = {"A": A, "B": B}
    model = make_model([node], feeds, ["Y"], opset=opset)
    got, sess = run_onnxep(model, feeds)
    assert fallback_nodes(sess) == []
    ref = run_reference(model, feeds)[0]
    assert got[0].shape == ref.shape and got[0].dtype == np.float32
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=_tol(K) * 1.5)


@pytest.mark.parametrize("transB", [0, 1])
@pytest.mark.parametrize("M,K,N", [(1, 7, 3), (37, 300, 70)])
def test_gemm_packing_modes(transB, M, K, N):
    """Oracle: the unpacked path (B as graph input); packed/sharing/non-sharing identical; and onnx.reference."""
    rng = np.random.default_rng(3)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (N, K) if transB else (K, N)).astype(np.float32)
    C = rng.uniform(-1, 1, (N,)).astype(np.float32)
    node = helper.make_node("Gemm", ["A", "B", "C"], ["Y"], transB=transB, name="g")
    out = assert_packing_modes_agree(node, {"A": A, "C": C}, "B", B, 13)
    ref = run_reference(make_model([node], {"A": A, "B": B, "C": C}, ["Y"], opset=13), {"A": A, "B": B, "C": C})[0]
    np.testing.assert_allclose(out, ref, rtol=0, atol=_tol(K))


def test_gemm_shared_weight_packed_once():
    """Oracle: onnx.reference; a Gemm and a MatMul with the same constant B share one packed buffer (container hit)."""
    rng = np.random.default_rng(4)
    A = rng.uniform(-1, 1, (5, 8)).astype(np.float32)
    B = rng.uniform(-1, 1, (8, 6)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["A", "B"], ["Y1"], name="g1"),
             helper.make_node("MatMul", ["A", "B"], ["Y2"], name="g2")]
    model = make_model(nodes, {"A": A}, ["Y1", "Y2"], opset=13, initializers={"B": B})
    from onnxep.contracts.weight_cache import PrePackedWeightsContainer
    container = PrePackedWeightsContainer()
    got, sess = run_onnxep(model, {"A": A}, prepacked_weights_container=container)
    assert fallback_nodes(sess) == []
    assert len(container) == 1 and container.hits == 1
    ref = run_reference(model, {"A": A})
    np.testing.assert_allclose(got[0], ref[0], rtol=0, atol=_tol(8))
    np.testing.assert_array_equal(got[0], got[1])


def test_gemm_bad_shapes_raise():
    """Oracle: the documented error -- mismatched inner dims raise a RuntimeException naming the node."""
    import onnxep
    node = helper.make_node("Gemm", ["A", "B"], ["Y"], name="bad_gemm")
    A = np.ones((2, 3), np.float32)
    B = np.ones((4, 5), np.float32)
    model = make_model([node], {"A": A, "B": B}, ["Y"], opset=13, input_shapes={"A": ["m", "k"], "B": ["k2", "n"]})
    sess = onnxep.InferenceSession(model.SerializeToString())
    with pytest.raises(Exception, match="bad_gemm"):
        sess.run(None, {"A": A, "B": B})


@pytest.mark.parametrize("a_shape,trans_b,gemv", [
    ((1, 300), 1, True),            # a batch-1 fully connected layer, B stored (N, K): B stays as stored
    (("batch", 300), 1, False),     # the row count is not known when the session is made: packed
    ((2, 300), 1, False),
    ((1, 300), 0, False),           # B stored (K, N): packed (gemv_f32 reads it in strided row segments)
])
def test_batch1_fully_connected_keeps_weight_as_stored(monkeypatch, a_shape, trans_b, gemv):
    """Gemm (+ Relu, fused by the passes into FusedMatMul): B is left unpacked and run by gemv_f32 exactly when A has
    one row by its static shape and B is (N, K); the result matches onnxruntime's either way (oracle)."""
    from onnxep import _kernels
    calls = []
    for fn in ("gemv_f32", "sgemm_pack_b"):
        real = getattr(_kernels, fn)
        monkeypatch.setattr(_kernels, fn, lambda *a, _f=fn, _r=real: (calls.append(_f), _r(*a))[1])
    rng = np.random.default_rng(7)
    A = rng.uniform(-1, 1, (a_shape[0] if isinstance(a_shape[0], int) else 1, 300)).astype(np.float32)
    B = rng.uniform(-1, 1, (70, 300) if trans_b else (300, 70)).astype(np.float32)
    C = rng.uniform(-1, 1, 70).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["A", "B", "C"], ["G"], transB=trans_b), helper.make_node("Relu", ["G"], ["Y"])]
    model = make_model(nodes, {"A": A}, ["Y"], opset=13, initializers={"B": B, "C": C}, input_shapes={"A": a_shape})
    got, sess = run_onnxep(model, {"A": A})
    assert fallback_nodes(sess) == []
    assert ("gemv_f32" in calls, "sgemm_pack_b" in calls) == (gemv, not gemv)
    np.testing.assert_allclose(got[0], run_ort(model, {"A": A})[0], rtol=0, atol=_tol(300))


@pytest.mark.parametrize("c_const", [True, False])
def test_constant_c_split_once(monkeypatch, c_const):
    """Gemm.compute splits a constant C (gemm_bias) once per (M, N) and reuses it; a C fed at run time is split every
    run, so a fed array changed in place between runs is seen. Oracle: float64 numpy; the Python loop (compiled runs
    off, as in a profiled run)."""
    import onnxep
    from onnxep.backends.cpu import device
    from onnxep.ops.math import gemm
    calls = []
    real = gemm.gemm_bias
    monkeypatch.setattr(gemm, "gemm_bias", lambda *a: (calls.append(1), real(*a))[1])
    monkeypatch.setattr(device, "COMPILED_RUNS", False)
    rng = np.random.default_rng(11)
    A = rng.uniform(-1, 1, (3, 20)).astype(np.float32)
    B = rng.uniform(-1, 1, (20, 40)).astype(np.float32)
    C = rng.uniform(-1, 1, (3, 1)).astype(np.float32)
    node = helper.make_node("Gemm", ["A", "B", "C"], ["Y"], beta=0.5)
    inits = {"B": B, **({"C": C} if c_const else {})}
    model = make_model([node], {"A": A, **({} if c_const else {"C": C})}, ["Y"], opset=13, initializers=inits)
    sess = onnxep.InferenceSession(model.SerializeToString())
    for run in range(3):
        feeds = {"A": A} if c_const else {"A": A, "C": C}
        got = sess.run(None, feeds)[0]
        want = A.astype(np.float64) @ B.astype(np.float64) + 0.5 * C.astype(np.float64)
        np.testing.assert_allclose(got, want, rtol=0, atol=_tol(20))
        if not c_const:
            C += 1.0          # the same array, new values: the next run must see them
    assert len(calls) == (1 if c_const else 3)
