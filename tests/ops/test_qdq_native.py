"""Per-tensor 8-bit QuantizeLinear / DequantizeLinear native kernels (qg_quantize_tensor / qg_dequantize_tensor,
_k_qgemm.pxi) and their run loop steps (RL_QUANTIZE / RL_DEQUANTIZE). Oracles: numpy (float32 division, round half
to even, saturation, NaN -> the type's minimum) exactly, on every ISA variant this machine runs, tails included; and
onnxruntime on small QDQ graphs, exactly."""
import importlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep import _kernels

VARIANTS = [importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE]
F = np.float32


def _q_oracle(x, s, z, dt):
    lo, hi = (-128, 127) if dt == np.int8 else (0, 255)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        r = np.rint(np.divide(x, F(s), dtype=F)) + F(z)
        r = np.where(np.isnan(r), lo, np.clip(r, lo, hi))
    return r.astype(dt)


@pytest.mark.parametrize("mod", VARIANTS, ids=list(_kernels.AVAILABLE))
@pytest.mark.parametrize("n", [1, 7, 8, 9, 15, 16, 17, 31, 100, 1001])
@pytest.mark.parametrize("dt", [np.int8, np.uint8])
def test_quantize_dequantize_exact(mod, n, dt):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 3).astype(F)
    x[::5] = (rng.integers(-300, 300, x[::5].size) + F(0.5)) * F(0.02)    # near .5 quotients (ties)
    if n > 3:
        x[1], x[2], x[3] = np.nan, np.inf, -np.inf
    s, z = F(0.02), (-3 if dt == np.int8 else 131)
    y = np.empty(n, dt)
    mod.quantize_tensor_f32(x, s, float(z), dt == np.int8, y.view(np.uint8))
    np.testing.assert_array_equal(y, _q_oracle(x, s, z, dt))
    q = rng.integers(np.iinfo(dt).min, np.iinfo(dt).max + 1, n).astype(dt)
    out = np.empty(n, F)
    mod.dequantize_tensor_f32(q.view(np.uint8), dt == np.int8, s, float(z), out)
    np.testing.assert_array_equal(out, (q.astype(F) - F(z)) * s)


def _qdq_model(dt, zp, shape=(2, 3, 5, 7)):
    """x -> QuantizeLinear -> DequantizeLinear -> Relu -> QuantizeLinear -> DequantizeLinear."""
    t = TensorProto.INT8 if dt == np.int8 else TensorProto.UINT8
    inits = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.037]),
             helper.make_tensor("s2", TensorProto.FLOAT, [], [0.011])]
    ins = ["s"]
    if zp:
        inits += [helper.make_tensor("z", t, [], [5 if dt == np.int8 else 120]),
                  helper.make_tensor("z2", t, [], [0 if dt == np.int8 else 3])]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s"] + (["z"] if zp else []), ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s"] + (["z"] if zp else []), ["d"]),
             helper.make_node("Relu", ["d"], ["r"]),
             helper.make_node("QuantizeLinear", ["r", "s2"] + (["z2"] if zp else []), ["q2"]),
             helper.make_node("DequantizeLinear", ["q2", "s2"] + (["z2"] if zp else []), ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape)),
                           helper.make_tensor_value_info("q", t, list(shape))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("dt,zp", [(np.int8, True), (np.uint8, True), (np.uint8, False)])   # no zero point: uint8
def test_qdq_graph_matches_onnxruntime(dt, zp):
    m = _qdq_model(dt, zp).SerializeToString()
    sess = onnxep.InferenceSession(m)
    ref = ort.InferenceSession(m, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for i in range(4):       # the compiled run loop's C steps from the second run
        x = (rng.standard_normal((2, 3, 5, 7)) * 4).astype(F)
        for g, w in zip(sess.run(None, {"x": x}), ref.run(None, {"x": x})):
            np.testing.assert_array_equal(g, w)
