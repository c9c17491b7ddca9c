"""onnxep as an onnxruntime plugin EP, run inside the installed onnxruntime (>= 1.24).

Oracle: onnxruntime's CPU EP alone on the same model and feeds. The plugin claims the elementwise float32 nodes it has
kernels for (and MatMul with a constant 2-D B); onnxruntime's CPU EP runs the rest (a three-input Max here).
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

def _model_bytes(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10          # onnx writes a newer IR by default than some onnxruntime releases read
    return m.SerializeToString()


def _mixed_model():
    """Supported elementwise ops with broadcasting and a Softmax, a MatMul with a constant B, around a node the plugin
    does not claim (a three-input Max)."""
    rng = np.random.default_rng(0)
    f = TensorProto.FLOAT
    bias = numpy_helper.from_array(rng.standard_normal((1, 8, 1, 1)).astype(np.float32), "bias")
    scale = numpy_helper.from_array((rng.random((16,)) + 0.5).astype(np.float32), "scale")
    w = numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    nodes = [
        helper.make_node("Add", ["x", "bias"], ["a0"]),                     # channel broadcast
        helper.make_node("Relu", ["a0"], ["a1"]),
        helper.make_node("Mul", ["a1", "scale"], ["a2"]),                   # trailing broadcast
        helper.make_node("Softmax", ["a2"], ["a3"], axis=-1),
        helper.make_node("Sigmoid", ["a2"], ["b0"]),
        helper.make_node("Sub", ["a3", "b0"], ["b1"]),
        helper.make_node("LeakyRelu", ["b1"], ["b2"], alpha=0.2),
        helper.make_node("HardSigmoid", ["b2"], ["b3"], alpha=0.3, beta=0.4),
        helper.make_node("Max", ["b3", "b1"], ["b4"]),
        helper.make_node("Max", ["b3", "b1", "a3"], ["b5"]),                # three inputs: CPU EP
        helper.make_node("MatMul", ["b5", "w"], ["c0"]),                    # constant B: onnxep
        helper.make_node("Tanh", ["c0"], ["c1"]),
        helper.make_node("Div", ["c1", "two"], ["c2"]),                     # scalar broadcast
        helper.make_node("Abs", ["c2"], ["c3"]),
        helper.make_node("Sqrt", ["c3"], ["c4"]),
        helper.make_node("Exp", ["b4"], ["c5"]),
        helper.make_node("Min", ["c4", "c5"], ["c6"]),
        helper.make_node("HardSwish", ["c6"], ["c7"]),
        helper.make_node("Neg", ["c7"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", f, ["N", 8, 5, 16])
    y = helper.make_tensor_value_info("y", f, None)
    return _model_bytes(nodes, [x], [y], [bias, scale, w, two])


def _cpu_session(model):
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"])


def _plugin_session(model, profile=False):
    so = onnxep_ort.session_options(compile=0)
    if profile:
        so.enable_profiling = True
    return ort.InferenceSession(model, so)


def test_library_and_devices():
    path = onnxep_ort.library_path()
    assert os.path.exists(path) and "_kernels_" in os.path.basename(path)
    onnxep_ort.register()
    onnxep_ort.register()                   # idempotent
    devs = onnxep_ort.devices()
    assert len(devs) == 1 and devs[0].ep_name == "onnxep"


def test_mixed_model_matches_cpu_ep():
    model = _mixed_model()
    x = np.random.default_rng(1).standard_normal((3, 8, 5, 16)).astype(np.float32)
    ref = _cpu_session(model).run(None, {"x": x})[0]
    got = _plugin_session(model).run(None, {"x": x})[0]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


def test_profiler_shows_nodes_on_onnxep():
    model = _mixed_model()
    sess = _plugin_session(model, profile=True)
    x = np.random.default_rng(2).standard_normal((2, 8, 5, 16)).astype(np.float32)
    sess.run(None, {"x": x})
    path = sess.end_profiling()
    try:
        events = json.load(open(path))
    finally:
        os.remove(path)
    providers = {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            args = e.get("args", {})
            providers[args.get("op_name")] = providers.get(args.get("op_name"), set()) | {args.get("provider")}
    assert providers, "no node events in the profile"
    for op in ("Relu", "Add", "Sigmoid", "Tanh", "HardSwish", "Softmax"):
        assert providers[op] == {"onnxep"}, (op, providers[op])
    assert providers["MatMul"] == {"onnxep"}       # constant 2-D B: onnxep's packed SGEMM
    assert providers["Max"] == {"onnxep", "CPUExecutionProvider"}   # two inputs: onnxep; three: the CPU EP


def test_kernel_error_is_an_onnxruntime_exception_and_session_survives():
    """Symbolic dims let shapes that do not broadcast reach the kernel: its OrtStatus comes back as an exception."""
    f = TensorProto.FLOAT
    model = _model_bytes([helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
                         [helper.make_tensor_value_info("a", f, ["N", "K"]),
                          helper.make_tensor_value_info("b", f, ["M", "L"])],
                         [helper.make_tensor_value_info("y", f, None)])
    sess = _plugin_session(model)
    a = np.ones((2, 3), np.float32)
    with pytest.raises(Exception, match="broadcast"):
        sess.run(None, {"a": a, "b": np.ones((2, 4), np.float32)})
    b = np.arange(3, dtype=np.float32) - 1
    np.testing.assert_array_equal(sess.run(None, {"a": a, "b": b[None, :]})[0], np.maximum(a + b, 0))


def test_sessions_from_several_threads():
    model = _mixed_model()
    sess = _plugin_session(model)
    ref_sess = _cpu_session(model)
    xs = [np.random.default_rng(10 + i).standard_normal((2, 8, 5, 16)).astype(np.float32) for i in range(4)]
    refs = [ref_sess.run(None, {"x": x})[0] for x in xs]

    def work(i):
        for _ in range(5):
            np.testing.assert_allclose(sess.run(None, {"x": xs[i]})[0], refs[i], rtol=1e-5, atol=1e-6)

    run_threads(work, 4)


@pytest.mark.parametrize("shape_a,shape_b", [((), ()), ((1, 1), ()), ((7,), (7,)), ((1,), (5, 1)), ((4, 1, 3), (2, 1)), ((0, 3), (3,)),
                                             ((2, 3, 4, 5), (3, 1, 1)), ((33, 1025), (1025,))])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary_broadcast_shapes(op, shape_a, shape_b):
    f = TensorProto.FLOAT
    model = _model_bytes([helper.make_node(op, ["a", "b"], ["y"])],
                         [helper.make_tensor_value_info("a", f, list(shape_a)),
                          helper.make_tensor_value_info("b", f, list(shape_b))],
                         [helper.make_tensor_value_info("y", f, None)])
    rng = np.random.default_rng(3)
    feeds = {"a": np.asarray(rng.standard_normal(shape_a), np.float32),
             "b": np.asarray(rng.random(shape_b) + 0.5, np.float32)}
    ref = _cpu_session(model).run(None, feeds)[0]
    got = _plugin_session(model).run(None, feeds)[0]
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=0)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis", [-1, 0, 1, 3])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_axes_and_opsets(op, axis, opset):
    """Opset 13 normalises along `axis` alone; before 13 over the 2-D flattening at `axis`."""
    f = TensorProto.FLOAT
    model = _model_bytes([helper.make_node(op, ["x"], ["y"], axis=axis)],
                         [helper.make_tensor_value_info("x", f, [2, 3, 4, 5])],
                         [helper.make_tensor_value_info("y", f, None)], opset=opset)
    x = (np.random.default_rng(4).standard_normal((2, 3, 4, 5)) * 3).astype(np.float32)
    ref = _cpu_session(model).run(None, {"x": x})[0]
    got = _plugin_session(model).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("intra", [1, 2])
def test_large_ops_on_onnxruntime_pool(intra):
    """Work above the parallel thresholds runs its items through KernelContext_ParallelFor (onnxruntime's intra-op
    pool; none at 1 thread): results as the CPU EP's at both sizes."""
    f = TensorProto.FLOAT
    model = _model_bytes([helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Sigmoid", ["s"], ["t"]),
                          helper.make_node("Softmax", ["t"], ["y"], axis=-1)],
                         [helper.make_tensor_value_info("a", f, [64, 96, 97]),
                          helper.make_tensor_value_info("b", f, [96, 1])],
                         [helper.make_tensor_value_info("y", f, None)])
    rng = np.random.default_rng(5)
    feeds = {"a": rng.standard_normal((64, 96, 97)).astype(np.float32),
             "b": rng.standard_normal((96, 1)).astype(np.float32)}
    so = ort.SessionOptions()
    so.intra_op_num_threads = intra
    got = ort.InferenceSession(model, onnxep_ort.session_options(so, compile=0)).run(None, feeds)[0]
    ref = _cpu_session(model).run(None, feeds)[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-7)
