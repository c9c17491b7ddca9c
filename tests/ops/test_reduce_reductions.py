"""ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp,
ReduceSumSquare on the cpu backend: every dtype of the schemas, axes as an attribute (opset 13; 11 for ReduceSum) and
as an input (opset 18; 13 for ReduceSum), keepdims, noop_with_empty_axes, empty reductions, bad axes.

Oracles: onnx.reference.ReferenceEvaluator (float inputs; float16 / bfloat16 through the reference on the float32
copy, rounded), numpy (integer inputs: what onnxruntime computes -- integer arithmetic, float results truncated), and
onnxruntime (integer ReduceLogSum / ReduceLogSumExp, and the float32 LayerNorm-style sums)."""
import warnings

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import cpu_only_options, fallback_nodes, run_reference

OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
       "ReduceLogSumExp", "ReduceSumSquare")
INT_TYPES = ("int32", "int64", "uint32", "uint64")
AXES = [(None, 1), ([1], 0), ([-1, 0], 1), ([2], 1), ([0, 1, 2], 0)]


def input_version(op):
    """the first opset where axes is an input"""
    return 13 if op == "ReduceSum" else 18


def make(op, x, opset, axes=None, axes_const=True, **attrs):
    """One-node model; axes go to the attribute or to input 1 (an initializer, or a graph input when not
    axes_const) as the opset wants."""
    et = helper.np_dtype_to_tensor_dtype(np.dtype(x.dtype))
    ins = [helper.make_tensor_value_info("x", et, x.shape)]
    names, inits = ["x"], []
    if axes is not None:
        if opset >= input_version(op):
            names.append("axes")
            if axes_const:
                inits.append(onnx.numpy_helper.from_array(np.array(axes, np.int64), "axes"))
            else:
                ins.append(helper.make_tensor_value_info("axes", onnx.TensorProto.INT64, [None]))
        else:
            attrs["axes"] = axes
    node = helper.make_node(op, names, ["y"], name=f"{op.lower()}_0", **attrs)
    g = helper.make_graph([node], "t", ins, [helper.make_tensor_value_info("y", et, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def run_cpu(model, feeds):
    """onnxep with the fallback off; asserts every node ran on the cpu backend."""
    sess = onnxep.InferenceSession(model.SerializeToString(), cpu_only_options())
    assert fallback_nodes(sess) == []
    return sess.run(None, feeds)[0]


def data(dtype, op, shape=(3, 4, 5), seed=0):
    x = np.random.default_rng(seed).standard_normal(shape) * (0.7 if op == "ReduceProd" else 3)
    if op in ("ReduceLogSum",) or np.dtype(dtype).kind == "u":
        x = np.abs(x) + (0.1 if op == "ReduceLogSum" else 0)
    return x.astype(dtype)


def check(got, want, rtol=1e-5, atol=1e-6):
    want = np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.kind == "f" or got.dtype == ml_dtypes.bfloat16:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,dtype,version", [
    (op, t, v) for op in OPS for t in ("float32", "float64", "float16", "bfloat16") for v in ("attr", "input")
    if not (op, t, v) == ("ReduceSum", "bfloat16", "attr")])  # bfloat16 ReduceSum: opset 13, axes an input
def test_reduce_float(op, dtype, version):
    """Oracle: onnx.reference (float16 / bfloat16: on the float32 copy of the input, rounded to the dtype)."""
    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    x = data(dt, op)
    opset = input_version(op) if version == "input" else input_version(op) - 1 - (op != "ReduceSum") * 4
    narrow = dtype in ("float16", "bfloat16")
    for axes, keepdims in AXES:
        m = make(op, x, opset, axes, keepdims=keepdims)
        got = run_cpu(m, {"x": x})
        if narrow:
            m32 = make(op, x.astype(np.float32), opset, axes, keepdims=keepdims)
            want = run_reference(m32, {"x": x.astype(np.float32)})[0].astype(dt)
        else:
            want = run_reference(m, {"x": x})[0]
        tol = {"float16": 2e-3, "bfloat16": 1e-2}.get(dtype, 1e-5 if dtype == "float32" else 1e-12)
        check(got, want, rtol=tol, atol=tol)


def int_oracle(op, x, axes, keepdims):
    """Oracle: numpy, as onnxruntime computes integer reductions (integer arithmetic; Mean's quotient rounded toward
    zero; L2 / LogSum / LogSumExp in float64, truncated; LogSumExp's exp terms truncated before the sum)."""
    ax = None if axes is None else tuple(axes)
    kd = bool(keepdims)
    t = x.dtype
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if op == "ReduceSum":
            return np.sum(x, axis=ax, keepdims=kd, dtype=t)
        if op == "ReduceMean":
            s = np.sum(x, axis=ax, keepdims=kd, dtype=t).astype(np.float64)
            return np.trunc(s / (x.size // max(np.sum(x, axis=ax, keepdims=kd).size, 1))).astype(t)
        if op == "ReduceMax":
            return np.max(x, axis=ax, keepdims=kd)
        if op == "ReduceMin":
            return np.min(x, axis=ax, keepdims=kd)
        if op == "ReduceProd":
            return np.prod(x, axis=ax, keepdims=kd, dtype=t)
        if op == "ReduceL1":
            return np.sum(np.abs(x), axis=ax, keepdims=kd, dtype=t)
        if op == "ReduceSumSquare":
            return np.sum(x * x, axis=ax, keepdims=kd, dtype=t)
        if op == "ReduceL2":
            return np.sqrt(np.sum(x * x, axis=ax, keepdims=kd, dtype=t)).astype(t)
        if op == "ReduceLogSum":
            return np.log(np.sum(x, axis=ax, keepdims=kd, dtype=t)).astype(t)
        if op == "ReduceLogSumExp":
            m = np.max(x, axis=ax, keepdims=True).astype(np.float64)
            e = np.trunc(np.exp(x - m))
            return (np.log(np.sum(e, axis=ax, keepdims=True)) + m).reshape(np.sum(x, axis=ax, keepdims=kd).shape) \
                .astype(t)
    raise AssertionError(op)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", INT_TYPES)
def test_reduce_int(op, dtype):
    """Oracle: numpy (int_oracle)."""
    x = data(dtype, op)
    for version in ("attr", "input"):
        opset = input_version(op) if version == "input" else 11
        for axes, keepdims in AXES:
            got = run_cpu(make(op, x, opset, axes, keepdims=keepdims), {"x": x})
            check(got, int_oracle(op, x, axes, keepdims))


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_reduce_int_matches_onnxruntime(op, dtype):
    """Oracle: onnxruntime (its integer semantics: truncation, negative sums' log as the dtype's minimum)."""
    ort = pytest.importorskip("onnxruntime")
    x = data(dtype, "ReduceSum")   # signed values: negative sums for LogSum, negative quotients for Mean
    m = make(op, x, 17, [2], keepdims=1)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    check(run_cpu(m, {"x": x}), want)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", ["int8", "uint8", "bool", "float16"])
def test_reduce_max_min_small_types(op, dtype):
    """int8 / uint8 from opset 12, bool from opset 20 (False < True). Oracle: onnx.reference."""
    x = np.random.default_rng(1).integers(-5, 6, (3, 4, 5))
    x = (x > 2) if dtype == "bool" else np.abs(x).astype(dtype) if dtype == "uint8" else x.astype(dtype)
    for opset in ([20] if dtype == "bool" else [12, 18, 20]):
        for axes, keepdims in AXES:
            m = make(op, x, opset, axes, keepdims=keepdims)
            check(run_cpu(m, {"x": x}), run_reference(m, {"x": x})[0])


@pytest.mark.parametrize("op,dtype", [(op, t) for op in OPS for t in ("float32", "int64")] +
                         [("ReduceMax", "bool"), ("ReduceMin", "bool")])
@pytest.mark.parametrize("shape,axes", [((2, 0, 4), [1]), ((2, 0, 4), None), ((0, 3), [1]), ((0,), None)])
def test_reduce_empty_set(op, dtype, shape, axes):
    """Reductions over no elements give the reduction's identity: 0, 1, -inf / min, +inf / max, -inf for the logs;
    ReduceMean NaN for floats (as onnx.reference). Oracle: onnx.reference (integers: the spec's values)."""
    x = np.zeros(shape, dtype)
    m = make(op, x, 20 if dtype == "bool" else 18, axes, keepdims=1)
    got = run_cpu(m, {"x": x})
    if dtype == "int64" and op in ("ReduceMean", "ReduceLogSum", "ReduceLogSumExp"):
        # onnx.reference refuses integer logs; the empty mean of integers is 0, the logs the dtype's minimum (-inf)
        want = np.full(got.shape, 0 if op == "ReduceMean" else np.iinfo(np.int64).min, np.int64)
        want_shape = np.sum(x, axis=None if axes is None else tuple(axes), keepdims=True).shape
        assert got.shape == want_shape
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = run_reference(m, {"x": x})[0]
    if got.dtype.kind == "f":
        np.testing.assert_array_equal(got, want)   # NaN == NaN here
        assert got.dtype == want.dtype
    else:
        check(got, want)


def test_reduce_sum_empty_set_non_reduced_axis_zero():
    """An empty non-reduced axis: an empty output. Oracle: onnx.reference."""
    x = np.zeros((2, 0, 4), np.float32)
    m = make("ReduceSum", x, 13, [2], keepdims=1)
    check(run_cpu(m, {"x": x}), run_reference(m, {"x": x})[0])


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", [None, []])
def test_reduce_noop_with_empty_axes(op, axes):
    """noop_with_empty_axes=1 and no (or empty) axes: no reduction, but the pre/post-ops still apply (ReduceSumSquare
    squares, ReduceLogSum takes the log). Oracle: onnx.reference."""
    x = data(np.float32, op)
    m = make(op, x, input_version(op), axes, keepdims=0, noop_with_empty_axes=1)
    got = run_cpu(m, {"x": x})
    check(got, run_reference(m, {"x": x})[0])
    assert got.shape == x.shape


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceL2", "ReduceMax"])
def test_reduce_axes_from_a_graph_input(op):
    """axes fed at run time (not a constant): each run reduces over the axes it gets. Oracle: onnx.reference."""
    x = data(np.float32, op)
    m = make(op, x, input_version(op), [0], axes_const=False, keepdims=0)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    assert fallback_nodes(sess) == []
    for axes in ([0], [2, 1], [-1], []):
        a = np.array(axes, np.int64)
        check(sess.run(None, {"x": x, "axes": a})[0], run_reference(m, {"x": x, "axes": a})[0])


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceLogSumExp", "ReduceMax"])
def test_reduce_scalar_input(op):
    """A rank-0 input reduces to itself (for these ops). Oracle: numpy (x itself; onnx.reference fails on a scalar
    ReduceLogSumExp)."""
    x = np.array(1.5, np.float32)
    for opset in (input_version(op) - 1, input_version(op)):
        check(run_cpu(make(op, x, opset, None, keepdims=1), {"x": x}), x)


def test_reduce_log_sum_exp_is_stable():
    """Large, -inf and +inf entries: m + log(sum exp(x - m)) neither overflows nor makes NaN of inf - inf.
    Oracle: numpy (float64, the closed forms)."""
    x = np.array([[1000, 1000, -1000], [-np.inf, -np.inf, -np.inf], [np.inf, 1, 2], [-np.inf, 0, 0]], np.float32)
    got = run_cpu(make("ReduceLogSumExp", x, 18, [1], keepdims=0), {"x": x})
    np.testing.assert_allclose(got, [1000 + np.log(2), -np.inf, np.inf, np.log(2)], rtol=1e-6)
    assert got.dtype == np.float32


@pytest.mark.parametrize("op,opset", [("ReduceMean", 17), ("ReduceMean", 18), ("ReduceSum", 11), ("ReduceSum", 13)])
@pytest.mark.parametrize("axes", [[-1], [1], [1, 2]])
def test_reduce_float32_layernorm_sizes_match_onnxruntime(op, opset, axes):
    """float32 sums over a (1, 128, 768) activation (LayerNorm decompositions): float32 accumulation, as close to
    the exact (float64) result as onnxruntime's. Oracle: onnxruntime, and numpy in float64."""
    ort = pytest.importorskip("onnxruntime")
    x = (np.random.default_rng(3).standard_normal((1, 128, 768)) + 0.25).astype(np.float32)
    m = make(op, x, opset, axes, keepdims=1)
    got = run_cpu(m, {"x": x})
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    exact = (np.mean if op == "ReduceMean" else np.sum)(x.astype(np.float64), axis=tuple(axes), keepdims=True)
    # error bound of a float32 sum: a few eps * sum |x| (per output element), the same for both runtimes
    scale = np.sum(np.abs(x.astype(np.float64)), axis=tuple(axes), keepdims=True)
    if op == "ReduceMean":
        scale /= x.size // exact.size
    eps = np.finfo(np.float32).eps
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.all(np.abs(got - exact) <= 8 * eps * scale)
    assert np.all(np.abs(want - exact) <= 8 * eps * scale)
    np.testing.assert_allclose(got, want, rtol=0, atol=float(np.max(16 * eps * scale)))


@pytest.mark.parametrize("axes", [[3], [-4], [0, 0], [1, -2]])
def test_reduce_bad_axes_raise_and_session_survives(axes):
    """Oracle: none -- an axis out of range or repeated raises InvalidArgument naming the node; the next good run
    works."""
    x = data(np.float32, "ReduceSum")
    m = make("ReduceSum", x, 13, [0], axes_const=False, keepdims=1)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="reducesum_0"):
        sess.run(None, {"x": x, "axes": np.array(axes, np.int64)})
    check(sess.run(None, {"x": x, "axes": np.array([1], np.int64)})[0], np.sum(x, axis=1, keepdims=True))


def test_reduce_bad_axes_attribute_raises():
    """Oracle: none -- an attribute axis out of range raises InvalidArgument at run time, naming the node."""
    x = data(np.float32, "ReduceMean")
    m = make("ReduceMean", x, 13, [0], keepdims=1)
    m.graph.node[0].attribute[0].CopyFrom(helper.make_attribute("axes", [5]))
    try:
        sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    except Exception as e:  # shape inference may refuse the model first: also a clear, named error
        assert "axes" in str(e) or "axis" in str(e)
        return
    with pytest.raises(InvalidArgument, match="reducemean_0"):
        sess.run(None, {"x": x})
