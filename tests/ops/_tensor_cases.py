"""Helpers of the tensor-family tests (test_tensor_*.py): one-node models of any dtype (strings too), run through
onnxep with the fallback off, compared with onnx.reference and onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep

ALL = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
       np.uint64, np.bool_]


def elem_type(a) -> int:
    a = np.asarray(a)
    if a.dtype.kind in "OUS":
        return TensorProto.STRING
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def model(op, ins: dict, n_out=1, opset=18, const=(), dynamic=False, **attrs):
    """A one-node model. ins: the node's inputs in order, name -> array (None: an omitted optional input); the names
    in const become initializers, the others graph inputs (of symbolic dims when dynamic)."""
    node = helper.make_node(op, [n if v is not None else "" for n, v in ins.items()], [f"y{i}" for i in range(n_out)],
                            name=f"{op.lower()}_0", **attrs)
    inputs = [helper.make_tensor_value_info(n, elem_type(v), [f"{n}{d}" for d in range(np.ndim(v))] if dynamic
                                            else np.shape(v)) for n, v in ins.items()
              if v is not None and n not in const]
    init = [onnx.numpy_helper.from_array(np.asarray(ins[n]), n) for n in const]
    g = helper.make_graph([node], "t", inputs, [helper.make_empty_tensor_value_info(o) for o in node.output], init)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def feeds_of(ins, const=()):
    return {k: v for k, v in ins.items() if v is not None and k not in const}


def cpu_session(m):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return onnxep.InferenceSession(m.SerializeToString(), so)


def reference(m, feeds):
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(m).run(None, feeds)


def ort(m, feeds):
    """onnxruntime's outputs, or None when it has no kernel for this op and dtype."""
    ort_ = pytest.importorskip("onnxruntime")
    from onnxruntime.capi.onnxruntime_pybind11_state import NotImplemented as OrtNotImplemented
    so = ort_.SessionOptions()
    so.log_severity_level = 3
    try:
        s = ort_.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except OrtNotImplemented:
        return None
    return s.run(None, feeds)


def same(got, want, rtol=0, atol=0):
    """Same count, dtype (str arrays of the oracle as object), shape and values."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        if w.dtype.kind in "US":
            w = w.astype(object)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if g.dtype.kind == "f" and (rtol or atol):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


def check(op, ins, n_out=1, opset=18, const=(), with_ort=True, with_ref=True, rtol=0, atol=0, **attrs):
    """Oracles: onnx.reference when with_ref, and onnxruntime when with_ort (and it has the kernel). The node must run
    on onnxep's cpu backend (the fallback is off). Returns onnxep's outputs."""
    m = model(op, ins, n_out, opset, const, **attrs)
    feeds = feeds_of(ins, const)
    got = cpu_session(m).run(None, feeds)
    if with_ref:
        same(got, reference(m, feeds), rtol, atol)
    want = ort(m, feeds) if with_ort else None
    if want is not None:
        same(got, want, rtol, atol)
    return got


def data(shape, dtype, seed=0):
    """Values of every dtype: small signed/unsigned ints, floats with fractions, bools, strings."""
    rng = np.random.default_rng(seed)
    if dtype is object or dtype is str:
        return np.array(["s%d" % v for v in rng.integers(0, 100, size=shape).reshape(-1)], object).reshape(shape)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    if dt.kind == "f":
        return np.asarray(rng.standard_normal(shape) * 4).astype(dt)
    lo = 0 if dt.kind == "u" else -50
    return np.asarray(rng.integers(lo, 50, size=shape)).astype(dt)
