"""onnxep.compute_precision (issue 29): the config entry's check, bf16 sessions against fp32 ones (oracle: the fp32
session of the same model; cosine >= 0.999 and a per-element bound from bf16 rounding), and EPContext blobs recording
the precision."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from onnxep import _kernels
from onnxep.errors import InvalidArgument

KEY = "onnxep.compute_precision"


def _model(K=96, N=80, rng=None):
    rng = rng or np.random.default_rng(0)
    w1 = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
    b1 = rng.standard_normal(N).astype(np.float32)
    w2 = (rng.standard_normal((N, 33)) / np.sqrt(N)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", 33])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
                           numpy_helper.from_array(w2, "w2")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _session(model, precision=None, **config):
    so = onnxep.SessionOptions()
    if precision is not None:
        so.add_session_config_entry(KEY, precision)
    for k, v in config.items():
        so.add_session_config_entry(k, v)
    return onnxep.InferenceSession(model, so)


@pytest.mark.parametrize("value", ["fp16", "int8", "", "bfloat16"])
def test_bad_value_names_key_value_and_allowed(value):
    with pytest.raises(InvalidArgument) as e:
        _session(_model(), value)
    msg = str(e.value)
    assert KEY in msg and repr(value) in msg and "'fp32'" in msg and "'bf16'" in msg


@pytest.mark.parametrize("M", [1, 7, 130])
def test_bf16_session_close_to_fp32(M):
    model = _model()
    x = np.random.default_rng(M).standard_normal((M, 96)).astype(np.float32)
    y32 = _session(model, "fp32").run(None, {"x": x})[0]
    assert np.array_equal(y32, _session(model).run(None, {"x": x})[0])      # fp32 is the default
    y16 = _session(model, "bf16").run(None, {"x": x})[0]
    a, b = y32.ravel().astype(np.float64), y16.ravel().astype(np.float64)
    assert a @ b / np.linalg.norm(a) / np.linalg.norm(b) >= 0.999
    # two GEMMs with bf16 operands: each a relative 2**-7 of sum |a||b| (tests/kernels/test_bgemm.py), bounded here
    # loosely by 4 * 2**-7 of the fp32 result's scale
    assert np.max(np.abs(y16 - y32)) <= 4 * 2 ** -7 * (np.max(np.abs(y32)) + 1)
    if _kernels.bgemm_hw():
        assert not np.array_equal(y16, y32)       # bf16 really ran (the option falls back to fp32 without it)


@pytest.mark.skipif(not _kernels.bgemm_hw(), reason="needs AVX512_BF16")
def test_epcontext_records_precision(tmp_path):
    model = _model()
    out = tmp_path / "ctx.onnx"
    _session(model, "bf16", **{"ep.context_enable": "1", "ep.context_file_path": str(out)})
    x = np.random.default_rng(1).standard_normal((5, 96)).astype(np.float32)
    want = _session(model, "bf16").run(None, {"x": x})[0]
    np.testing.assert_array_equal(_session(str(out), "bf16").run(None, {"x": x})[0], want)
    with pytest.raises(Exception, match=r"compute_precision='bf16'.*'fp32'"):
        _session(str(out), "fp32")
    out32 = tmp_path / "ctx32.onnx"
    _session(model, "fp32", **{"ep.context_enable": "1", "ep.context_file_path": str(out32)})
    with pytest.raises(Exception, match=r"compute_precision='fp32'.*'bf16'"):
        _session(str(out32), "bf16")


@pytest.mark.parametrize("trans_a,trans_b,c_shape,alpha,beta", [(0, 0, None, 1.0, 1.0), (0, 1, (33,), 1.0, 1.0),
                                                                 (1, 0, (7, 1), 0.5, 2.0), (1, 1, (7, 33), 1.5, 0.5),
                                                                 (0, 1, (), 1.0, -1.0)])
def test_gemm_bf16_close_to_fp32(trans_a, trans_b, c_shape, alpha, beta):
    rng = np.random.default_rng(3)
    K, N, M = 70, 33, 7
    b = rng.standard_normal((N, K) if trans_b else (K, N)).astype(np.float32)
    inits = [numpy_helper.from_array(b, "b")]
    ins = ["a", "b"]
    if c_shape is not None:
        inits.append(numpy_helper.from_array(rng.standard_normal(c_shape).astype(np.float32), "c"))
        ins.append("c")
    node = helper.make_node("Gemm", ins, ["y"], alpha=alpha, beta=beta, transA=trans_a, transB=trans_b)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT,
                                                                      [K, M] if trans_a else [M, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    a = rng.standard_normal((K, M) if trans_a else (M, K)).astype(np.float32)
    y32 = _session(model, "fp32").run(None, {"a": a})[0]
    y16 = _session(model, "bf16").run(None, {"a": a})[0]
    s = abs(alpha) * (np.abs(a.T if trans_a else a).astype(np.float64) @ np.abs(b.T if trans_b else b))
    assert np.all(np.abs(y16 - y32) <= (2 ** -7 + K * 2 ** -22) * s + 1e-5 * (np.abs(y32) + 1))
    if _kernels.bgemm_hw():
        assert not np.array_equal(y16, y32)       # the bf16 GEMM ran


@pytest.mark.skipif(not _kernels.bgemm_hw(), reason="needs AVX512_BF16")
def test_batch1_fully_connected_runs_bf16(monkeypatch):
    """A batch-1 Gemm (transB=1) + Relu, which fp32 keeps as stored for gemv_f32 (ops/onnxep/fused_mat_mul.py), is
    packed to bf16 in a bf16 session: the layer is memory-bound, and bf16 halves the bytes read per run. Oracle: the
    fp32 session, within the bf16 bound of test_gemm_bf16_close_to_fp32."""
    calls = []
    for fn in ("gemv_f32", "bgemm_pack_b"):
        real = getattr(_kernels, fn)
        monkeypatch.setattr(_kernels, fn, lambda *a, _f=fn, _r=real: (calls.append(_f), _r(*a))[1])
    rng = np.random.default_rng(5)
    K, N = 300, 70
    w = rng.standard_normal((N, K)).astype(np.float32)
    c = rng.standard_normal(N).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["a", "w", "c"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, K])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(c, "c")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    a = rng.standard_normal((1, K)).astype(np.float32)
    y16 = _session(model, "bf16").run(None, {"a": a})[0]
    assert "bgemm_pack_b" in calls and "gemv_f32" not in calls
    calls.clear()
    y32 = _session(model, "fp32").run(None, {"a": a})[0]
    assert calls == ["gemv_f32"]
    s = np.abs(a).astype(np.float64) @ np.abs(w.T) + np.abs(c)
    assert np.all(np.abs(y16 - y32) <= (2 ** -7 + K * 2 ** -22) * s + 1e-5 * (np.abs(y32) + 1))
    assert not np.array_equal(y16, y32)
