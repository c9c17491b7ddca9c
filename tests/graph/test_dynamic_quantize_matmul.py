"""fuse_dynamic_quantize_matmul (graph/passes) and com.onnxep DynamicQuantizeMatMul (ops/onnxep). Oracles: the same
model run by onnxep with the pass disabled (the unfused DynamicQuantizeLinear, MatMulInteger, Cast, Mul, Add: exact
equality -- the fused epilogue rounds as they do), and onnxruntime (its own DynamicQuantizeMatMul / MatMulIntegerToFloat
fusion: close, cosine >= 0.9999)."""
import logging

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxep

quantization = pytest.importorskip("onnxruntime.quantization")


def _float_model(K, Ns, shared, bias, rank3):
    """x -> MatMul(W_i) [+ b_i] for each N in Ns (shared: all from x; else chained through Relu)."""
    rng = np.random.default_rng(sum(Ns) + K)
    nodes, inits, outs = [], [], []
    shape = ["b", "s", K] if rank3 else ["b", K]
    prev, k = "x", K
    for i, n in enumerate(Ns):
        src = "x" if shared else prev
        kk = K if shared else k
        w = rng.standard_normal((kk, n)).astype(np.float32) * 0.3
        inits.append(onnx.numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [src, f"w{i}"], [f"m{i}"]))
        y = f"m{i}"
        if bias:
            inits.append(onnx.numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), f"b{i}"))
            nodes.append(helper.make_node("Add", [y, f"b{i}"], [f"a{i}"]))
            y = f"a{i}"
        if shared:
            outs.append(y)
        else:
            nodes.append(helper.make_node("Relu", [y], [f"r{i}"]))
            prev, k = f"r{i}", n
    if not shared:
        outs = [prev]
    oshape = lambda n: (["b", "s", n] if rank3 else ["b", n])
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _quantized(tmp_path, model, per_channel, weight_type):
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(model, src)
    logging.getLogger().setLevel(logging.ERROR)
    quantization.quantize_dynamic(str(src), str(dst), per_channel=per_channel, weight_type=weight_type)
    return str(dst)


def _cos(a, b):
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("K,Ns,shared,bias,rank3", [
    (64, (64, 64, 64), True, True, True),        # Q / K / V from one DynamicQuantizeLinear
    (37, (19, 130), False, True, False),         # odd sizes, chained
    (16, (33,), False, False, True),             # no bias
])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("wt", ["QInt8", "QUInt8"])
def test_fused_matches_unfused_and_ort(tmp_path, K, Ns, shared, bias, rank3, per_channel, wt):
    path = _quantized(tmp_path, _float_model(K, Ns, shared, bias, rank3), per_channel,
                      getattr(quantization.QuantType, wt))
    rng = np.random.default_rng(K)
    x = rng.standard_normal((3, 5, K) if rank3 else (7, K)).astype(np.float32)
    x[0, 0] = 4.0                                  # an outlier: a coarse scale
    so = onnxep.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    fused = onnxep.InferenceSession(path, so)
    plain = onnxep.InferenceSession(path, disabled_optimizers=["fuse_dynamic_quantize_matmul"])
    ops = [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]
    assert ops.count("DynamicQuantizeMatMul") == len(Ns)
    assert "MatMulInteger" not in ops and "DynamicQuantizeLinear" not in ops
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for _ in range(3):                             # the compiled run loop's C step from the second run
        got = fused.run(None, {"x": x})
        ref = plain.run(None, {"x": x})
        for g, r, w in zip(got, ref, want):
            np.testing.assert_array_equal(g, r)
            assert _cos(g, w) >= 0.9999
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def test_nan_input_falls_back(tmp_path):
    path = _quantized(tmp_path, _float_model(8, (5,), False, True, False), False, quantization.QuantType.QInt8)
    x = np.ones((2, 8), np.float32)
    fused = onnxep.InferenceSession(path)
    plain = onnxep.InferenceSession(path, disabled_optimizers=["fuse_dynamic_quantize_matmul"])
    fused.run(None, {"x": x}), fused.run(None, {"x": x})
    x[1, 3] = np.nan
    g, r = fused.run(None, {"x": x})[0], plain.run(None, {"x": x})[0]
    np.testing.assert_array_equal(g, r)             # the reference path, B unpacked from its packing


def test_intermediate_graph_output_not_fused(tmp_path):
    model = _float_model(8, (5,), False, True, False)
    path = _quantized(tmp_path, model, False, quantization.QuantType.QInt8)
    q = onnx.load(path)
    mmi = next(n for n in q.graph.node if n.op_type == "MatMulInteger")
    q.graph.output.append(helper.make_tensor_value_info(mmi.output[0], TensorProto.INT32, None))
    onnx.save(q, str(tmp_path / "q2.onnx"))
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    got = onnxep.InferenceSession(str(tmp_path / "q2.onnx")).run(None, {"x": x})
    want = ort.InferenceSession(str(tmp_path / "q2.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
