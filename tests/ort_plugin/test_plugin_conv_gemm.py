"""The plugin's Conv / Gemm / MatMul adapters (onnxep's packed SGEMM inside onnxruntime) and its pre-packed weights.

Oracle: onnxruntime's CPU EP alone on the same model and feeds (max |diff| / max |ref| <= 1e-4). Conv is claimed only
with the EP option claim_conv=1 (the default policy leaves it to the CPU EP, measured faster): the Conv tests set it.
"""

import json
import os

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
if tuple(int(p) for p in ort.__version__.split(".")[:2]) < (1, 24):
    pytest.skip("the plugin needs onnxruntime >= 1.24", allow_module_level=True)

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxep import ort as onnxep_ort  # noqa: E402
from tests._util import run_threads  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes, inputs, inits, opset=17):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, None)],
                          initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString()


def _providers(sess, feeds):
    so_path = sess.end_profiling()
    try:
        events = json.load(open(so_path))
    finally:
        os.remove(so_path)
    out = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            a = e["args"]
            out.setdefault(a["op_name"], set()).add(a["provider"])
    return out


def _check(model, feeds, expect_onnxep=(), threads=2):
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    sess = ort.InferenceSession(model, onnxep_ort.session_options(so, compile=0, **_EP_OPTIONS))
    got = sess.run(None, feeds)[0]
    assert got.shape == ref.shape
    err = np.abs(got.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-30) if ref.size else 0.0
    assert err <= 1e-4, err
    prov = _providers(sess, feeds)
    for op in expect_onnxep:
        assert prov.get(op) == {"onnxep"}, (op, prov)
    return sess


_EP_OPTIONS = {}


@pytest.fixture
def claim_conv():
    _EP_OPTIONS["claim_conv"] = 1
    yield
    _EP_OPTIONS.clear()


CONV_CASES = [
    # x shape, w shape, attrs
    ((1, 3, 17, 19), (8, 3, 3, 3), dict(pads=[1, 1, 1, 1])),
    ((2, 5, 11, 7), (6, 5, 3, 2), dict(strides=[2, 1], pads=[0, 1, 2, 0])),
    ((1, 16, 9, 9), (16, 1, 3, 3), dict(group=16, pads=[1, 1, 1, 1])),               # depthwise
    ((1, 8, 10, 10), (16, 1, 3, 3), dict(group=8, strides=[2, 2], pads=[1, 1, 1, 1])),  # depthwise, multiplier 2
    ((1, 8, 12, 12), (8, 2, 3, 3), dict(group=4, dilations=[2, 2], pads=[2, 2, 2, 2])),
    ((1, 33, 7, 13), (65, 33, 1, 1), {}),                                            # pointwise, odd sizes
    ((1, 4, 13, 13), (5, 4, 5, 5), dict(auto_pad="SAME_UPPER", strides=[2, 2])),
    ((1, 4, 13, 13), (5, 4, 4, 4), dict(auto_pad="SAME_LOWER")),
    ((1, 4, 9, 10), (3, 4, 3, 3), dict(auto_pad="VALID")),
    ((2, 3, 29), (7, 3, 5), dict(pads=[2, 1], strides=[3])),                          # 1-D
    ((1, 2, 5, 6, 7), (4, 2, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1])),                 # 3-D
    ((1, 64, 56, 56), (64, 64, 3, 3), dict(pads=[1, 1, 1, 1])),                        # above the parallel threshold
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("xs,ws,attrs", CONV_CASES)
def test_conv_matches_cpu_ep(claim_conv, xs, ws, attrs, bias):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(ws).astype(np.float32), "W")]
    ins = ["x", "W"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal((ws[0],)).astype(np.float32), "B"))
        ins.append("B")
    model = _model([helper.make_node("Conv", ins, ["y"], **attrs)],
                   [helper.make_tensor_value_info("x", F, list(xs))], inits)
    _check(model, {"x": rng.standard_normal(xs).astype(np.float32)}, expect_onnxep=("Conv",))


@pytest.mark.parametrize("threads", [1, 2])
def test_conv_relu_fused_and_weight_shared(claim_conv, threads):
    """Conv -> Relu runs the Relu in the conv's epilogue (the Relu node a pass-through); two convs reading one
    initializer get one packed buffer from onnxruntime's shared pre-pack cache (SetSharedPrePackedWeight)."""
    from onnxep import _kernels
    import importlib
    mod = importlib.import_module("onnxep._kernels_" + _kernels.ISA)
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.standard_normal((12, 12, 3, 3)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal((12,)).astype(np.float32), "B")]
    nodes = [helper.make_node("Conv", ["x", "W", "B"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "W"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", F, [1, 12, 15, 15])], inits)
    mod.ort_shared_prepack_log(reset=True)
    _check(model, {"x": rng.standard_normal((1, 12, 15, 15)).astype(np.float32)}, ("Conv", "Relu"), threads)
    log = mod.ort_shared_prepack_log(reset=True)
    assert len(log) == 2 and log[0] == log[1] != 0, log


@pytest.mark.parametrize("ta,tb", [(0, 0), (0, 1), (1, 0), (1, 1)])
@pytest.mark.parametrize("cshape", [None, (), (1,), (37,), (1, 37), (9, 1), (9, 37)])
def test_gemm_matches_cpu_ep(ta, tb, cshape):
    rng = np.random.default_rng(2)
    M, K, N = 9, 130, 37
    b = rng.standard_normal((N, K) if tb else (K, N)).astype(np.float32)
    inits = [numpy_helper.from_array(b, "B")]
    ins = ["a", "B"]
    if cshape is not None:
        inits.append(numpy_helper.from_array(np.asarray(rng.standard_normal(cshape), np.float32), "C"))
        ins.append("C")
    model = _model([helper.make_node("Gemm", ins, ["y"], transA=ta, transB=tb, alpha=0.7, beta=1.3)],
                   [helper.make_tensor_value_info("a", F, [K, M] if ta else [M, K])], inits)
    a = rng.standard_normal((K, M) if ta else (M, K)).astype(np.float32)
    _check(model, {"a": a}, expect_onnxep=("Gemm",))


@pytest.mark.parametrize("ashape", [(5,), (1, 300), (3, 7, 300), (2, 2, 2, 300), (257, 300)])
def test_matmul_constant_b(ashape):
    rng = np.random.default_rng(3)
    b = rng.standard_normal((300, 1001)).astype(np.float32)
    K = ashape[-1]
    b = b[:K]
    model = _model([helper.make_node("MatMul", ["a", "B"], ["y"])],
                   [helper.make_tensor_value_info("a", F, list(ashape))], [numpy_helper.from_array(b, "B")])
    _check(model, {"a": rng.standard_normal(ashape).astype(np.float32)}, expect_onnxep=("MatMul",))


def test_matmul_runtime_b_left_to_cpu_ep():
    rng = np.random.default_rng(4)
    model = _model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                   [helper.make_tensor_value_info("a", F, [4, 6]), helper.make_tensor_value_info("b", F, [6, 5])], [])
    sess = _check(model, {"a": rng.standard_normal((4, 6)).astype(np.float32),
                          "b": rng.standard_normal((6, 5)).astype(np.float32)})
    del sess


def test_conv_kernel_error_then_session_usable(claim_conv):
    """A symbolic channel dim lets a wrong channel count reach the kernel: onnxruntime raises, the session stays
    usable."""
    rng = np.random.default_rng(5)
    model = _model([helper.make_node("Conv", ["x", "W"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [1, "C", 5, 5])],
                   [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")])
    so = onnxep_ort.session_options(compile=0)
    sess = ort.InferenceSession(model, so)
    with pytest.raises(Exception):
        sess.run(None, {"x": np.ones((1, 5, 5, 5), np.float32)})
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("feed", [np.ones((1, 3, 2, 2), np.float32), np.ones((1, 3, 0, 5), np.float32),
                                  np.ones((3, 5, 5), np.float32), np.ones((1, 3, 5, 5), np.float64)])
def test_conv_malformed_feeds_no_crash(claim_conv, feed):
    rng = np.random.default_rng(6)
    model = _model([helper.make_node("Conv", ["x", "W"], ["y"])],
                   [helper.make_tensor_value_info("x", F, ["N", "C", "H", "W"])],
                   [numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W")])
    sess = ort.InferenceSession(model, onnxep_ort.session_options(compile=0))
    try:
        sess.run(None, {"x": feed})
    except Exception:  # noqa: BLE001 - an onnxruntime error is the expected outcome; a crash is not
        pass


def test_conv_sessions_from_several_threads(claim_conv):
    rng = np.random.default_rng(7)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 8, 3, 3)).astype(np.float32), "W")]
    model = _model([helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]),
                    helper.make_node("Relu", ["c"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [2, 8, 20, 20])], inits)
    sess = ort.InferenceSession(model, onnxep_ort.session_options(compile=0))
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    xs = [rng.standard_normal((2, 8, 20, 20)).astype(np.float32) for _ in range(4)]
    refs = [ref.run(None, {"x": x})[0] for x in xs]

    def work(i):
        for _ in range(5):
            np.testing.assert_allclose(sess.run(None, {"x": xs[i]})[0], refs[i], rtol=1e-4, atol=1e-4)

    run_threads(work, 4)
