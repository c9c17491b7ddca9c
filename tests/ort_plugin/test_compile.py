"""The plugin EP's compile path (EP option compile=1; onnxep/ort_compile.py, OrtEp::Compile in _k_ort_plugin.pxi).

Oracle: onnxruntime's CPU EP alone on the same model and feeds (max |plugin - cpu| / max |cpu| <= 1e-4). The share of
nodes onnxruntime's profiler attributes to provider onnxep shows the partitions were fused and compiled.
"""

import os

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
if tuple(int(p) for p in ort.__version__.split(".")[:2]) < (1, 24):
    pytest.skip("the plugin needs onnxruntime >= 1.24", allow_module_level=True)

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnxep import ort as onnxep_ort  # noqa: E402
from onnxep import ort_compile  # noqa: E402
from onnxep._profile import parse_trace  # noqa: E402
from tests._util import run_threads  # noqa: E402

F = TensorProto.FLOAT


def _bytes(nodes, inputs, outputs, inits=(), opset=17):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString()


class _Inits:
    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.items = []

    def __call__(self, name, *shape, scale=0.2, offset=0.0):
        a = (self.rng.standard_normal(shape) * scale + offset).astype(np.float32)
        self.items.append(numpy_helper.from_array(a, name))
        return name


def _conv_chain(channels="C"):
    w = _Inits(1)
    nodes = [
        helper.make_node("Conv", ["x", w("w1", 8, 3, 3, 3), w("b1", 8)], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", w("w2", 8, 1, 3, 3)], ["c2"], pads=[1, 1, 1, 1], group=8),   # depthwise
        helper.make_node("Add", ["c2", "r1"], ["a2"]),
        helper.make_node("Conv", ["a2", w("w3", 16, 8, 1, 1), w("b3", 16)], ["c3"], strides=[2, 2]),
        helper.make_node("Relu", ["c3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["y"]),
    ]
    return _bytes(nodes, [helper.make_tensor_value_info("x", F, ["N", channels, 15, 17])],
                  [helper.make_tensor_value_info("y", F, None)], w.items)


def _transformer_block(d=32, heads=4):
    w = _Inits(2)
    hd = d // heads
    nodes = [
        helper.make_node("LayerNormalization", ["x", w("g0", d, offset=1.0), w("be0", d)], ["ln"], axis=-1),
        helper.make_node("MatMul", ["ln", w("wq", d, d)], ["q0"]),
        helper.make_node("MatMul", ["ln", w("wk", d, d)], ["k0"]),
        helper.make_node("MatMul", ["ln", w("wv", d, d)], ["v0"]),
    ]
    shape = numpy_helper.from_array(np.array([0, 0, heads, hd], np.int64), "hshape")
    back = numpy_helper.from_array(np.array([0, 0, d], np.int64), "bshape")
    scale = numpy_helper.from_array(np.array(1.0 / np.sqrt(hd), np.float32), "scale")
    for t in ("q", "k", "v"):
        nodes += [helper.make_node("Reshape", [t + "0", "hshape"], [t + "1"]),
                  helper.make_node("Transpose", [t + "1"], [t + "2"],
                                   perm=[0, 2, 3, 1] if t == "k" else [0, 2, 1, 3])]
    nodes += [
        helper.make_node("MatMul", ["q2", "k2"], ["s0"]),
        helper.make_node("Mul", ["s0", "scale"], ["s1"]),
        helper.make_node("Softmax", ["s1"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v2"], ["o0"]),
        helper.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["o1", "bshape"], ["o2"]),
        helper.make_node("MatMul", ["o2", w("wo", d, d)], ["o3"]),
        helper.make_node("Add", ["o3", "x"], ["h"]),
        helper.make_node("LayerNormalization", ["h", w("g1", d, offset=1.0), w("be1", d)], ["h1"], axis=-1),
        helper.make_node("MatMul", ["h1", w("w1", d, 4 * d)], ["f0"]),
        helper.make_node("Add", ["f0", w("bf", 4 * d)], ["f1"]),
        helper.make_node("Relu", ["f1"], ["f2"]),
        helper.make_node("MatMul", ["f2", w("w2", 4 * d, d)], ["f3"]),
        helper.make_node("Add", ["f3", "h"], ["y"]),
    ]
    return _bytes(nodes, [helper.make_tensor_value_info("x", F, ["B", "S", d])],
                  [helper.make_tensor_value_info("y", F, None)], w.items + [shape, back, scale])


def _split_model():
    """Two conv partitions with a float64 island between them (onnxep's compile path claims float32 only, so the
    Cast / float64 Relu / Cast nodes stay on the CPU EP)."""
    w = _Inits(3)
    nodes = [
        helper.make_node("Conv", ["x", w("w1", 4, 3, 3, 3)], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Cast", ["r1"], ["d0"], to=TensorProto.DOUBLE),
        helper.make_node("Sigmoid", ["d0"], ["d1"]),
        helper.make_node("Cast", ["d1"], ["f0"], to=F),
        helper.make_node("Conv", ["f0", w("w2", 4, 4, 3, 3), w("b2", 4)], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["y"]),
    ]
    return _bytes(nodes, [helper.make_tensor_value_info("x", F, ["N", 3, 12, 12])],
                  [helper.make_tensor_value_info("y", F, None)], w.items)


def _sessions(mb, profile=False):
    cpu = ort.InferenceSession(mb, providers=["CPUExecutionProvider"])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    if profile:
        so.enable_profiling = True
    plug = ort.InferenceSession(mb, sess_options=onnxep_ort.session_options(so, compile=1))
    return cpu, plug


def _rel(a, b):
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def _providers(sess):
    """{provider: the op types it ran}, from onnxruntime's profile (onnxep._profile.parse_trace)."""
    path = sess.end_profiling()
    kernels = parse_trace(path)["kernels"]
    os.remove(path)
    out = {}
    for k in kernels.values():
        out.setdefault(k["provider"], set()).add(k["op"])
    return out


def test_conv_chain_compiled_and_matches():
    mb = _conv_chain()
    cpu, plug = _sessions(mb, profile=True)
    x = np.random.default_rng(0).standard_normal((2, 3, 15, 17)).astype(np.float32)
    assert _rel(plug.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0]) <= 1e-4
    prov = _providers(plug)
    assert "onnxep" in prov, prov
    assert prov.get("CPUExecutionProvider", set()) == set(), prov      # the whole chain is one onnxep partition


def test_transformer_block_compiled_and_matches():
    mb = _transformer_block()
    cpu, plug = _sessions(mb, profile=True)
    x = np.random.default_rng(1).standard_normal((2, 7, 32)).astype(np.float32)
    assert _rel(plug.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0]) <= 1e-4
    assert "onnxep" in _providers(plug)


def test_dynamic_batch_two_signatures():
    mb = _conv_chain()
    cpu, plug = _sessions(mb)
    rng = np.random.default_rng(2)
    for n in (1, 3, 1, 3):
        x = rng.standard_normal((n, 3, 15, 17)).astype(np.float32)
        y = plug.run(None, {"x": x})[0]
        assert y.shape == (n, 16, 1, 1)
        assert _rel(y, cpu.run(None, {"x": x})[0]) <= 1e-4


def test_partition_boundaries_cpu_nodes_between():
    mb = _split_model()
    cpu, plug = _sessions(mb, profile=True)
    x = np.random.default_rng(3).standard_normal((2, 3, 12, 12)).astype(np.float32)
    assert _rel(plug.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0]) <= 1e-4
    prov = _providers(plug)
    assert "onnxep" in prov and "CPUExecutionProvider" in prov, prov
    assert "Sigmoid" in prov["CPUExecutionProvider"]


def test_capability_groups_are_convex_and_skip_tiny_islands():
    # a -> relu(b) -> c, with b unsupported: {a, c} must not be one group (it would make a cycle through b)
    vals = {n: (n, 1, [2, 2], None) for n in ("x", "a", "b", "c", "e")}
    descs = [
        {"op": "MatMul", "domain": "", "since": 13, "attrs": {}, "inputs": ["x", "x"], "outputs": ["a"], "name": ""},
        {"op": "NoSuchOp", "domain": "", "since": 1, "attrs": {}, "inputs": ["a"], "outputs": ["b"], "name": ""},
        {"op": "MatMul", "domain": "", "since": 13, "attrs": {}, "inputs": ["a", "b"], "outputs": ["c"], "name": ""},
        {"op": "Relu", "domain": "", "since": 14, "attrs": {}, "inputs": ["c"], "outputs": ["e"], "name": ""},
    ]
    groups = ort_compile.capability(descs, vals)
    assert sorted(map(sorted, groups)) == [[0], [2, 3]]
    # a lone Relu (no heavy op) is not claimed
    assert ort_compile.capability(descs[3:], vals) == []


def test_threads_share_one_session():
    mb = _conv_chain()
    cpu, plug = _sessions(mb)
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((k % 2 + 1, 3, 15, 17)).astype(np.float32) for k in range(4)]
    refs = [cpu.run(None, {"x": x})[0] for x in xs]

    def work(k):
        for _ in range(5):
            assert _rel(plug.run(None, {"x": xs[k]})[0], refs[k]) <= 1e-4

    run_threads(work, 4)


def test_kernel_error_is_an_onnxruntime_exception_and_session_survives():
    mb = _conv_chain()
    cpu, plug = _sessions(mb)
    bad = np.zeros((1, 5, 15, 17), np.float32)        # 5 channels against a 3-channel weight: fails inside onnxep
    with pytest.raises(Exception) as ei:
        plug.run(None, {"x": bad})
    assert "onnxep" in str(ei.value) or "Conv" in str(ei.value)
    x = np.random.default_rng(5).standard_normal((1, 3, 15, 17)).astype(np.float32)
    assert _rel(plug.run(None, {"x": x})[0], cpu.run(None, {"x": x})[0]) <= 1e-4


def test_default_session_options_compile():
    mb = _conv_chain()
    so = ort.SessionOptions()
    so.enable_profiling = True
    sess = ort.InferenceSession(mb, sess_options=onnxep_ort.session_options(so))     # compile=1 by default
    x = np.random.default_rng(6).standard_normal((1, 3, 15, 17)).astype(np.float32)
    ref = ort.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert _rel(sess.run(None, {"x": x})[0], ref) <= 1e-4
    prov = _providers(sess)
    assert set(prov) == {"onnxep"} and all(n.startswith("onnxep_") for n in prov["onnxep"]), prov
