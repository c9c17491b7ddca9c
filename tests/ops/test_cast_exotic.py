"""Cast, CastLike and BitCast on the ml_dtypes types (float8 e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz / e8m0, float4e2m1,
int4 / uint4, int2 / uint2), run on the cpu backend alone (fallback off).

Oracles, per test (named in each test's docstring):
- onnxruntime (tests._util.run_ort) where it runs the type: its Python API takes and returns none of these types, so
  those tests cast a float32 / float16 / string input to the type and back to float32 in one graph;
- onnx.reference where onnxruntime has no kernel (float4e2m1, int2 / uint2 outputs compared bit for bit) or where
  onnxruntime departs from the spec (non-saturating float8 overflow: onnxruntime gives 448 / NaN where the spec's table
  and onnx.reference give NaN / Inf);
- numpy (ml_dtypes) for string output, which onnx.reference cannot produce from these types.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxep
from onnxep.errors import InvalidArgument
from onnxep.ops._dtypes import is_exotic
from tests._util import cpu_only_options, fallback_nodes, run_ort, run_reference

# the test inputs overflow float16 / int32 on purpose (Inf, out-of-range values)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast",
                                        "ignore:invalid value encountered in cast")

F8 = ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")
SUBBYTE = ("INT4", "UINT4", "INT2", "UINT2")
_NP = {T.FLOAT: np.float32, T.FLOAT16: np.float16, T.DOUBLE: np.float64, T.INT32: np.int32, T.INT64: np.int64,
       T.INT8: np.int8, T.UINT8: np.uint8, T.BOOL: np.bool_, T.STRING: object}


def _np(t):
    return _NP.get(t) or helper.tensor_dtype_to_np_dtype(t)


def _model(nodes, inputs, outputs, opset):
    """inputs / outputs: (name, TensorProto type) pairs, any shape."""
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, None) for n, t in inputs],
                          [helper.make_tensor_value_info(n, t, None) for n, t in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _ep(model, feeds):
    """onnxep with the fallback off: every node on the cpu backend."""
    sess = onnxep.InferenceSession(model.SerializeToString(), cpu_only_options())
    assert fallback_nodes(sess) == []
    return sess.run(None, feeds)


def _roundtrip(src, to, back=T.FLOAT, opset=25, **attrs):
    """x (src) -> Cast(to, attrs) -> Cast(back): what onnxruntime can be asked about the exotic types."""
    return _model([helper.make_node("Cast", ["x"], ["m"], to=to, **attrs),
                   helper.make_node("Cast", ["m"], ["y"], to=back)], [("x", src)], [("y", back)], opset)


def _assert_same(got, want):
    """Same dtype and shape; floats equal with NaN == NaN, exotic arrays equal bit for bit."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    if is_exotic(got.dtype):
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    elif got.dtype.kind == "f":
        np.testing.assert_array_equal(got, want)    # NaN positions must agree too
    elif got.dtype.hasobject:
        assert got.tolist() == want.tolist()
    else:
        np.testing.assert_array_equal(got, want)


def _values(rng, n=600, spread=(-9, 5)):
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 1e-7, -1e-7, 448, 464, 240, 248, 57344, 1e6, -1e6]
    rnd = rng.standard_normal(n) * 10.0 ** rng.integers(*spread, n)
    return np.concatenate([np.array(specials), rnd]).astype(np.float32)


# --------------------------------------------------------------------------------------------------- float8
@pytest.mark.parametrize("opset", [19, 21, 25])
@pytest.mark.parametrize("src", [T.FLOAT, T.FLOAT16])
@pytest.mark.parametrize("to", F8)
def test_float8_saturate_roundtrip_vs_ort(to, src, opset):
    """Oracle: onnxruntime. saturate=1 (the default): RNE, out-of-range values and +-Inf clamp to +-max, NaN stays."""
    x = _values(np.random.default_rng(0)).astype(_np(src))
    m = _roundtrip(src, getattr(T, to), opset=opset)
    _assert_same(_ep(m, {"x": x})[0], run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("src", [T.FLOAT, T.FLOAT16])
@pytest.mark.parametrize("to", F8)
def test_float8_no_saturate_in_range_vs_ort(to, src):
    """Oracle: onnxruntime, saturate=0 on values that do not overflow (+-Inf and NaN included)."""
    x = _values(np.random.default_rng(1)).astype(_np(src))
    mx = float(ml_dtypes.finfo(helper.tensor_dtype_to_np_dtype(getattr(T, to))).max)
    x = x[~np.isfinite(x) | (np.abs(x.astype(np.float64)) <= mx)]
    m = _roundtrip(src, getattr(T, to), saturate=0)
    _assert_same(_ep(m, {"x": x})[0], run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("to", F8)
def test_float8_no_saturate_overflow_vs_reference(to):
    """Oracle: onnx.reference (the spec's table: [x] > max gives NaN, Inf for e5m2; onnxruntime keeps 448 for e4m3fn
    values up to 512 and gives NaN for e5m2)."""
    x = np.array([449, 464, 470, 480, 500, 1e4, 6e4, 61440, 65000, 1e9, -470, -65000, np.inf, -np.inf, np.nan],
                 np.float32)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=getattr(T, to), saturate=0)], [("x", T.FLOAT)],
               [("y", getattr(T, to))], 21)
    _assert_same(_ep(m, {"x": x})[0], run_reference(m, {"x": x})[0])


@pytest.mark.parametrize("back", [T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT32, T.UINT8, T.BOOL, T.BFLOAT16])
@pytest.mark.parametrize("frm", F8 + ("FLOAT8E8M0", "FLOAT4E2M1"))
def test_exotic_float_input_vs_reference(frm, back):
    """Oracle: onnx.reference. An exotic float input (fed as an ml_dtypes array) cast to a numpy-native type."""
    dt = helper.tensor_dtype_to_np_dtype(getattr(T, frm))
    vals = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, 8, 100, 240], np.float32)
    if back != T.UINT8:
        vals = np.concatenate([vals, -vals])
    if frm == "FLOAT8E8M0":
        vals = np.array([0.5, 1, 2, 4, 64, 2 ** -20, 2 ** 20], np.float32)
    x = vals.astype(dt)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=back)], [("x", getattr(T, frm))], [("y", back)], 25)
    _assert_same(_ep(m, {"x": x})[0], run_reference(m, {"x": x})[0])


# --------------------------------------------------------------------------------------------------- float8e8m0
@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("src", [T.FLOAT, T.FLOAT16])
def test_e8m0_modes_vs_ort(src, saturate, round_mode):
    """Oracle: onnxruntime (Cast-25, round_mode and saturate): powers of two, ties, subnormals, 0, +-Inf, NaN,
    negatives (unspecified by the spec: onnxruntime gives E8M0_MIN / NaN) and values past 2**127."""
    t = 2.0 ** -127
    x = np.concatenate([np.array([0, -0.0, np.inf, -np.inf, np.nan, t, t * 1.5, t * 0.5, 1e-39, 1.5, 3, 6, 1.25, 1.75,
                                  2.0 ** 127, 2.0 ** 127 * 1.5, 2.0 ** 126 * 1.5, -1, -0.3]),
                        np.abs(np.random.default_rng(2).standard_normal(500)) * 10.0 ** np.random.default_rng(3)
                        .integers(-30, 30, 500)]).astype(np.float32)
    if src == T.FLOAT16:
        x = x.astype(np.float16)
    m = _roundtrip(src, T.FLOAT8E8M0, saturate=saturate, round_mode=round_mode)
    _assert_same(_ep(m, {"x": x})[0], run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("round_mode", ["up", "down", "nearest"])
def test_e8m0_normals_vs_reference(round_mode):
    """Oracle: onnx.reference, bit for bit, on positive normal float32 values (where it follows the spec)."""
    x = (np.abs(np.random.default_rng(4).standard_normal(400)) * 10.0 ** np.random.default_rng(5).integers(
        -30, 30, 400)).astype(np.float32)
    x = np.concatenate([x, np.array([1.5, 3, 0.75, 1.25], np.float32)])
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT8E8M0, round_mode=round_mode)], [("x", T.FLOAT)],
               [("y", T.FLOAT8E8M0)], 24)
    _assert_same(_ep(m, {"x": x})[0], run_reference(m, {"x": x})[0])


def test_bad_round_mode_is_not_claimed():
    """A round_mode the spec does not name is left to the reference backend (fallback off: NotImplemented)."""
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT8E8M0, round_mode="sideways")], [("x", T.FLOAT)],
               [("y", T.FLOAT8E8M0)], 24)
    with pytest.raises(onnxep.errors.NotImplemented):
        onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())


# --------------------------------------------------------------------------------------------------- int4 / int2
@pytest.mark.parametrize("src", [T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT32, T.INT64, T.INT8, T.UINT8, T.BOOL])
@pytest.mark.parametrize("to", SUBBYTE)
def test_subbyte_int_vs_reference(to, src):
    """Oracle: onnx.reference, bit for bit: floats truncate toward zero then keep the low bits (onnxruntime rounds
    non-integral floats to nearest first), integers keep the low bits (-9 -> int4 7, 200 -> uint4 8)."""
    if _np(src) == np.bool_:
        x = np.array([True, False, True])
    elif np.dtype(_np(src)).kind == "f":
        x = np.concatenate([np.arange(-20, 20), np.arange(-20, 20) + 0.5, [7.7, -8.7, 3.99]]).astype(_np(src))
    else:
        info = np.iinfo(_np(src))
        x = np.concatenate([np.arange(max(info.min, -40), 40), [info.min, info.max]]).astype(_np(src))
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=getattr(T, to))], [("x", src)], [("y", getattr(T, to))], 25)
    _assert_same(_ep(m, {"x": x})[0], run_reference(m, {"x": x})[0])


@pytest.mark.parametrize("to", ["INT4", "UINT4", "INT2", "UINT2"])
def test_subbyte_int_integral_roundtrip_vs_ort(to):
    """Oracle: onnxruntime: integral float32 and int32 values (out-of-range ones wrap) to the type and back."""
    x = np.arange(-20, 21).astype(np.float32)
    m = _roundtrip(T.FLOAT, getattr(T, to), back=T.INT32)
    _assert_same(_ep(m, {"x": x})[0], run_ort(m, {"x": x})[0])
    xi = np.array([-300, -129, -9, -1, 0, 1, 7, 8, 15, 16, 255, 2 ** 31 - 1], np.int32)
    m = _roundtrip(T.INT32, getattr(T, to), back=T.INT32)
    _assert_same(_ep(m, {"x": xi})[0], run_ort(m, {"x": xi})[0])


@pytest.mark.parametrize("back", [T.FLOAT, T.FLOAT16, T.INT8, T.UINT8, T.INT64, T.BOOL])
@pytest.mark.parametrize("frm", SUBBYTE)
def test_subbyte_int_input_vs_reference(frm, back):
    """Oracle: onnx.reference: an int4 / uint4 / int2 / uint2 input widened to a numpy-native type."""
    dt = helper.tensor_dtype_to_np_dtype(getattr(T, frm))
    info = ml_dtypes.iinfo(dt)
    x = np.arange(info.min, info.max + 1).astype(dt)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=back)], [("x", getattr(T, frm))], [("y", back)], 25)
    _assert_same(_ep(m, {"x": x})[0], run_reference(m, {"x": x})[0])


# --------------------------------------------------------------------------------------------------- float4
@pytest.mark.parametrize("src", [T.FLOAT, T.FLOAT16, T.DOUBLE, T.INT32])
def test_float4_vs_reference(src):
    """Oracle: onnx.reference (onnxruntime has no float4 Cast): RNE, saturating to +-6, NaN to 0."""
    x = np.concatenate([_values(np.random.default_rng(6), spread=(-2, 2)), [0.25, 0.75, 2.5, 3.5, 5, 7, -5]])
    x = np.clip(np.nan_to_num(x), -1e6, 1e6).astype(np.int32) if src == T.INT32 else x.astype(_np(src))
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT4E2M1)], [("x", src)], [("y", T.FLOAT4E2M1)], 23)
    _assert_same(_ep(m, {"x": x})[0], run_reference(m, {"x": x})[0])


# --------------------------------------------------------------------------------------------------- exotic <-> exotic
@pytest.mark.parametrize("frm,to", [("FLOAT8E4M3FN", "FLOAT8E5M2"), ("FLOAT8E5M2", "FLOAT8E4M3FNUZ"),
                                    ("FLOAT8E4M3FN", "INT4"), ("INT4", "FLOAT8E5M2FNUZ"), ("UINT4", "INT2"),
                                    ("INT2", "UINT4"), ("FLOAT4E2M1", "FLOAT8E4M3FN"), ("FLOAT8E5M2", "FLOAT4E2M1"),
                                    ("INT4", "FLOAT4E2M1"), ("FLOAT8E4M3FN", "FLOAT8E8M0")])
def test_exotic_to_exotic_vs_reference(frm, to):
    """Oracle: onnx.reference, bit for bit (saturating; positive values for e8m0); between two sub-byte integer types,
    which ml_dtypes (so onnx.reference) cannot cast, numpy through int8 / uint8 (the low bits kept)."""
    dt = helper.tensor_dtype_to_np_dtype(getattr(T, frm))
    vals = np.array([0.5, 1, 1.5, 2, 3, 4, 6, 7], np.float32)
    if to != "FLOAT8E8M0":
        vals = np.concatenate([vals, -vals, [0]])
    if frm in SUBBYTE:
        info = ml_dtypes.iinfo(dt)
        vals = np.arange(info.min, info.max + 1)
    x = vals.astype(dt)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=getattr(T, to))], [("x", getattr(T, frm))],
               [("y", getattr(T, to))], 25)
    if frm in SUBBYTE and to in SUBBYTE:
        want = x.astype(np.int8 if frm.startswith("INT") else np.uint8).astype(helper.tensor_dtype_to_np_dtype(
            getattr(T, to)))
    else:
        want = run_reference(m, {"x": x})[0]
    _assert_same(_ep(m, {"x": x})[0], want)


# --------------------------------------------------------------------------------------------------- strings
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("to", F8 + ("FLOAT8E8M0",))
def test_string_to_float8_roundtrip_vs_ort(to, saturate):
    """Oracle: onnxruntime: strings parsed ("INF", "nan", "1e9", "-0.3") then cast with the float8 rules."""
    x = np.array(["1.5", "-3", "0.3", "nan", "INF", "-inf", "1e9", "448", "0.001", "-0.3", "2.5e2"], object)
    m = _roundtrip(T.STRING, getattr(T, to), saturate=saturate)
    _assert_same(_ep(m, {"x": x})[0], run_ort(m, {"x": x})[0])


@pytest.mark.parametrize("to", SUBBYTE + ("FLOAT4E2M1",))
def test_string_to_subbyte_vs_numpy(to):
    """Oracle: numpy (ml_dtypes): integer strings parse exactly then wrap; float4 parses then rounds."""
    x = np.array(["1", "-2", "7", "9", "-9", "0"], object)
    dt = helper.tensor_dtype_to_np_dtype(getattr(T, to))
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=getattr(T, to))], [("x", T.STRING)], [("y", getattr(T, to))],
               25)
    want = x.astype(np.int64).astype(dt) if to in SUBBYTE else x.astype(np.float64).astype(dt)
    _assert_same(_ep(m, {"x": x})[0], want)


@pytest.mark.parametrize("frm", F8 + ("FLOAT8E8M0", "FLOAT4E2M1") + SUBBYTE)
def test_exotic_to_string_vs_numpy(frm):
    """Oracle: numpy: the value widened (float32 / int8 / uint8) and printed as numpy's str ('1.5', '-2', 'nan')."""
    dt = helper.tensor_dtype_to_np_dtype(getattr(T, frm))
    x = np.array([1, 2, 0.5, 3, 1.5], np.float32).astype(dt)
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.STRING)], [("x", getattr(T, frm))], [("y", T.STRING)], 25)
    wide = x.astype(np.float32) if frm not in SUBBYTE else x.astype(np.int8 if frm.startswith("INT") else np.uint8)
    _assert_same(_ep(m, {"x": x})[0], wide.astype(np.str_).astype(object))


# --------------------------------------------------------------------------------------------------- CastLike
@pytest.mark.parametrize("opset", [19, 21, 25])
@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("to", F8 + ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "FLOAT8E8M0"))
def test_castlike_vs_reference(to, saturate, opset):
    """Oracle: onnx.reference, bit for bit: CastLike to an exotic target_type (an initializer), saturate honoured."""
    if (to in ("FLOAT4E2M1", "FLOAT8E8M0") and opset < 23) or (to == "FLOAT8E8M0" and opset < 24) or \
            (to in ("INT4", "UINT4") and opset < 21) or (to == "INT2" and opset < 25):
        pytest.skip("type not in this opset's schema")
    dt = helper.tensor_dtype_to_np_dtype(getattr(T, to))
    x = np.array([0.3, 1, 2.5, 100, 500, 6e4, 7e4, np.inf, np.nan], np.float32)
    if to != "FLOAT8E8M0":
        x = np.concatenate([x, -x])
    like = helper.make_tensor("like", getattr(T, to), [1], np.zeros(1, dt))
    g = helper.make_graph([helper.make_node("CastLike", ["x", "like"], ["y"], saturate=saturate)], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, None)],
                          [helper.make_tensor_value_info("y", getattr(T, to), None)], [like])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    got, want = _ep(m, {"x": x})[0], run_reference(m, {"x": x})[0]
    if to == "FLOAT8E8M0":   # onnx.reference maps +Inf to NaN under saturate; the spec's table and onnxruntime: max
        keep = ~np.isinf(x)
        got, want = got[keep], want[keep]
    _assert_same(got, want)


# --------------------------------------------------------------------------------------------------- BitCast
_BITCAST_PAIRS = [("FLOAT", "INT32"), ("FLOAT", "UINT32"), ("DOUBLE", "INT64"), ("DOUBLE", "COMPLEX64"),
                  ("COMPLEX64", "UINT64"), ("FLOAT16", "BFLOAT16"), ("BFLOAT16", "INT16"), ("UINT16", "FLOAT16"),
                  ("INT8", "FLOAT8E4M3FN"), ("FLOAT8E5M2", "UINT8"), ("FLOAT8E4M3FNUZ", "FLOAT8E5M2FNUZ"),
                  ("FLOAT8E8M0", "INT8"), ("BOOL", "UINT8"), ("INT4", "UINT4"), ("UINT4", "FLOAT4E2M1"),
                  ("FLOAT4E2M1", "INT4"), ("INT2", "UINT2"), ("UINT2", "INT2")]


@pytest.mark.parametrize("frm,to", _BITCAST_PAIRS)
def test_bitcast_vs_reference(frm, to):
    """Oracle: onnx.reference (a numpy view), bit for bit, every bit pattern of the 8- and sub-byte types."""
    dt = _np(getattr(T, frm))
    if frm == "BOOL":
        x = np.array([True, False, True])
    elif np.dtype(dt).itemsize == 1:
        bits = {"INT4": 16, "UINT4": 16, "FLOAT4E2M1": 16, "INT2": 4, "UINT2": 4}.get(frm, 256)
        x = np.arange(bits, dtype=np.uint8).view(dt).reshape(-1, 2 if bits > 2 else 1)
    else:
        x = np.random.default_rng(7).integers(0, 256, 4 * np.dtype(dt).itemsize * 6, dtype=np.uint8).view(dt)
        x = x.reshape(2, 3, -1)
    m = _model([helper.make_node("BitCast", ["x"], ["y"], to=getattr(T, to))], [("x", getattr(T, frm))],
               [("y", getattr(T, to))], 26)
    got, want = _ep(m, {"x": x})[0], run_reference(m, {"x": x})[0]
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()


def test_bitcast_scalar_and_noncontiguous():
    """Oracle: numpy's view: a 0-d input keeps its shape; a transposed input is reinterpreted element by element."""
    m = _model([helper.make_node("Transpose", ["x"], ["t"]), helper.make_node("BitCast", ["t"], ["y"], to=T.INT32)],
               [("x", T.FLOAT)], [("y", T.INT32)], 26)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    _assert_same(_ep(m, {"x": x})[0], np.ascontiguousarray(x.T).view(np.int32))
    x0 = np.array(1.5, np.float32)
    m0 = _model([helper.make_node("BitCast", ["x"], ["y"], to=T.UINT32)], [("x", T.FLOAT)], [("y", T.UINT32)], 26)
    _assert_same(_ep(m0, {"x": x0})[0], x0.view(np.uint32))


def test_bitcast_width_mismatch_is_named_and_session_survives():
    """A BitCast whose widths differ (the input's type is only known at run time here) raises InvalidArgument naming
    the node; the same session then runs a valid input."""
    g = helper.make_graph([helper.make_node("BitCast", ["x"], ["y"], to=T.INT32, name="bc")], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, None)],
                          [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26)])
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    assert sess.run(None, {"x": np.ones(2, np.float32)})[0].tolist() == [1065353216] * 2
    g2 = helper.make_graph([helper.make_node("BitCast", ["x"], ["y"], to=T.INT16, name="bc16")], "g",
                           [helper.make_tensor_value_info("x", T.FLOAT, None)],
                           [helper.make_empty_tensor_value_info("y")])
    sess2 = onnxep.InferenceSession(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 26)])
                                    .SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="bc16.*bit width"):
        sess2.run(None, {"x": np.ones(2, np.float32)})
    with pytest.raises(InvalidArgument, match="bc16"):
        sess2.run(None, {"x": np.ones(2, np.float32)})   # still usable: the same named error again, nothing leaked


# --------------------------------------------------------------------------------------------------- errors / fallback
def test_wrong_input_dtype_is_named_and_session_survives():
    """Feeding float32 where the graph declares float8e4m3fn raises InvalidArgument naming the input; the session then
    runs a correct feed (oracle: onnxruntime round trip of the same values)."""
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT)], [("x", T.FLOAT8E4M3FN)], [("y", T.FLOAT)], 25)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="x"):
        sess.run(None, {"x": np.ones(3, np.float32)})
    x = np.array([1, -2.5, 448], np.float32)
    got = sess.run(None, {"x": x.astype(ml_dtypes.float8_e4m3fn)})[0]
    _assert_same(got, run_ort(_roundtrip(T.FLOAT, T.FLOAT8E4M3FN), {"x": x})[0])


def test_float6_goes_to_the_reference_backend():
    """Cast-28 to float6e2m3 is not claimed: with the fallback on the node runs on onnx.reference (oracle: it)."""
    m = _model([helper.make_node("Cast", ["x"], ["y"], to=T.FLOAT6E2M3)], [("x", T.FLOAT)], [("y", T.FLOAT6E2M3)], 28)
    sess = onnxep.InferenceSession(m.SerializeToString())
    x = np.array([1, 2.3, 100], np.float32)
    assert fallback_nodes(sess) == [n for n in sess.node_assignment]
    _assert_same(sess.run(None, {"x": x})[0], run_reference(m, {"x": x})[0])


def test_large_tensor_is_vectorized():
    """A 2M-element float32 -> float8e5m2 -> float32 round trip matches onnxruntime (one numpy pass per cast)."""
    x = np.random.default_rng(8).standard_normal(2_000_000).astype(np.float32) * 1e4
    m = _roundtrip(T.FLOAT, T.FLOAT8E5M2)
    _assert_same(_ep(m, {"x": x})[0], run_ort(m, {"x": x})[0])
