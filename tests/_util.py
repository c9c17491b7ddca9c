"""Shared test helpers: build one-node models, run them through onnxep and the oracles."""
from __future__ import annotations

import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

import onnxep

_NP2ONNX = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
            np.dtype(np.int64): TensorProto.INT64, np.dtype(np.int32): TensorProto.INT32,
            np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.uint8): TensorProto.UINT8,
            np.dtype(np.int8): TensorProto.INT8, np.dtype(np.float16): TensorProto.FLOAT16}


def make_model(nodes, inputs: dict, outputs, opset=17, initializers: dict | None = None, ir_version=8,
               input_shapes=None):
    """nodes: NodeProtos; inputs: name -> example array (its dtype/shape declare the input); outputs: names.
    initializers: name -> array (constants). input_shapes: name -> declared shape (default: the example's)."""
    input_shapes = input_shapes or {}
    ins = [helper.make_tensor_value_info(n, _NP2ONNX[np.asarray(a).dtype], input_shapes.get(n, np.asarray(a).shape))
           for n, a in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(n) if isinstance(n, str) else n for n in outputs]
    inits = [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    g = helper.make_graph(nodes, "test", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    return m


def run_onnxep(model, feeds, **session_kwargs):
    sess = onnxep.InferenceSession(model.SerializeToString(), **session_kwargs)
    return sess.run(None, feeds), sess


def run_reference(model, feeds):
    """Oracle: onnx.reference.ReferenceEvaluator."""
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(model).run(None, feeds)


def run_ort(model, feeds):
    """Oracle: onnxruntime's CPU provider."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def assert_outputs_match(got, want, rtol=1e-5, atol=1e-6):
    """Same count, and per output the same dtype, shape and (float: close, else equal) values."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


def fallback_nodes(sess) -> list:
    """Names of nodes the session placed on the reference backend."""
    return [n for n, b in sess.node_assignment.items() if b != "cpu"]


def cpu_only_options():
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return so


def fallback_options(op_types="Neg"):
    """Session options that send `op_types` to the reference backend (so a test gets a cpu/reference boundary)."""
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", op_types)
    return so


def local_function_model():
    """x -> Relu -> a node of a model-local function (domain "local", body: Neg) -> y, x float32 (2, 3). No cpu kernel
    claims the function node; onnx.reference evaluates its body: a node that needs the reference fallback whatever
    the cpu backend's op coverage."""
    fn = helper.make_function("local", "Negate", ["v"], ["w"], [helper.make_node("Neg", ["v"], ["w"])],
                              [helper.make_opsetid("", 17)])
    m = make_model([helper.make_node("Relu", ["x"], ["a"]),
                    helper.make_node("Negate", ["a"], ["y"], name="fn", domain="local")],
                   {"x": np.zeros((2, 3), np.float32)}, ["y"])
    m.opset_import.append(helper.make_opsetid("local", 1))
    m.functions.append(fn)
    return m


def run_threads(work, n):
    """Run work(k) for k < n on n Python threads at once and wait for them; re-raise the first exception any raised
    (an assertion inside work fails the test as it would on the main thread)."""
    errors = []

    def guarded(k):
        try:
            work(k)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]


#: every native routine that packs a weight (an EPContext load must call none of them)
PACK_ROUTINES = ("conv_pack_weight", "sgemm_pack_b", "conv_nhwc_pack_weight", "dw_pack_weight_nhwc",
                 "conv_wino_pack_weight", "bgemm_pack_b", "qgemm_pack_b")


def count_packing(monkeypatch, calls: dict):
    """Counts into `calls` the kernels' prepack_weight ("prepack_weight") and every PACK_ROUTINES call ("pack");
    returns counting(key, fn), the wrapper, for the caller's other counters."""
    from onnxep import _kernels
    from onnxep.ops._packed import PackedWeightMixin

    def counting(key, fn):
        def wrapped(*a, **k):
            calls[key] = calls.get(key, 0) + 1
            return fn(*a, **k)
        return wrapped

    monkeypatch.setattr(PackedWeightMixin, "prepack_weight", counting("prepack_weight", PackedWeightMixin.prepack_weight))
    for fn in PACK_ROUTINES:
        if hasattr(_kernels, fn):
            monkeypatch.setattr(_kernels, fn, counting("pack", getattr(_kernels, fn)))
    return counting


def wait_for(cond, timeout=10.0) -> bool:
    """Polls cond() until it holds (True) or `timeout` seconds pass (False): e.g. a pool worker that has to wake or
    go to sleep first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.002)
    return cond()
