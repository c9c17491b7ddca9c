"""The quantization family (onnxep/ops/quant): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger,
ConvInteger, QLinearMatMul, QLinearConv, run with the fallback off (every node on the cpu backend).

Oracles: onnxruntime (run_ort) wherever it runs the case -- compared exactly, integer outputs bit for bit and float
outputs to the last bit; onnx.reference for the types onnxruntime's Python API cannot return or does not implement
(int4 / uint4 / int2 / uint2, float8 e5m2 and the fnuz types, float4e2m1, float8e8m0 scales, output_dtype and precision
of opsets 23-25); numpy (exact int64 sums) for the int32 accumulation of long reductions."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T, helper, numpy_helper

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests._util import cpu_only_options, fallback_nodes, run_ort, run_reference

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _seeded():
    """The same data for a test whichever tests run before it."""
    global RNG
    RNG = np.random.default_rng(0)


def _tt(dt):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dt))


def _model(op, inputs, outputs, opset, attrs=None, inits=None):
    """inputs: [(name, dtype, shape)] (name "" for an omitted optional input); outputs: [(name, dtype or None)];
    inits: name -> array (constant inputs)."""
    inits = inits or {}
    node = helper.make_node(op, [n for n, _, _ in inputs], [n for n, _ in outputs], **(attrs or {}))
    ins = [helper.make_tensor_value_info(n, _tt(d), s) for n, d, s in inputs if n and n not in inits]
    outs = [helper.make_tensor_value_info(n, _tt(d), None) if d is not None else helper.make_empty_tensor_value_info(n)
            for n, d in outputs]
    g = helper.make_graph([node], "q", ins, outs, [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True)   # a malformed test model fails here
    return m


def _ep(m, feeds):
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    assert fallback_nodes(sess) == []
    return sess.run(None, feeds)


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if g.dtype != w.dtype and w.dtype == np.uint8 and g.dtype.itemsize == 1:
            g = g.view(np.uint8)   # onnxruntime returns float8e4m3fn as its raw bytes
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        if g.dtype.itemsize == 1 and g.dtype.kind not in "iub":
            g, w = g.view(np.uint8), w.view(np.uint8)   # exotic types: bit for bit (NaN patterns included)
        np.testing.assert_array_equal(g, w)


def _check(m, feeds, oracle="ort"):
    got = _ep(m, feeds)
    _same(got, run_ort(m, feeds) if oracle == "ort" else run_reference(m, feeds))
    return got


def _x(shape=(3, 4, 5), scale=4.0):
    x = (RNG.standard_normal(shape) * scale).astype(np.float32)
    x.flat[:6] = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5]          # ties: round half to even
    x.flat[6:8] = [3e5, -3e5]                                # saturation (within int32: onnx.reference casts)
    return x


def _ints(dt, shape):
    info = ml_dtypes.iinfo(dt)
    return RNG.integers(int(info.min), int(info.max) + 1, shape).astype(np.int64).astype(dt)


# ------------------------------------------------------------------------------------------------ QuantizeLinear
@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23, 25])
@pytest.mark.parametrize("zt", [np.uint8, np.int8])
def test_quantize_per_tensor(opset, zt):
    x = _x()
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, []), ("z", zt, [])], [("y", zt)],
               opset, inits={"s": np.float32(0.5), "z": zt(3)})
    _check(m, {"x": x})


@pytest.mark.parametrize("opset", [10, 19])
def test_quantize_no_zero_point_is_uint8(opset):
    x = _x()
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, [])], [("y", np.uint8)], opset,
               inits={"s": np.float32(0.25)})
    assert _check(m, {"x": x})[0].dtype == np.uint8


@pytest.mark.parametrize("opset", [13, 19, 21])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_per_axis(opset, axis):
    x = _x()
    d = x.shape[axis]
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, [d]), ("z", np.int8, [d])],
               [("y", np.int8)], opset, {"axis": axis},
               inits={"s": (RNG.random(d) + 0.1).astype(np.float32), "z": RNG.integers(-5, 5, d).astype(np.int8)})
    _check(m, {"x": x})


@pytest.mark.parametrize("zt", [np.int16, np.uint16])
def test_quantize_16bit(zt):
    x = _x(scale=20000)
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, []), ("z", zt, [])], [("y", zt)], 21,
               inits={"s": np.float32(0.5), "z": zt(1000)})
    _check(m, {"x": x})


@pytest.mark.parametrize("zt,oracle", [(np.uint8, "ort"), (np.int8, "ort"), (ml_dtypes.int4, "ref"),
                                       (ml_dtypes.uint4, "ref")])
@pytest.mark.parametrize("block,shape", [(4, (4, 2)), (3, (4, 2)), (2, (4, 3))])   # 3 into 6: an even split
def test_quantize_blocked(zt, oracle, block, shape):
    x = _x((4, 6), 3)
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, shape), ("z", zt, shape)], [("y", zt)],
               21, {"axis": 1, "block_size": block},
               inits={"s": (RNG.random(shape) + 0.1).astype(np.float32), "z": RNG.integers(0, 3, shape).astype(zt)})
    _check(m, {"x": x}, oracle)


@pytest.mark.parametrize("zt,opset", [(ml_dtypes.int4, 21), (ml_dtypes.uint4, 21), (ml_dtypes.int2, 25),
                                      (ml_dtypes.uint2, 25)])
def test_quantize_subbyte(zt, opset):
    x = _x()
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, []), ("z", zt, [])], [("y", zt)],
               opset, inits={"s": np.float32(0.7), "z": np.asarray(1, zt)})
    _check(m, {"x": x}, "ref")


F8 = [ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz]


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("zt", F8)
@pytest.mark.parametrize("opset", [19, 21, 23])
def test_quantize_float8(zt, saturate, opset):
    x = _x(scale=300)
    x.flat[8:11] = [np.nan, np.inf, -np.inf]
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, []), ("z", zt, [])], [("y", zt)],
               opset, {"saturate": saturate}, inits={"s": np.float32(0.5), "z": np.asarray(0, zt)})
    # onnxruntime (float8e4m3fn only) clamps |x| in (448, 512) to 448 even with saturate=0, where the spec (and
    # onnx.reference) give NaN: it is the oracle for saturate=1 only
    _check(m, {"x": x}, "ort" if zt == ml_dtypes.float8_e4m3fn and saturate else "ref")


def test_quantize_float4():
    x = _x(scale=5)
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, []),
                                  ("z", ml_dtypes.float4_e2m1fn, [])], [("y", ml_dtypes.float4_e2m1fn)], 23,
               inits={"s": np.float32(0.5), "z": np.asarray(0, ml_dtypes.float4_e2m1fn)})
    _check(m, {"x": x}, "ref")


@pytest.mark.parametrize("opset", [19, 21, 23])
def test_quantize_float16(opset):
    """float16 x and scale. Opsets 19-21 do not say in which precision x / scale is computed: float32, as
    onnxruntime. From opset 23 the scale's type sets it (float16): onnx.reference, which follows the spec."""
    x = _x().astype(np.float16)
    x.flat[6:10] = [300, -300, 7.35, 6.152]     # the last two: a float16 quotient ties, the float32 one does not
    m = _model("QuantizeLinear", [("x", np.float16, x.shape), ("s", np.float16, []), ("z", np.uint8, [])],
               [("y", np.uint8)], opset, inits={"s": np.float16(0.3), "z": np.uint8(3)})
    y = _check(m, {"x": x}, "ort" if opset < 23 else "ref")[0]
    assert list(y.flat[8:10]) == ([28, 24] if opset < 23 else [27, 23])


@pytest.mark.parametrize("od", [T.INT8, T.UINT16, T.INT4, T.FLOAT8E5M2])
def test_quantize_output_dtype(od):
    """output_dtype without a zero point (opset 21): the output type comes from the attribute."""
    x = _x()
    dt = helper.tensor_dtype_to_np_dtype(od)
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, [])], [("y", dt)], 21,
               {"output_dtype": od}, inits={"s": np.float32(0.5)})
    assert _check(m, {"x": x}, "ref")[0].dtype == dt


def test_quantize_precision():
    """precision=FLOAT16 (opset 23): x / scale is rounded to float16 before rounding to an integer."""
    x = np.array([1000.6, 1001.4, 2047.0, 0.333, -5.5], np.float32)
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, []), ("z", np.int16, [])],
               [("y", np.int16)], 23, {"precision": T.FLOAT16}, inits={"s": np.float32(0.1), "z": np.int16(0)})
    got = _check(m, {"x": x}, "ref")[0]
    want = np.rint((x.astype(np.float16) / np.float16(0.1)).astype(np.float32)).astype(np.int16)
    np.testing.assert_array_equal(got, want)


def test_quantize_int32_input():
    """int32 x (T1 allows it) with a float32 scale. onnxruntime has no int32 kernel: onnx.reference."""
    x = np.array([1, 3, 5, -7, 1000, -1000], np.int32)
    m = _model("QuantizeLinear", [("x", np.int32, x.shape), ("s", np.float32, []), ("z", np.int8, [])],
               [("y", np.int8)], 13, inits={"s": np.float32(2), "z": np.int8(3)})
    _check(m, {"x": x}, "ref")


# ---------------------------------------------------------------------------------------------- DequantizeLinear
@pytest.mark.parametrize("opset,xt", [(o, t) for o in (10, 13, 19, 21, 23, 25) for t in (np.uint8, np.int8, np.int32)]
                         + [(o, t) for o in (21, 23, 25) for t in (np.int16, np.uint16)])
def test_dequantize(opset, xt):
    x = _ints(xt, (3, 4, 5))
    if opset < 13:
        m = _model("DequantizeLinear", [("x", xt, x.shape), ("s", np.float32, []), ("z", xt, [])],
                   [("y", np.float32)], opset, inits={"s": np.float32(0.37), "z": np.asarray(3, xt)})
    else:
        m = _model("DequantizeLinear", [("x", xt, x.shape), ("s", np.float32, [4]), ("z", xt, [4])],
                   [("y", np.float32)], opset, {"axis": 1},
                   inits={"s": np.array([0.5, 0.1, 3, 1e-3], np.float32), "z": np.array([3, 1, 0, 7], xt)})
    _check(m, {"x": x})


@pytest.mark.parametrize("st", [np.float32, np.float16])
@pytest.mark.parametrize("axis,block,shape", [(1, 3, (4, 2)), (1, 4, (4, 2)), (0, 2, (2, 6))])
def test_dequantize_blocked(st, axis, block, shape):
    x = _ints(np.uint8, (4, 6))
    m = _model("DequantizeLinear", [("x", np.uint8, x.shape), ("s", st, shape), ("z", np.uint8, shape)], [("y", st)],
               21, {"axis": axis, "block_size": block},
               inits={"s": (RNG.random(shape) + 0.1).astype(st), "z": _ints(np.uint8, shape)})
    _check(m, {"x": x})


@pytest.mark.parametrize("xt,opset", [(ml_dtypes.int4, 21), (ml_dtypes.uint4, 21), (ml_dtypes.int2, 25),
                                      (ml_dtypes.uint2, 25)])
def test_dequantize_subbyte(xt, opset):
    x = _ints(xt, (4, 6))
    m = _model("DequantizeLinear", [("x", xt, x.shape), ("s", np.float32, [4, 3]), ("z", xt, [4, 3])],
               [("y", np.float32)], opset, {"axis": 1, "block_size": 2},
               inits={"s": (RNG.random((4, 3)) + 0.1).astype(np.float32), "z": _ints(xt, (4, 3))})
    _check(m, {"x": x}, "ref")


@pytest.mark.parametrize("xt", F8 + [ml_dtypes.float4_e2m1fn])
def test_dequantize_float8_float4(xt):
    x = RNG.integers(0, 256, (3, 5)).astype(np.uint8)
    if xt == ml_dtypes.float4_e2m1fn:
        x &= 0x0F
    x = x.view(xt)
    st = np.float16 if xt == ml_dtypes.float8_e5m2 else np.float32
    m = _model("DequantizeLinear", [("x", xt, x.shape), ("s", st, [])], [("y", st)], 23, inits={"s": st(2.5)})
    _check(m, {"x": x}, "ref")


@pytest.mark.parametrize("od", [T.FLOAT, T.FLOAT16, T.BFLOAT16])
def test_dequantize_output_dtype(od):
    x = _ints(np.int8, (3, 5))
    dt = helper.tensor_dtype_to_np_dtype(od)
    m = _model("DequantizeLinear", [("x", np.int8, x.shape), ("s", np.float32, []), ("z", np.int8, [])], [("y", dt)],
               23, {"output_dtype": od}, inits={"s": np.float32(0.31), "z": np.int8(-2)})
    assert _check(m, {"x": x}, "ref")[0].dtype == dt


def test_dequantize_e8m0_scale():
    """float8e8m0 scales (opset 24, powers of two) with output_dtype float32."""
    x = _ints(np.int8, (2, 6))
    s = np.array([[120, 127], [130, 135]], np.uint8).view(ml_dtypes.float8_e8m0fnu)   # 2**-7, 1, 8, 256
    m = _model("DequantizeLinear", [("x", np.int8, x.shape), ("s", ml_dtypes.float8_e8m0fnu, [2, 2])],
               [("y", np.float32)], 24, {"axis": 1, "block_size": 3, "output_dtype": T.FLOAT}, inits={"s": s})
    got = _check(m, {"x": x}, "ref")[0]
    np.testing.assert_array_equal(got, x * np.repeat(s.astype(np.float32), 3, axis=1))


# ----------------------------------------------------------------------------------------- DynamicQuantizeLinear
@pytest.mark.parametrize("x", [_x((3, 7)), np.zeros((2, 3), np.float32), np.full((2, 3), 2.5, np.float32),
                               -np.arange(6, dtype=np.float32), np.zeros((0, 4), np.float32)],
                         ids=["random", "zeros", "positive", "negative", "empty"])
def test_dynamic_quantize(x):
    m = _model("DynamicQuantizeLinear", [("x", np.float32, x.shape)],
               [("y", np.uint8), ("s", np.float32), ("z", np.uint8)], 11)
    _check(m, {"x": x})


# ----------------------------------------------------------------------------------------------- MatMulInteger
@pytest.mark.parametrize("ta,tb", [(np.uint8, np.uint8), (np.int8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("ashape,bshape,bz", [((2, 5, 30), (30, 7), [7]), ((5, 30), (2, 30, 7), []),
                                               ((30,), (30, 7), [7]), ((4, 30), (30,), []),
                                               ((1, 3, 5, 8), (2, 1, 8, 4), [])])
def test_mat_mul_integer(ta, tb, ashape, bshape, bz):
    A, B = _ints(ta, ashape), _ints(tb, bshape)
    m = _model("MatMulInteger", [("A", ta, ashape), ("B", tb, bshape), ("az", ta, []), ("bz", tb, bz)],
               [("Y", np.int32)], 10, inits={"az": np.asarray(3, ta), "bz": _ints(tb, bz)})
    _check(m, {"A": A, "B": B})


def test_mat_mul_integer_per_row_zero_point():
    """a_zero_point per row of A (onnxruntime accepts only a scalar, onnx.reference fails on it: numpy)."""
    A, B, az = _ints(np.uint8, (5, 9)), _ints(np.uint8, (9, 3)), _ints(np.uint8, (5,))
    m = _model("MatMulInteger", [("A", np.uint8, (5, 9)), ("B", np.uint8, (9, 3)), ("az", np.uint8, [5])],
               [("Y", np.int32)], 10, inits={"az": az})
    want = (A.astype(np.int64) - az[:, None]) @ B.astype(np.int64)
    _same(_ep(m, {"A": A, "B": B}), [want.astype(np.int32)])


def test_mat_mul_integer_int32_accumulation_wraps():
    """K = 40000 products of 255 * 255 overflow int32: the result is the exact sum modulo 2**32 (as onnxruntime)."""
    K = 40000
    A, B = np.full((2, K), 255, np.uint8), np.full((K, 3), 255, np.uint8)
    A[1, ::3] = 7
    m = _model("MatMulInteger", [("A", np.uint8, A.shape), ("B", np.uint8, B.shape)], [("Y", np.int32)], 10)
    got = _check(m, {"A": A, "B": B})[0]
    exact = A.astype(np.int64) @ B.astype(np.int64)
    np.testing.assert_array_equal(got, exact.astype(np.int32))   # numpy's int64 -> int32 keeps the low 32 bits
    assert exact.max() > 2 ** 31


# ----------------------------------------------------------------------------------------------- QLinearMatMul
@pytest.mark.parametrize("ta,tb", [(np.uint8, np.uint8), (np.int8, np.int8), (np.uint8, np.int8)])
@pytest.mark.parametrize("bs", [[], [7]])
@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_mat_mul(ta, tb, bs, opset):
    A, B = _ints(ta, (2, 5, 64)), _ints(tb, (64, 7))
    ty = ta
    m = _model("QLinearMatMul", [("A", ta, A.shape), ("as", np.float32, []), ("az", ta, []), ("B", tb, B.shape),
                                 ("bs", np.float32, bs), ("bz", tb, bs), ("ys", np.float32, []), ("yz", ty, [])],
               [("Y", ty)], opset,
               inits={"as": np.float32(0.02), "az": np.asarray(3, ta), "bs": (RNG.random(bs) * 0.01 + 1e-3)
                      .astype(np.float32), "bz": _ints(tb, bs) // 8, "ys": np.float32(0.3), "yz": np.asarray(5, ty)})
    _check(m, {"A": A, "B": B})


def test_qlinear_mat_mul_mixed_output_type():
    """int8 inputs, uint8 output (onnxruntime has no kernel for it: onnx.reference)."""
    A, B = _ints(np.int8, (3, 16)), _ints(np.int8, (16, 4))
    m = _model("QLinearMatMul", [("A", np.int8, A.shape), ("as", np.float32, []), ("az", np.int8, []),
                                 ("B", np.int8, B.shape), ("bs", np.float32, []), ("bz", np.int8, []),
                                 ("ys", np.float32, []), ("yz", np.uint8, [])], [("Y", np.uint8)], 10,
               inits={"as": np.float32(0.05), "az": np.int8(1), "bs": np.float32(0.03), "bz": np.int8(-2),
                      "ys": np.float32(0.2), "yz": np.uint8(128)})
    _check(m, {"A": A, "B": B}, "ref")


# ------------------------------------------------------------------------------------ ConvInteger, QLinearConv
CONVS = [  # x shape, w shape, attributes
    ((2, 4, 9, 9), (6, 2, 3, 3), {"group": 2, "pads": [1, 0, 1, 2], "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 3, 8, 8), (5, 3, 1, 1), {}),
    ((1, 4, 7, 6), (4, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER"}),
    ((2, 3, 11), (4, 3, 3), {"pads": [2, 1], "strides": [2]}),
    ((1, 2, 5, 4, 6), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),
]


@pytest.mark.parametrize("wt", [np.uint8, np.int8])
@pytest.mark.parametrize("xshape,wshape,attrs", CONVS)
def test_conv_integer(wt, xshape, wshape, attrs):
    X, W = _ints(np.uint8, xshape), _ints(wt, wshape)
    m = _model("ConvInteger", [("X", np.uint8, xshape), ("W", wt, wshape), ("xz", np.uint8, []), ("wz", wt, [])],
               [("Y", np.int32)], 10, attrs, inits={"W": W, "xz": np.uint8(7), "wz": np.asarray(2, wt)})
    _check(m, {"X": X})


def test_conv_integer_per_channel_zero_point():
    X, W = _ints(np.uint8, (1, 2, 5, 5)), _ints(np.uint8, (3, 2, 2, 2))
    m = _model("ConvInteger", [("X", np.uint8, X.shape), ("W", np.uint8, W.shape), ("xz", np.uint8, []),
                               ("wz", np.uint8, [3])], [("Y", np.int32)], 10, {"pads": [1, 1, 1, 1]},
               inits={"xz": np.uint8(9), "wz": np.array([1, 2, 3], np.uint8)})
    _check(m, {"X": X, "W": W}, "ref")


@pytest.mark.parametrize("xt,wt", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("xshape,wshape,attrs", CONVS)
def test_qlinear_conv(xt, wt, per_channel, xshape, wshape, attrs):
    M = wshape[0]
    ws = [M] if per_channel else []
    X, W = _ints(xt, xshape), _ints(wt, wshape)
    m = _model("QLinearConv", [("X", xt, xshape), ("xs", np.float32, []), ("xz", xt, []), ("W", wt, wshape),
                               ("ws", np.float32, ws), ("wz", wt, ws), ("ys", np.float32, []), ("yz", xt, []),
                               ("B", np.int32, [M])], [("Y", xt)], 10, attrs,
               inits={"W": W, "xs": np.float32(0.05), "xz": np.asarray(7, xt),
                      "ws": (RNG.random(ws) * 0.01 + 1e-3).astype(np.float32), "wz": np.zeros(ws, wt),
                      "ys": np.float32(0.2), "yz": np.asarray(100 if xt == np.uint8 else -3, xt),
                      "B": RNG.integers(-1000, 1000, M).astype(np.int32)})
    _check(m, {"X": X})


# ------------------------------------------------------------------------------------------ errors and limits
def test_bad_scale_length_then_session_still_works():
    m = _model("QuantizeLinear", [("x", np.float32, [2, 3]), ("s", np.float32, [None]), ("z", np.uint8, [None])],
               [("y", np.uint8)], 13, {"axis": 1})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    x = _x((2, 3))
    with pytest.raises(InvalidArgument, match="QuantizeLinear.*y_scale has shape \\(2,\\).*length 3"):
        sess.run(None, {"x": x, "s": np.ones(2, np.float32), "z": np.zeros(2, np.uint8)})
    s, z = np.array([1, 2, 4], np.float32), np.array([0, 1, 2], np.uint8)
    _same(sess.run(None, {"x": x, "s": s, "z": z}), run_ort(m, {"x": x, "s": s, "z": z}))


def test_bad_blocked_scale_shape():
    m = _model("DequantizeLinear", [("x", np.uint8, [4, 6]), ("s", np.float32, [None, None])], [("y", np.float32)],
               21, {"axis": 1, "block_size": 4})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="block_size 4 needs shape \\(4, 2\\)"):
        sess.run(None, {"x": np.zeros((4, 6), np.uint8), "s": np.ones((4, 3), np.float32)})


def test_bad_matmul_zero_point_shape():
    m = _model("MatMulInteger", [("A", np.uint8, [None, None]), ("B", np.uint8, [None, None]),
                                 ("az", np.uint8, [None])], [("Y", np.int32)], 10)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="a_zero_point has shape \\(4,\\)"):
        sess.run(None, {"A": np.zeros((3, 5), np.uint8), "B": np.zeros((5, 2), np.uint8),
                        "az": np.zeros(4, np.uint8)})


def test_conv_integer_output_size_checked():
    """pads (an attribute) set the output size: a huge one is refused before anything is allocated."""
    big = 1 << 21
    m = _model("ConvInteger", [("X", np.uint8, [1, 1, 2, 2]), ("W", np.uint8, [1, 1, 1, 1])], [("Y", np.int32)], 10,
               {"pads": [big, big, big, big]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(Fail, match="ConvInteger.*over the"):
        sess.run(None, {"X": np.zeros((1, 1, 2, 2), np.uint8), "W": np.ones((1, 1, 1, 1), np.uint8)})


@pytest.mark.parametrize("opset", [21, 23])
def test_quantize_bfloat16(opset):
    """bfloat16 x and scale: before opset 23 the division runs in float32 (as float16 there, see above), from 23 in
    bfloat16 (onnx.reference: its bfloat16 division rounds the float32 quotient, as onnxep)."""
    x = _x(scale=50).astype(ml_dtypes.bfloat16)
    m = _model("QuantizeLinear", [("x", ml_dtypes.bfloat16, x.shape), ("s", ml_dtypes.bfloat16, []),
                                  ("z", np.int8, [])], [("y", np.int8)], opset,
               inits={"s": np.asarray(0.3, ml_dtypes.bfloat16), "z": np.int8(-3)})
    if opset >= 23:
        _check(m, {"x": x}, "ref")
    else:
        want = np.clip(np.rint(x.astype(np.float32) / np.float32(np.asarray(0.3, ml_dtypes.bfloat16))) - 3, -128, 127)
        _same(_ep(m, {"x": x}), [want.astype(np.int8)])


def test_quantize_e8m0_scale():
    """float8e8m0 scales (opset 24, powers of two): x / 2**k is exact, then rounded half to even."""
    x = _x((2, 6), 40)
    s = np.array([[125, 127], [128, 131]], np.uint8).view(ml_dtypes.float8_e8m0fnu)   # 1/4, 1, 2, 16
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", ml_dtypes.float8_e8m0fnu, [2, 2]),
                                  ("z", np.int8, [2, 2])], [("y", np.int8)], 24, {"axis": 1, "block_size": 3},
               inits={"s": s, "z": np.zeros((2, 2), np.int8)})
    want = np.clip(np.rint(x / np.repeat(s.astype(np.float32), 3, axis=1)), -128, 127).astype(np.int8)
    _same(_ep(m, {"x": x}), [want])


def test_dequantize_bfloat16_scale():
    x = _ints(np.uint8, (3, 4))
    m = _model("DequantizeLinear", [("x", np.uint8, x.shape), ("s", ml_dtypes.bfloat16, [4]), ("z", np.uint8, [4])],
               [("y", ml_dtypes.bfloat16)], 21, {"axis": 1},
               inits={"s": np.array([0.1, 0.5, 3, 0.007], ml_dtypes.bfloat16), "z": _ints(np.uint8, (4,))})
    _check(m, {"x": x}, "ref")


@pytest.mark.parametrize("zt", [np.int8, np.uint8, np.int16])
def test_quantize_nan_gives_the_type_minimum(zt):
    """NaN (unspecified by ONNX) quantizes to the type's minimum, as onnxruntime."""
    x = np.array([np.nan, 1.0, -np.nan, np.inf, -np.inf], np.float32)
    m = _model("QuantizeLinear", [("x", np.float32, x.shape), ("s", np.float32, []), ("z", zt, [])], [("y", zt)], 21,
               inits={"s": np.float32(1), "z": zt(3)})
    _check(m, {"x": x})


def test_constant_parameters_prepared_once_fed_ones_each_run():
    """Fed (writable) scales are read on every run: a second run with other values gives other results."""
    m = _model("QuantizeLinear", [("x", np.float32, [4]), ("s", np.float32, []), ("z", np.uint8, [])],
               [("y", np.uint8)], 13)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    x = np.array([1, 2, 3, 4], np.float32)
    for s in (1.0, 0.5, 2.0):
        feeds = {"x": x, "s": np.array(s, np.float32), "z": np.array(1, np.uint8)}
        _same(sess.run(None, feeds), run_ort(m, feeds))


@pytest.mark.parametrize("k", [250, 260, 3000])
def test_mat_mul_integer_float32_bound(k):
    """Around the float32 / float64 switch (k * 255 * 255 vs 2**24 at k = 258): extreme operands, exact int32."""
    A, B = np.full((3, k), 255, np.uint8), np.full((k, 2), 255, np.uint8)
    A[1] = RNG.integers(0, 256, k)
    m = _model("MatMulInteger", [("A", np.uint8, A.shape), ("B", np.uint8, B.shape)], [("Y", np.int32)], 10)
    got = _check(m, {"A": A, "B": B})[0]
    np.testing.assert_array_equal(got, (A.astype(np.int64) @ B.astype(np.int64)).astype(np.int32))


def test_quantize_linear_scalar_input():
    """A 0-d input (a Constant's scalar that torch.onnx writes and quantize_static puts a QuantizeLinear on): numpy
    divides 0-d arrays into a scalar, which the rounding must still take (oracle: onnxruntime)."""
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [])],
                          [helper.make_tensor_value_info("y", T.UINT8, [])],
                          [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
                           numpy_helper.from_array(np.array(3, np.uint8), "z")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    for v in (1.234, -0.2, 100.0):
        x = np.array(v, np.float32)
        got = sess.run(None, {"x": x})[0]
        assert got.shape == () and got.dtype == np.uint8
        np.testing.assert_array_equal(got, run_ort(m, {"x": x})[0])
