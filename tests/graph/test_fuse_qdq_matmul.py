"""graph/passes/fuse_qdq_ops.py, MatMul: DequantizeLinear(x) -> MatMul(., DequantizeLinear(constant 2-D w)) ->
QuantizeLinear folds into QLinearMatMul (ops/quant/q_linear_mat_mul.py, the native int8 GEMM of qgemm.h with b packed
once, a C step of the compiled run loop); cases onnxruntime's selector leaves alone stay.

Oracle: onnxruntime's CPU provider on the same QDQ graph -- its QDQ transformer folds the same node group into its own
QLinearMatMul and requantizes as MLAS (float32(acc) * (x_scale * w_scale / y_scale), round half to even, + y_zp,
saturated), so the outputs are compared to one quantization step, most elements equal (onnxruntime may form the
multiplier in another order; where it does not fold, its float32 MatMul rounds the sum differently). Also onnxep
itself without the pass (disabled_optimizers), to one step, and the compiled run loop against the Python loop, bit
for bit."""
import numpy as np
import pytest
from onnx import helper

from tests._util import make_model, run_ort
from tests.graph.test_fuse_qdq_ops import _close, _compiled_matches, _ops, _session


def _model(xtype, wtype, per_col, out=True, seed=0, K=37, N=21, wconst=True):
    rng = np.random.default_rng(seed)
    zp = (lambda v, t=xtype: np.array(v, t))
    lo = -128 if xtype == np.int8 else 0
    wlo = -128 if wtype == np.int8 else 0
    w = rng.integers(wlo, wlo + 256, (K, N)).astype(wtype)
    ws = (rng.uniform(0.002, 0.01, N) if per_col else np.array(0.005)).astype(np.float32)
    wz = (rng.integers(-3, 4, ws.shape) if wtype == np.int8 else rng.integers(120, 136, ws.shape)).astype(wtype)
    inits = {"xs": np.float32(0.03), "xz": zp(lo + 100), "ws": ws, "wz": wz, "ys": np.float32(0.2),
             "yz": zp(lo + 120)}
    if wconst:
        inits["w"] = w
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["m"])]
    if out:
        nodes.append(helper.make_node("QuantizeLinear", ["m", "ys", "yz"], ["y"]))
    feeds = {"x": rng.uniform(-3, 3, (2, 13, K)).astype(np.float32)}
    if not wconst:
        feeds["w"] = w
    return make_model(nodes, feeds, ["y" if out else "m"], opset=13, initializers=inits), feeds


@pytest.mark.parametrize("xtype,wtype", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_col", [False, True])
@pytest.mark.parametrize("K,N", [(37, 21), (64, 64), (5, 130)])
def test_matmul_folds_and_matches_ort(xtype, wtype, per_col, K, N):
    model, feeds = _model(xtype, wtype, per_col, K=K, N=N)
    sess = _session(model, threads=2)
    ops = _ops(sess)
    assert ops.count("QLinearMatMul") == 1 and "MatMul" not in ops, ops
    got = sess.run(None, feeds)[0]
    _close(got, run_ort(model, feeds)[0])
    _close(got, _session(model, threads=2, disabled_optimizers=["fuse_qdq_ops"]).run(None, feeds)[0])


def test_int8_x_with_uint8_weight_stays():
    """onnxruntime's selector folds an int8 x only with an int8 weight: the MatMul stays float32."""
    model, feeds = _model(np.int8, np.uint8, True)
    ops = _ops(_session(model, threads=2))
    assert "QLinearMatMul" not in ops and "MatMul" in ops, ops
    _close(_session(model, threads=2).run(None, feeds)[0], run_ort(model, feeds)[0])


def test_without_quantize_after_stays():
    model, feeds = _model(np.uint8, np.int8, True, out=False)
    ops = _ops(_session(model, threads=2))
    assert "QLinearMatMul" not in ops, ops
    np.testing.assert_allclose(_session(model, threads=2).run(None, feeds)[0], run_ort(model, feeds)[0],
                               rtol=1e-5, atol=1e-5)


def test_weight_not_constant_stays():
    model, feeds = _model(np.uint8, np.int8, False, wconst=False)
    ops = _ops(_session(model, threads=2))
    assert "QLinearMatMul" not in ops, ops
    _close(_session(model, threads=2).run(None, feeds)[0], run_ort(model, feeds)[0])


def test_compiled_run_loop():
    """The folded MatMul runs as a C step (RL_QLINEAR_MATMUL), bit-identical to the Python loop."""
    _compiled_matches(*_model(np.uint8, np.int8, True, K=64, N=48))


def test_standard_op_numpy_path_when_not_native():
    """A QLinearMatMul with a per-row a_scale (numpy path) next to the packed b: equal to the integer oracle."""
    rng = np.random.default_rng(4)
    M, K, N = 6, 9, 5
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    a_s = rng.uniform(0.01, 0.02, M).astype(np.float32)
    inits = {"as": a_s, "az": np.full(M, 3, np.uint8), "b": b, "bs": np.float32(0.01), "bz": np.int8(0),
             "ys": np.float32(0.05), "yz": np.uint8(128)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    model = make_model([node], {"a": a}, ["y"], opset=13, initializers=inits)
    got = _session(model, threads=2).run(None, {"a": a})[0]
    acc = ((a.astype(np.int64) - 3) @ b.astype(np.int64)).astype(np.int32)
    mult = (a_s.reshape(-1, 1) * np.float32(0.01) / np.float32(0.05)).astype(np.float32)
    want = np.clip(np.rint(acc.astype(np.float32) * mult) + np.float32(128), 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(got, want)
