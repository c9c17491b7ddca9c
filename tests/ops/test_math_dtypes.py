"""The any-dtype path of the elementwise math ops that have a native float32 kernel (Add, Sub, Mul, Div, Max, Min,
Sum, Neg, Abs, Exp, Sqrt, Erf, Tanh, Sigmoid, Relu, LeakyRelu, Clip), Softmax / LogSoftmax in float16 / float64, and
the helpers the other math test files share (any-dtype one-node models, oracle comparison).

Oracles: onnx.reference (every case), onnxruntime's CPU provider where it implements the op for the dtype (cases it
refuses are compared with onnx.reference only). Every session runs with session.disable_cpu_ep_fallback=1, so a node
the cpu backend refused would fail the test."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import cpu_only_options, fallback_nodes

FLOATS = (np.float16, np.float32, np.float64)
SIGNED = (np.int8, np.int16, np.int32, np.int64)
UNSIGNED = (np.uint8, np.uint16, np.uint32, np.uint64)
NUMERIC = FLOATS + SIGNED + UNSIGNED
BF16 = np.dtype(ml_dtypes.bfloat16)


def tensor_type(a):
    a = np.asarray(a)
    return TensorProto.STRING if a.dtype.kind in "OUS" else helper.np_dtype_to_tensor_dtype(a.dtype)


def one_node(op, feeds, opset, n_out=1, initializers=None, **attrs):
    """A one-node model whose inputs are declared with the feeds' dtypes and shapes ("" in feeds: omitted input)."""
    node = helper.make_node(op, list(feeds) + list(initializers or {}), [f"y{i}" for i in range(n_out)],
                            name=f"{op.lower()}_0", **attrs)
    ins = [helper.make_tensor_value_info(k, tensor_type(v), np.shape(v)) for k, v in feeds.items() if k]
    inits = [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    outs = [helper.make_empty_tensor_value_info(f"y{i}") for i in range(n_out)]
    g = helper.make_graph([node], "t", ins, outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def sample(dtype, shape, seed=0, low=None, high=None):
    """Random values of dtype: floats standard normal * 3; integers uniform in [low, high] (default: a range that
    leaves room for + and * without wrapping in the narrow types, negatives for the signed ones)."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f" or dt == BF16:
        return np.asarray((rng.standard_normal(shape) * 3).astype(dt))
    if dt.kind == "b":
        return np.asarray(rng.random(shape) < 0.5)
    lo = (0 if dt.kind == "u" else -9) if low is None else low
    hi = 9 if high is None else high
    return np.asarray(rng.integers(lo, hi + 1, size=shape).astype(dt))


def _same(got, want, rtol, atol, who):
    assert len(got) == len(want), who
    for g, w in zip(got, want):
        w = np.asarray(w)
        if w.dtype.kind in "US":
            w = w.astype(object)
        assert g.dtype == w.dtype, (who, g.dtype, w.dtype)
        assert g.shape == w.shape, (who, g.shape, w.shape)
        if g.dtype.kind == "f" or g.dtype == BF16:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       equal_nan=True, err_msg=who)
        else:
            np.testing.assert_array_equal(g, w, err_msg=who)


def tol(dtype):
    """(rtol, atol) per float type: a few ulp of the type."""
    return {np.dtype(np.float16): (4e-3, 2e-3), np.dtype(np.float32): (2e-6, 1e-6),
            BF16: (3e-2, 2e-2)}.get(np.dtype(dtype), (1e-12, 1e-14))


def check(op, feeds, opset, *, ort=True, ref=True, rtol=None, atol=None, initializers=None, n_out=1, **attrs):
    """Run the node on onnxep's cpu backend alone; compare with onnx.reference and (if `ort` and onnxruntime runs
    it) onnxruntime. Returns onnxep's outputs."""
    m = one_node(op, feeds, opset, n_out=n_out, initializers=initializers, **attrs)
    feeds = {k: v for k, v in feeds.items() if k}
    dt = next((np.asarray(v).dtype for v in feeds.values()), np.dtype(np.float32))
    r, a = tol(dt)
    rtol, atol = (r if rtol is None else rtol), (a if atol is None else atol)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    assert fallback_nodes(sess) == []
    got = sess.run(None, feeds)
    if ref:
        from onnx.reference import ReferenceEvaluator
        _same(got, ReferenceEvaluator(m).run(None, feeds), rtol, atol, "onnx.reference")
    if ort:
        import onnxruntime
        try:
            so = onnxruntime.SessionOptions()
            so.log_severity_level = 4
            want = onnxruntime.InferenceSession(m.SerializeToString(), so,
                                                providers=["CPUExecutionProvider"]).run(None, feeds)
        except Exception as e:
            # onnxruntime has no kernel for this op / dtype, or (1.32, some float16 activations) its own
            # graph rewrite breaks the model
            if not any(s in str(e) for s in ("NOT_IMPLEMENTED", "Could not find an implementation",
                                             "InsertedPrecisionFreeCast")):
                raise
        else:
            _same(got, want, rtol, atol, "onnxruntime")
    return got


SHAPES2 = [((2, 3, 4), (2, 3, 4)), ((3, 1, 5), (4, 1)), ((), (0, 3))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("sa,sb", SHAPES2)
def test_arith_dtypes(op, dtype, sa, sb):
    a = sample(dtype, sa, 1)
    b = sample(dtype, sb, 2, low=1) if op == "Div" else sample(dtype, sb, 2)
    if op == "Div" and np.dtype(dtype).kind == "i":
        b = b * np.where(sample(np.int8, sb, 3) < 0, -1, 1).astype(dtype)   # both signs, never 0
    check(op, {"a": a, "b": b}, 14)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.int8])
def test_int_div_truncates_toward_zero(dtype):
    """-7 / 2 = -3 (C), not -4 (floor). Oracles: onnx.reference, onnxruntime, and the literal values."""
    a = np.array([7, -7, 7, -7, 6, -6, 0, 1], dtype)
    b = np.array([2, 2, -2, -2, 3, -3, 5, -9], dtype)
    y, = check("Div", {"a": a, "b": b}, 14)
    np.testing.assert_array_equal(y, np.array([3, -3, -3, 3, 2, 2, 0, 0], dtype))


def test_int_div_by_zero_raises_and_session_survives():
    """Oracle: none -- an integer zero divisor is a named error naming the node; the next run works."""
    m = one_node("Div", {"a": np.ones(3, np.int64), "b": np.ones(3, np.int64)}, 14)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.InvalidArgument, match="div_0.*division by zero"):
        sess.run(None, {"a": np.ones(3, np.int64), "b": np.array([1, 0, 2], np.int64)})
    y, = sess.run(None, {"a": np.full(3, 4, np.int64), "b": np.array([1, 2, -4], np.int64)})
    np.testing.assert_array_equal(y, [4, 2, -1])


def test_binary_bad_shapes_raise_invalid_argument():
    """Oracle: none -- shapes that do not broadcast: InvalidArgument naming the node and both shapes."""
    m = one_node("Add", {"a": np.ones((2, 3), np.int32), "b": np.ones(3, np.int32)}, 14)
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    m.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "M"
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.InvalidArgument, match=r"add_0.*\(2, 3\), \(4,\)"):
        sess.run(None, {"a": np.ones((2, 3), np.int32), "b": np.ones(4, np.int32)})


@pytest.mark.parametrize("op,dtype", [(op, dt) for op in ("Max", "Min") for dt in NUMERIC] +
                         [("Sum", dt) for dt in FLOATS])
def test_variadic_dtypes(op, dtype):
    feeds = {"x0": sample(dtype, (2, 3, 4), 1), "x1": sample(dtype, (4,), 2), "x2": sample(dtype, (3, 1), 3)}
    check(op, feeds, 13)
    check(op, {"x0": feeds["x0"]}, 13)


def test_max_min_nan_propagates():
    x = np.array([1.0, np.nan, 3.0], np.float64)
    for op in ("Max", "Min"):
        check(op, {"a": x, "b": np.array([2.0, 0.0, np.nan])}, 13)


@pytest.mark.parametrize("op,dtypes", [("Neg", FLOATS + SIGNED), ("Abs", NUMERIC), ("Exp", FLOATS),
                                       ("Sqrt", FLOATS), ("Tanh", FLOATS), ("Sigmoid", FLOATS),
                                       ("Relu", FLOATS + SIGNED), ("LeakyRelu", FLOATS),
                                       ("Erf", (np.float16, np.float64))])
@pytest.mark.parametrize("shape", [(3, 7), (0,)])
def test_unary_dtypes(op, dtypes, shape):
    for dt in dtypes:
        x = sample(dt, shape, 4)
        if op == "Sqrt":
            x = np.abs(x)
        attrs = {"alpha": 0.2} if op == "LeakyRelu" else {}
        r = 1e-6 if op == "Erf" and dt == np.float64 else None   # onnx.reference's float64 Erf is float32's
        check(op, {"x": x}, 13 if op not in ("Relu", "LeakyRelu") else 16, rtol=r, atol=r, **attrs)


def test_sigmoid_extremes_float64():
    check("Sigmoid", {"x": np.array([-1000.0, -40.0, 0.0, 40.0, 1000.0, np.nan])}, 13)


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("bounds", [(None, None), (2, None), (None, 5), (1, 6), (6, 1)])
def test_clip_dtypes(dtype, bounds):
    """min > max gives max everywhere (onnxruntime, onnx.reference); an omitted bound is no bound."""
    lo, hi = bounds
    feeds = {"x": sample(dtype, (4, 5), 5, low=0)}
    if hi is not None:
        feeds["lo" if lo is not None else ""] = None if lo is None else np.array(lo, dtype)
        feeds["hi"] = np.array(hi, dtype)
    elif lo is not None:
        feeds["lo"] = np.array(lo, dtype)
    check("Clip", feeds, 13)


def test_clip_6_float64():
    check("Clip", {"x": sample(np.float64, (3, 4), 6)}, 6, min=-0.5, max=0.7)


SOFTMAX_CASES = [(opset, shape, axis) for opset in (11, 13) for shape, axis in
                 [((3, 5), -1), ((2, 3, 4), 1), ((2, 3, 4), 0), ((4, 6), 0)]]


def numpy_softmax(x, axis, coerce, log):
    """Oracle: numpy in float64, max subtracted, rounded to X's dtype once."""
    axis %= x.ndim
    x64 = x.astype(np.float64)
    if coerce:
        x64, ax = x64.reshape(int(np.prod(x.shape[:axis])), -1), 1
    else:
        ax = axis
    z = x64 - x64.max(axis=ax, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=ax, keepdims=True))
    return (z - lse if log else np.exp(z - lse)).reshape(x.shape).astype(x.dtype)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize("opset,shape,axis", SOFTMAX_CASES)
def test_softmax_dtypes(op, dtype, opset, shape, axis):
    """Oracles: numpy in float64 (every case); onnx.reference at opset 13 in float64 (onnx 1.23.2's applies the
    opset-13 semantics to opsets 1/11, and computes float16 LogSoftmax in float16, giving -inf where float32
    gives -14); onnxruntime where it has the kernel."""
    x = (sample(np.float64, shape, 7) * 3 + 20).astype(dtype)   # an offset: needs the max subtraction
    r, a = (5e-3, 5e-3) if dtype == np.float16 else (1e-12, 1e-14)
    got = check(op, {"x": x}, opset, ref=opset == 13 and dtype == np.float64, rtol=r, atol=a, axis=axis)
    _same(got, [numpy_softmax(x, axis, opset < 13, op == "LogSoftmax")], r, a, "numpy")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("opset,shape,axis", [(13, (3, 5), -1), (13, (2, 3, 4), 1), (13, (2, 3, 4), 0),
                                              (11, (2, 3, 4), 1), (1, (2, 3, 4), 0), (13, (0, 3), 1)])
def test_hardmax(dtype, opset, shape, axis):
    """Ties pick the first maximum. Oracles: numpy (argmax of the 2-D coercion at opsets 1/11, along the axis at
    13); onnx.reference and onnxruntime at opset 13 (onnxruntime has no float16/float64 Hardmax before 13)."""
    x = np.round(sample(np.float64, shape, 8)).astype(dtype)     # rounded: ties occur
    got = check("Hardmax", {"x": x}, opset, axis=axis, ref=opset == 13, ort=opset == 13)
    ax = axis % x.ndim
    outer = int(np.prod(x.shape[:ax]))
    x3 = x.reshape(outer, int(np.prod(x.shape[ax:])), 1) if opset < 13 else \
        x.reshape(outer, x.shape[ax], int(np.prod(x.shape[ax + 1:])))
    want = np.zeros_like(x3)
    if x3.size:
        np.put_along_axis(want, x3.argmax(axis=1)[:, None], 1, axis=1)
    _same(got, [want.reshape(x.shape)], 0, 0, "numpy")


LEGACY = [((2, 3), (3,), {"broadcast": 1}), ((2, 3), (2,), {"broadcast": 1, "axis": 0}),
          ((2, 3, 4), (3, 1), {"broadcast": 1, "axis": 1}), ((2, 3), (1, 3), {"broadcast": 1, "axis": 0}),
          ((2, 3), (2, 3), {}), ((2, 3, 4), (), {"broadcast": 1})]


@pytest.mark.parametrize("op,dtype", [(op, dt) for op in ("Add", "Sub", "Mul", "Div", "Pow")
                                      for dt in (np.float32, np.float64, np.int64) if op != "Pow" or dt != np.int64])
@pytest.mark.parametrize("sa,sb,attrs", LEGACY)
def test_opset6_broadcast_attribute(op, dtype, sa, sb, attrs):
    """Opset 6 (Pow: 1): B broadcasts to A only with broadcast=1, aligned at `axis`. Oracle: onnxruntime (onnx
    1.23.2's reference ignores `axis`), and numpy with B reshaped at `axis`."""
    a = sample(dtype, sa, 1, low=1)
    b = sample(dtype, sb, 2, low=1, high=3)
    if dtype != np.int64:
        a, b = np.abs(a) + 1, np.abs(b) + 1
    got = check(op, {"a": a, "b": b}, 6, ref=False, **attrs)
    axis = attrs.get("axis", len(sa) - len(sb))
    b2 = b.reshape((1,) * axis + b.shape + (1,) * (len(sa) - axis - len(sb)))
    fn = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide if dtype != np.int64 else
          np.floor_divide, "Pow": np.power}[op]
    _same(got, [fn(a, b2).astype(dtype)], 1e-6, 1e-6, "numpy")


def test_opset6_without_broadcast_needs_same_shapes():
    """Oracle: none -- InvalidArgument naming the node."""
    m = one_node("Add", {"a": np.ones((2, 3), np.float32), "b": np.ones(3, np.float32)}, 6)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.InvalidArgument, match="add_0.*broadcast"):
        sess.run(None, {"a": np.ones((2, 3), np.float32), "b": np.ones(3, np.float32)})


@pytest.mark.parametrize("x_shape,s_shape", [((2, 3, 4), (3,)), ((2, 3, 4, 5), (1,)), ((2, 4, 4), (4,))])
def test_prelu_opset6_per_channel(x_shape, s_shape):
    """A 1-D slope of C values is per channel (axis 1) at opset 6, as the PyTorch exporter wrote it. Oracles:
    onnxruntime, onnx.reference (which finds the channel dim the same way)."""
    check("PRelu", {"x": sample(np.float32, x_shape, 1), "s": sample(np.float32, s_shape, 2)}, 6)


MATMUL_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 3)), ((3, 4), (4,)),
                 ((4,), (4,)), ((0, 4), (4, 3)), ((3, 0), (0, 2))]


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul_dtypes(dtype, sa, sb):
    """float16 is multiplied in float32 (onnxruntime's MLAS accumulates in float32 too). onnxruntime 1.32 fails
    an unsigned product with K = 0 (a tensor type mismatch of its own): compared with onnx.reference only."""
    r = (2e-2, 2e-2) if dtype == np.float16 else (None, None)
    ort = not (sa[-1] == 0 and np.dtype(dtype).kind == "u")
    check("MatMul", {"a": sample(dtype, sa, 1), "b": sample(dtype, sb, 2)}, 13, rtol=r[0], atol=r[1], ort=ort)


@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", [None, (), (5,), (3, 1), (3, 5)])
def test_gemm_dtypes(dtype, ta, tb, c_shape):
    a = sample(dtype, (4, 3) if ta else (3, 4), 1)
    b = sample(dtype, (5, 4) if tb else (4, 5), 2)
    feeds = {"a": a, "b": b}
    if c_shape is not None:
        feeds["c"] = sample(dtype, c_shape, 3)
    integer = np.dtype(dtype).kind in "iu"
    r = (2e-2, 2e-2) if dtype == np.float16 else (None, None)
    check("Gemm", feeds, 13, rtol=r[0], atol=r[1], transA=ta, transB=tb, alpha=1.0 if integer else 0.5,
          beta=2.0 if integer else 1.5)


def test_gemm_opset6_broadcast():
    check("Gemm", {"a": sample(np.float32, (3, 4), 1), "b": sample(np.float32, (4, 5), 2),
                   "c": sample(np.float32, (5,), 3)}, 6, broadcast=1, rtol=1e-5)
    check("Gemm", {"a": sample(np.float64, (3, 4), 1), "b": sample(np.float64, (4, 5), 2),
                   "c": sample(np.float64, (3, 5), 3)}, 6)


def test_matmul_bad_shapes_raise():
    m = one_node("MatMul", {"a": np.ones((2, 3)), "b": np.ones((3, 2))}, 13)
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "K"
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.InvalidArgument, match="matmul_0.*inner"):
        sess.run(None, {"a": np.ones((2, 4)), "b": np.ones((3, 2))})


BF16_CASES = [("Add", 14, 2, {}), ("Sub", 14, 2, {}), ("Mul", 14, 2, {}), ("Div", 14, 2, {}), ("Max", 13, 3, {}),
              ("Min", 13, 2, {}), ("Sum", 13, 3, {}), ("Mean", 13, 2, {}), ("Neg", 13, 1, {}), ("Abs", 13, 1, {}),
              ("Exp", 13, 1, {}), ("Sqrt", 13, 1, {}), ("Tanh", 13, 1, {}), ("Sigmoid", 13, 1, {}),
              ("Relu", 14, 1, {}), ("LeakyRelu", 16, 1, {}), ("Erf", 13, 1, {}), ("Equal", 13, 2, {}),
              ("Less", 13, 2, {}), ("GreaterOrEqual", 16, 2, {}), ("IsNaN", 13, 1, {}), ("IsInf", 20, 1, {}),
              ("Sign", 13, 1, {}), ("Floor", 13, 1, {}), ("Reciprocal", 13, 1, {}), ("Sin", 22, 1, {}),
              ("Selu", 22, 1, {}), ("HardSwish", 22, 1, {}), ("Softplus", 22, 1, {}), ("PRelu", 16, 2, {}),
              ("Gelu", 20, 1, {}), ("Gelu", 20, 1, {"approximate": "tanh"}), ("Softmax", 13, 1, {}),
              ("LogSoftmax", 13, 1, {"axis": 0}), ("Hardmax", 13, 1, {}), ("MatMul", 13, 2, {}),
              ("Einsum", 28, 2, {"equation": "ij,j->i"}), ("Mod", 13, 2, {"fmod": 1}), ("Clip", 13, 1, {})]


@pytest.mark.parametrize("op,opset,n_in,attrs", BF16_CASES)
def test_bfloat16(op, opset, n_in, attrs):
    """bfloat16 runs the float32 code and rounds each output once. Oracles: onnx.reference (ml_dtypes ufuncs,
    rounding after every step: hence a tolerance of a few bfloat16 ulp) and numpy in float32 rounded once;
    onnxruntime where it has the kernel."""
    x = sample(BF16, (3, 4), 1)
    if op in ("Sqrt", "Reciprocal", "Mod"):
        x = np.abs(x) + BF16.type(0.5)
    feeds = {"x": x, "b": np.abs(sample(BF16, (4,), 2)) + BF16.type(0.5)} if n_in == 2 else {"x": x}
    if n_in == 3:
        feeds["c"] = sample(BF16, (3, 1), 3)
    check(op, feeds, opset, ort=False, **attrs)


def test_bfloat16_gemm_and_pow_mixed():
    a, b, c = sample(BF16, (3, 4), 1), sample(BF16, (5, 4), 2), sample(BF16, (5,), 3)
    got, = check("Gemm", {"a": a, "b": b, "c": c}, 13, ort=False, transB=1, alpha=0.5)
    want = (0.5 * a.astype(np.float32) @ b.astype(np.float32).T + c.astype(np.float32)).astype(BF16)   # numpy
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    base = np.abs(sample(BF16, (3, 4), 4)) + BF16.type(0.5)
    check("Pow", {"a": base, "e": sample(np.float32, (4,), 5)}, 15, ort=False)          # Z: bfloat16
    f32 = np.abs(sample(np.float32, (3, 4), 4)) + np.float32(0.5)
    y, = check("Pow", {"a": f32, "e": sample(BF16, (4,), 5)}, 15, ort=False, rtol=1e-5)  # Z: float32
    assert y.dtype == np.float32


@pytest.mark.parametrize("op", ["Add", "Div", "Max", "Sum", "Exp", "Sigmoid", "Relu", "LeakyRelu", "Clip",
                                "Softmax", "MatMul", "Gemm", "Erf"])
def test_float32_keeps_the_native_compute(op):
    """Oracle: none -- a float32 node's kernel runs its class's native compute (no per-node rebinding, no dtype
    test per call); a float64 / bfloat16 node gets its own."""
    from onnxep.backends.cpu.device import KernelInfo
    from onnxep.graph.ir import ValueType
    from onnxep.ops import _registry
    cls = _registry.lookup("", op, 13)
    for dt, rebound in ((np.float32, False), (np.float64, True), (BF16, True)):
        vt = ValueType.of_array(np.zeros((2, 2), dt))
        k = cls(KernelInfo("n", op, "", 13, {}, (vt, vt), (vt,), {}))
        assert ("compute" in k.__dict__) == rebound, (op, dt)
