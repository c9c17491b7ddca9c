"""Conversions to and from the element types numpy holds only through ml_dtypes ("exotic": float8 e4m3fn / e4m3fnuz /
e5m2 / e5m2fnuz / e8m0, float4e2m1, int4 / uint4, int2 / uint2), with ONNX Cast semantics (onnx 1.23.2 schemas).

Arrays of these types are ml_dtypes arrays (one element a byte, as onnx.numpy_helper.to_array gives them; a sub-byte
integer holds its value in the low bits: int4 -1 is the byte 0x0F).

Public functions (signatures stable; other op families import them):

- ``to_exotic(x, dtype, saturate=True, round_mode="up")``: any numeric / bool array -> an exotic dtype, as ONNX Cast.
- ``saturate_float8(x, dtype)``: float array -> float8 (the four e4m3/e5m2 types), out-of-range values clamped.
- ``to_float8e8m0(x, saturate=True, round_mode="up")``: float array -> float8e8m0 with a rounding mode.
- ``round_saturate_int(x, dtype)``: float array -> integer dtype (int8.., int4/uint4, int2/uint2), round half to even
  then clamp to the type's range (the quantization ops' saturate()).
- ``widen(x)``: an exotic array -> float32 (float types) or int8 / uint8 (sub-byte integers), exactly.
- ``to_float32(x)``: any numeric array (exotic or not) -> float32.
- ``cast_array(x, dtype, saturate=True, round_mode="up")``: ONNX Cast between any two types of CAST_TYPES where one
  side (or both) is exotic or string; returns a new array (object array of str for string).
- ``is_exotic(dtype)``, ``exotic_dtype(name)``, ``EXOTIC_DTYPES``, ``CAST_TYPES``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

#: ONNX type name (as onnxep.ops._base._DTYPE_NAMES names it) -> ml_dtypes dtype
EXOTIC_DTYPES = {
    "float8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn), "float8e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz),
    "float8e5m2": np.dtype(ml_dtypes.float8_e5m2), "float8e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "float8e8m0": np.dtype(ml_dtypes.float8_e8m0fnu), "float4e2m1": np.dtype(ml_dtypes.float4_e2m1fn),
    "int4": np.dtype(ml_dtypes.int4), "uint4": np.dtype(ml_dtypes.uint4),
    "int2": np.dtype(ml_dtypes.int2), "uint2": np.dtype(ml_dtypes.uint2),
}
#: the float8 types whose Cast obeys `saturate` by clamping (e8m0 has its own rule)
FLOAT8 = tuple(EXOTIC_DTYPES[n] for n in ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"))
E8M0 = EXOTIC_DTYPES["float8e8m0"]
FLOAT4 = EXOTIC_DTYPES["float4e2m1"]
#: the sub-byte integer types
SUBBYTE_INTS = tuple(EXOTIC_DTYPES[n] for n in ("int4", "uint4", "int2", "uint2"))
EXOTIC_FLOATS = FLOAT8 + (E8M0, FLOAT4)

#: every element type Cast / CastLike handle (onnx 1.23.2, up to opset 25; float6 of opset 28 is not included)
CAST_TYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool", "string", "bfloat16") + tuple(EXOTIC_DTYPES)

_E8M0_ROUND_MODES = ("up", "down", "nearest")


def is_exotic(dtype) -> bool:
    """True for the ml_dtypes types of EXOTIC_DTYPES (bfloat16 is not: numpy casts it like a float)."""
    return np.dtype(dtype) in _EXOTIC_SET


_EXOTIC_SET = frozenset(EXOTIC_DTYPES.values())


def exotic_dtype(name: str):
    """The ml_dtypes dtype of an ONNX type name ("float8e4m3fn", "int4", ...), else None."""
    return EXOTIC_DTYPES.get(name)


def _is_float(dt) -> bool:
    dt = np.dtype(dt)
    return dt.kind == "f" or dt in EXOTIC_FLOATS or dt == np.dtype(ml_dtypes.bfloat16)


def widen(x):
    """An exotic array exactly in a numpy-native type: float8 / float4 / e8m0 -> float32, int4 / int2 -> int8,
    uint4 / uint2 -> uint8. Other arrays are returned unchanged."""
    x = np.asarray(x)
    dt = x.dtype
    if dt in EXOTIC_FLOATS:
        return x.astype(np.float32)
    if dt in SUBBYTE_INTS:
        return x.astype(np.int8 if dt.name.startswith("int") else np.uint8)
    return x


def to_float32(x):
    """Any numeric / bool array (exotic, bfloat16 or numpy-native) as float32 (exact for every exotic type)."""
    x = np.asarray(x)
    if x.dtype == np.float32:
        return x
    return widen(x).astype(np.float32)


def _float_source(x):
    """x as a numpy-native float array for a conversion to a float8 / float4 type: float16 / float32 / float64 as they
    are, bfloat16 and exotic floats widened to float32 (exact), integers and bool to float64 (integers as numpy's
    astype would), sub-byte integers through int8 / uint8."""
    dt = x.dtype
    if dt.kind == "f" and dt in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        return x
    if dt == np.dtype(ml_dtypes.bfloat16) or dt in EXOTIC_FLOATS:
        return x.astype(np.float32)
    return widen(x).astype(np.float64)


def saturate_float8(x, dtype):
    """float array -> float8 `dtype` (e4m3fn, e4m3fnuz, e5m2 or e5m2fnuz) as ONNX Cast with saturate=1: round to
    nearest even, values (and infinities) beyond the largest finite value clamp to +-that value, NaN stays NaN
    (-0 becomes 0 for the fnuz types, which have no -0)."""
    dtype = np.dtype(dtype)
    src = _float_source(np.asarray(x))
    m = float(ml_dtypes.finfo(dtype).max)
    return np.clip(src, -m, m).astype(dtype)   # np.clip keeps NaN


def to_float8e8m0(x, saturate=True, round_mode="up"):
    """float array -> float8e8m0 (a power of two 2**(e-127), e in 0..254; 0xFF is NaN), as ONNX Cast-24+.

    The spec's tables, with onnxruntime's choices where the spec leaves it open:
    - NaN -> NaN;
    - x > 0: rounds to a power of two by `round_mode`: "up" (any fraction bumps the exponent), "down" (truncate),
      "nearest" (mantissa >= 0.5 bumps it: ties up); exact on float32 subnormals too (2**-127 = E8M0_MIN is one);
    - saturate: a result past E8M0_MAX (2**127), +Inf included, gives E8M0_MAX; x below E8M0_MIN (0 included) gives
      E8M0_MIN; negatives (unspecified) give E8M0_MIN, as onnxruntime;
    - not saturate: x > E8M0_MAX, a rounding past it, +-Inf, x < E8M0_MIN (0 included) and negatives give NaN (the
      spec's table; negatives as onnxruntime).
    onnx.reference differs on the unspecified / edge rows (it ignores the sign, maps Inf to NaN, 0 to E8M0_MIN and
    reads a subnormal's exponent field as if normal); normal positive values agree with it and onnxruntime.
    """
    if round_mode not in _E8M0_ROUND_MODES:
        raise ValueError(f"round_mode must be one of {_E8M0_ROUND_MODES}, got {round_mode!r}")
    f = np.ascontiguousarray(to_float32(np.asarray(x)))
    raw = f.view(np.uint32)
    neg = (raw >> np.uint32(31)).astype(bool)
    bits = raw & np.uint32(0x7FFFFFFF)
    e = (bits >> np.uint32(23)).astype(np.int32)
    mant = bits & np.uint32(0x7FFFFF)
    if round_mode == "up":
        bump = mant != 0
    elif round_mode == "down":
        bump = np.zeros(bits.shape, bool)
    else:
        bump = mant >= 0x400000
    # zero / subnormal (e == 0): value = mant * 2**-149; E8M0_MIN = 2**-127 is mant 0x400000, the candidates are
    # 2**-127 (0x00) and 2**-126 (0x01)
    sub = e == 0
    if round_mode == "up":
        sub_bump = mant > 0x400000
    elif round_mode == "down":
        sub_bump = np.zeros(bits.shape, bool)
    else:
        sub_bump = mant >= 0x600000   # the midpoint of 2**-127 and 2**-126, ties up
    out_e = np.where(sub, sub_bump.astype(np.int32), e + bump)
    nan = (e == 255) & (mant != 0)
    inf = (e == 255) & (mant == 0)
    below_min = sub & (mant < 0x400000)   # 0 included
    if saturate:
        out_e = np.minimum(out_e, 254)
        out_e = np.where(inf, 254, out_e)
        out_e = np.where(below_min | (neg & (bits != 0)), 0, out_e)
        out_e = np.where(nan, 255, out_e)
    else:
        above_max = (e == 254) & (mant != 0)
        bad = (e == 255) | below_min | neg | above_max | (out_e > 254)
        out_e = np.where(bad, 255, out_e)
    return out_e.astype(np.uint8).view(E8M0)


def round_saturate_int(x, dtype):
    """float (or integer) array -> integer `dtype` (numpy ints, int4/uint4, int2/uint2): round half to even, clamp to
    the type's range, NaN -> 0 (what QuantizeLinear's saturate() needs)."""
    dtype = np.dtype(dtype)
    info = ml_dtypes.iinfo(dtype) if dtype in SUBBYTE_INTS else np.iinfo(dtype)
    x = np.asarray(x)
    if x.dtype.kind not in "iub":
        x = np.rint(to_float32(x) if x.dtype.kind != "f" else x)
        x = np.nan_to_num(x, nan=0.0)
    y = np.clip(x, info.min, info.max)
    if dtype in SUBBYTE_INTS:
        return y.astype(np.int8 if info.min < 0 else np.uint8).astype(dtype)
    return y.astype(dtype)


def _int_source(x):
    """x as a numpy-native array an integer conversion reads: float exotics / bfloat16 as float32, sub-byte integers as
    int8 / uint8, bool as uint8."""
    dt = x.dtype
    if dt == np.bool_:
        return x.astype(np.uint8)
    if dt == np.dtype(ml_dtypes.bfloat16):
        return x.astype(np.float32)
    return widen(x)


def to_exotic(x, dtype, saturate=True, round_mode="up"):
    """Any numeric / bool array -> the exotic `dtype`, as ONNX Cast:
    - float8 e4m3fn/e4m3fnuz/e5m2/e5m2fnuz: round to nearest even; saturate clamps out-of-range values and infinities
      to +-max (saturate_float8), else they become NaN (Inf for e5m2), per the spec's tables;
    - float8e8m0: to_float8e8m0(x, saturate, round_mode);
    - float4e2m1: round to nearest even, out-of-range values clamp to +-6 (the type has no Inf / NaN; NaN gives 0, as
      ml_dtypes and onnx.reference);
    - int4/uint4/int2/uint2: floats truncate toward zero then keep the low bits (NaN / Inf: 0), integers keep the low
      bits (two's complement, as the spec's fixed-point rule), bool gives 0 / 1.
    """
    dtype = np.dtype(dtype)
    x = np.asarray(x)
    if x.dtype == dtype:
        return x.copy()
    if dtype in FLOAT8:
        if saturate:
            return saturate_float8(x, dtype)
        with np.errstate(over="ignore", invalid="ignore"):
            return _float_source(x).astype(dtype)
    if dtype == E8M0:
        return to_float8e8m0(x, saturate, round_mode)
    if dtype == FLOAT4:
        with np.errstate(over="ignore", invalid="ignore"):
            return _float_source(x).astype(dtype)
    if dtype in SUBBYTE_INTS:
        src = _int_source(x)
        if src.dtype.kind == "f":
            with np.errstate(over="ignore", invalid="ignore"):
                t = np.trunc(src)
                t = np.where(np.isfinite(t), t, 0)
                # the low bits of the truncated value: exact through int64 for |x| < 2**63, else wrap modulo 2**64
                t = np.where(np.abs(t) < 2.0 ** 63, t, np.fmod(t, 2.0 ** 64))
                src = t.astype(np.int64)
        bits = 2 if dtype.name.endswith("2") else 4
        low = (src.astype(np.int64) & ((1 << bits) - 1)).astype(np.uint8)
        if dtype.name.startswith("int"):
            low = np.where(low >= (1 << (bits - 1)), low.astype(np.int16) - (1 << bits), low).astype(np.int8)
        return low.astype(dtype)
    raise TypeError(f"to_exotic: {dtype} is not an exotic dtype")


def _parse_strings(x, integer: bool):
    """A str / object array parsed to numbers: int64 when `integer` and every string is an integer literal, else
    float64 ("1.5e3", "NaN", "+INF", "-inf": case-insensitive)."""
    if integer:
        try:
            return np.asarray(x).astype(np.int64)
        except (ValueError, OverflowError):
            pass
    return np.asarray(x).astype(np.float64)


def cast_array(x, dtype, saturate=True, round_mode="up"):
    """ONNX Cast of x to `dtype` where x or dtype is exotic (either may also be string, object dtype), returned as a
    new array: exotic -> numeric / bool through widen() (exact), then numpy's cast (float -> int truncates; NaN -> int
    undefined); numeric / bool / string -> exotic through to_exotic (strings parsed first); exotic -> string prints the
    widened value as numpy's str does (float32 '0.5', int8 '-3')."""
    dtype = np.dtype(dtype)
    x = np.asarray(x)
    if x.dtype.hasobject or x.dtype.kind in "US":
        if dtype.hasobject:
            return np.asarray(x, object).copy()
        src = _parse_strings(x, integer=dtype in SUBBYTE_INTS or dtype.kind in "iu")
        return to_exotic(src, dtype, saturate, round_mode) if is_exotic(dtype) else _plain_cast(src, dtype)
    if is_exotic(dtype):
        return to_exotic(x, dtype, saturate, round_mode)
    src = widen(x)
    if dtype.hasobject:
        return src.astype(np.str_).astype(object)
    return _plain_cast(src, dtype)


def _plain_cast(src, dtype):
    """numpy's cast of a numpy-native array (ONNX's rules: float -> int truncates, numbers -> bool is x != 0)."""
    if dtype == np.bool_:
        return src != 0
    out = np.empty(src.shape, dtype)
    with np.errstate(invalid="ignore", over="ignore"):
        np.copyto(out, src, casting="unsafe")
    return out
