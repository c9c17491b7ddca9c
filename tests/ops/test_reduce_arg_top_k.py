"""ArgMax, ArgMin (keepdims, negative axis, select_last_index) and TopK (k attribute / input, largest, sorted, ties)
on the cpu backend, in every dtype of their schemas.

Oracles: onnx.reference.ReferenceEvaluator (bfloat16 through the reference on the float32 copy), and onnxruntime
for TopK's tie order (equal values: the lower index first)."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import cpu_only_options, fallback_nodes, run_reference

ARG_TYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
             "uint64", "bfloat16")


def dtype_of(name):
    return ml_dtypes.bfloat16 if name == "bfloat16" else np.dtype(name)


def ties(dtype, shape=(3, 4, 5), seed=0):
    """small integers: many equal values along every axis"""
    return np.random.default_rng(seed).integers(0, 4, shape).astype(dtype_of(dtype))


def make(op, x, opset, k_in=None, k_input=None, outputs=("y",), **attrs):
    """One-node model; k_in: the TopK K input (an initializer, or a graph input with k_input)."""
    et = helper.np_dtype_to_tensor_dtype(np.dtype(x.dtype))
    ins = [helper.make_tensor_value_info("x", et, x.shape)]
    names, inits = ["x"], []
    if k_in is not None:
        names.append("k")
        if k_input:
            ins.append(helper.make_tensor_value_info("k", onnx.TensorProto.INT64, [1]))
        else:
            inits.append(onnx.numpy_helper.from_array(np.array([k_in], np.int64), "k"))
    node = helper.make_node(op, names, list(outputs), name=f"{op.lower()}_0", **attrs)
    outs = [helper.make_empty_tensor_value_info(o) for o in outputs]
    g = helper.make_graph([node], "t", ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def session(model):
    sess = onnxep.InferenceSession(model.SerializeToString(), cpu_only_options())
    assert fallback_nodes(sess) == []
    return sess


def reference(model, feeds, x):
    """Oracle: onnx.reference; a bfloat16 input goes through its float32 copy (values cast back)."""
    if x.dtype == ml_dtypes.bfloat16:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        m.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        out = run_reference(m, dict(feeds, x=x.astype(np.float32)))
        return [o.astype(x.dtype) if o.dtype == np.float32 else o for o in out]
    return run_reference(model, feeds)


def check(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", ARG_TYPES)
def test_arg_max_min(op, dtype):
    """Every axis (negative from opset 11), keepdims, select_last_index (opset 12+). Oracle: onnx.reference."""
    x = ties(dtype)
    for opset in ([13] if dtype == "bfloat16" else [1, 11, 12, 13]):
        for axis in range(-3 if opset >= 11 else 0, 3):
            for keepdims in (0, 1):
                for last in ((0, 1) if opset >= 12 else (None,)):
                    attrs = {"axis": axis, "keepdims": keepdims}
                    if last is not None:
                        attrs["select_last_index"] = last
                    m = make(op, x, opset, **attrs)
                    check(session(m).run(None, {"x": x}), reference(m, {"x": x}, x))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_default_axis_and_empty(op):
    """The default axis 0; an empty other axis gives an empty output. Oracle: onnx.reference."""
    for x in (np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32), np.zeros((3, 0), np.float32)):
        m = make(op, x, 13)
        check(session(m).run(None, {"x": x}), reference(m, {"x": x}, x))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_bad_input_raises(op):
    """Oracle: none -- no extreme along an empty axis; InvalidArgument naming the node, and the session still runs."""
    m = make(op, np.zeros((2, 3), np.float32), 13, axis=1)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "n"
    sess = session(m)
    with pytest.raises(InvalidArgument, match=f"{op.lower()}_0"):
        sess.run(None, {"x": np.zeros((2, 0), np.float32)})
    x = np.array([[1, 3, 3], [2, 0, 2]], np.float32)
    check(sess.run(None, {"x": x}), [(np.argmax if op == "ArgMax" else np.argmin)(x, axis=1, keepdims=True)])


TOPK_TYPES = {1: ("float16", "float32", "float64"), 10: ("float16", "float32", "float64"),
              11: ARG_TYPES[:-1], 24: ("bfloat16", "float32", "int64")}


@pytest.mark.parametrize("opset", [1, 10, 11, 24])
def test_top_k(opset):
    """k attribute (1) / input (10+), largest / smallest and negative axis (11+), with ties everywhere, in every dtype
    of the opset. Oracle: onnx.reference (ties: the lower index first)."""
    for dtype in TOPK_TYPES[opset]:
        x = ties(dtype)
        for axis in ((-1, 0, 1) if opset >= 11 else (2, 0, 1)):
            for k in ((1, 3, x.shape[axis]) if opset == 1 else (0, 1, 3, x.shape[axis])):  # opset 1: onnx's
                # shape inference types no output for k=0
                for largest in ((1, 0) if opset >= 11 else (None,)):
                    attrs = {"axis": axis}
                    if largest is not None:
                        attrs["largest"] = largest
                    if opset == 1:
                        attrs["k"] = k
                    m = make("TopK", x, opset, k_in=None if opset == 1 else k, outputs=("v", "i"), **attrs)
                    check(session(m).run(None, {"x": x}), reference(m, {"x": x}, x))


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint64", "int8"])
@pytest.mark.parametrize("largest", [1, 0])
def test_top_k_ties_match_onnxruntime(dtype, largest):
    """Oracle: onnxruntime -- among equal values the lower index comes first, largest and smallest."""
    ort = pytest.importorskip("onnxruntime")
    x = ties(dtype, (6, 50), seed=4)
    m = make("TopK", x, 11, k_in=7, outputs=("v", "i"), axis=1, largest=largest, sorted=1)
    try:
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    except Exception:  # a dtype onnxruntime has no TopK kernel for
        want = run_reference(m, {"x": x})
    check(session(m).run(None, {"x": x}), want)


def test_top_k_unsorted_is_a_valid_answer():
    """sorted=0 allows any order: the same set of (value, index) pairs as sorted=1. Oracle: onnx.reference."""
    x = np.random.default_rng(5).standard_normal((4, 9)).astype(np.float32)
    m = make("TopK", x, 11, k_in=4, outputs=("v", "i"), sorted=0)
    v, i = session(m).run(None, {"x": x})
    rv, ri = run_reference(make("TopK", x, 11, k_in=4, outputs=("v", "i")), {"x": x})
    for row in range(4):
        assert sorted(zip(i[row].tolist(), v[row].tolist())) == sorted(zip(ri[row].tolist(), rv[row].tolist()))


@pytest.mark.parametrize("k", [10 ** 12, 6, -1])
def test_top_k_bad_k_raises_before_allocating(k):
    """Oracle: none -- a k beyond the axis (a terabyte-sized output for 10**12) or negative raises InvalidArgument
    naming the node before any allocation; the session still runs afterwards."""
    x = np.random.default_rng(6).standard_normal((3, 5)).astype(np.float32)
    m = make("TopK", x, 11, k_in=1, k_input=True, outputs=("v", "i"))
    sess = session(m)
    with pytest.raises(InvalidArgument, match="topk_0"):
        sess.run(None, {"x": x, "k": np.array([k], np.int64)})
    v, i = sess.run(None, {"x": x, "k": np.array([2], np.int64)})
    check([v, i], run_reference(m, {"x": x, "k": np.array([2], np.int64)}))


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "float16"])
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [-1, 0])
def test_top_k_small_k_of_a_long_axis(dtype, largest, axis):
    """k much smaller than the axis takes the partition path (ties at the k-th value: the lowest indices); with NaN
    present it sorts fully. Oracle: onnx.reference."""
    rng = np.random.default_rng(7)
    shape = (600, 3) if axis == 0 else (3, 600)
    x = rng.integers(0, 40, shape).astype(dtype)   # many ties, also at the k-th value
    for k in (1, 17, 150):
        m = make("TopK", x, 11, k_in=k, outputs=("v", "i"), axis=axis, largest=largest)
        check(session(m).run(None, {"x": x}), run_reference(m, {"x": x}))
    if dtype == "float32":
        x = rng.standard_normal(shape).astype(np.float32)
        x[(slice(None), 1) if axis == -1 else (1, slice(None))] = np.nan   # one NaN per row: the full sort
        m = make("TopK", x, 11, k_in=5, outputs=("v", "i"), axis=axis, largest=largest)
        check(session(m).run(None, {"x": x}), run_reference(m, {"x": x}))
