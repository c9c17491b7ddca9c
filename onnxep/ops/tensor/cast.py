import ml_dtypes
import numpy as np
from onnx import TensorProto, helper

from onnxep.graph.model import check_size
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops._dtypes import CAST_TYPES, EXOTIC_DTYPES, cast_array, is_exotic
from onnxep.ops.tensor._helpers import ALL_TYPES, first_input_type_ok, new_output

#: TensorProto element types Cast-1 handles (its schema has no float8 / int4 / float4 / int2): numpy-native, string and
#: bfloat16
_TO = {getattr(TensorProto, n): np.dtype(d) for n, d in (
    ("FLOAT", np.float32), ("DOUBLE", np.float64), ("FLOAT16", np.float16), ("INT8", np.int8), ("INT16", np.int16),
    ("INT32", np.int32), ("INT64", np.int64), ("UINT8", np.uint8), ("UINT16", np.uint16), ("UINT32", np.uint32),
    ("UINT64", np.uint64), ("BOOL", np.bool_), ("STRING", np.dtype(object)), ("BFLOAT16", ml_dtypes.bfloat16))}
#: TensorProto element types Cast-6+ and CastLike handle: _TO and the ml_dtypes types (float8 e4m3fn / e4m3fnuz /
#: e5m2 / e5m2fnuz / e8m0, float4e2m1, int4 / uint4, int2 / uint2); float6 (Cast-28) goes to the reference backend
_TO_ALL = dict(_TO)
_TO_ALL.update({getattr(TensorProto, n.upper()): d for n, d in EXOTIC_DTYPES.items()})


def cast_to_output(ctx, x, dt, saturate=1, round_mode="up", what="Cast"):
    """Output 0 := x converted to dtype dt as ONNX Cast says (x itself when it has that dtype already): cast_into for
    numpy-native, string and bfloat16 types (into the run's allocator); onnxep.ops._dtypes.cast_array (float8 with
    `saturate`, float8e8m0 with `round_mode`, float4, int4/int2) when either side is an ml_dtypes type."""
    if x.dtype == dt:
        ctx.set_output(0, x)
    elif is_exotic(dt) or is_exotic(x.dtype):
        check_size(x.shape, dt, what)
        ctx.set_output(0, cast_array(x, dt, bool(saturate), round_mode))
    else:
        cast_into(x, new_output(ctx, 0, x.shape, dt, what))


def cast_into(x, y):
    """y := x converted as ONNX Cast says: float -> int truncates toward zero (NaN / out of range: undefined, what
    numpy gives), numbers -> bool is x != 0, numbers -> string print like numpy's str (onnx.reference's astype(str):
    'True' / 'False' for bools), string -> number parses each string."""
    if y.dtype.hasobject:
        if x.dtype.hasobject:
            y[...] = x
        else:
            y[...] = x.astype(np.str_)   # numbers as text: onnx.reference's format (shortest repr)
        return
    if x.dtype.hasobject:
        # text to numbers: int() for integers (exact beyond 2**53), else float() ("1.5e3", "NaN", "+INF"; "100.5"
        # to an integer gives 100, as the spec allows); to bool through float as onnxruntime ("0" is False, where
        # onnx.reference's astype(bool) makes every non-empty string True)
        if y.dtype.kind in "iu":
            try:
                y[...] = x.astype(y.dtype)
                return
            except ValueError:
                pass
        with np.errstate(invalid="ignore", over="ignore"):
            np.copyto(y, x.astype(np.float64), casting="unsafe")
        return
    with np.errstate(invalid="ignore", over="ignore"):
        np.copyto(y, x, casting="unsafe")


class Cast_1(OpKernel):
    """Y := X converted to the type named by the string `to` ("FLOAT", "INT64", ...) (opset 1)."""

    domain, op_type, since = "", "Cast", 1

    @classmethod
    def check_types(cls, op):   # shape inference leaves opset-1 outputs untyped
        return first_input_type_ok(op, ALL_TYPES)

    @classmethod
    def supports(cls, op):
        return _named(op.node.attrs.get("to")) in _TO

    def compute(self, ctx):
        x = ctx.input(0)
        dt = _TO[_named(self.to)]
        if x.dtype == dt:
            ctx.set_output(0, x)
            return
        cast_into(x, new_output(ctx, 0, x.shape, dt, f"Cast node {self.name!r}"))


def _named(to):
    """TensorProto's number for an opset-1 type name, else None."""
    return TensorProto.DataType.Value(to.upper()) if isinstance(to, str) and to.upper() in \
        TensorProto.DataType.keys() else None


class _CastTo(OpKernel):
    """Cast-6+ and CastLike: the types, saturate and round_mode (their defaults before opsets 19 / 24 are the spec's),
    round_mode one of up / down / nearest."""

    type_constraints = {"T1": CAST_TYPES, "T2": CAST_TYPES}
    saturate, round_mode = 1, "up"

    @classmethod
    def supports(cls, op):
        return op.node.attrs.get("round_mode", "up") in ("up", "down", "nearest")


class Cast_6(_CastTo):
    """Y := X converted to the type `to` (opsets 6, 9, 13, 19 (saturate), 21, 23, 24 (round_mode), 25, 28). Numeric,
    bool, string and bfloat16 (round to nearest even, as ml_dtypes and onnx.reference), and the ml_dtypes types
    through onnxep.ops._dtypes: float8 (saturate: out-of-range values clamp to +-max, else NaN / Inf per the spec's
    tables), float8e8m0 (round_mode up / down / nearest), float4e2m1, int4/uint4, int2/uint2. float6 (opset 28) goes
    to the reference backend."""

    domain, op_type, since = "", "Cast", 6

    @classmethod
    def supports(cls, op):
        return op.node.attrs.get("to") in _TO_ALL and super().supports(op)

    def compute(self, ctx):
        x = ctx.input(0)
        cast_to_output(ctx, x, _TO_ALL[self.to], self.saturate, self.round_mode, f"Cast node {self.name!r}")

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: rl_cast for the numpy-native pairs it converts as numpy does."""
        x, y = ins[0], outs[0]
        if y is None or x.dtype == y.dtype:
            return None
        return _c_steps.cast(x, y)


class CastLike_15(_CastTo):
    """Y := X converted to the type of target_type (opsets 15, 19 (saturate), 21, 23, 24 (round_mode), 25), as Cast,
    every type of CAST_TYPES."""

    domain, op_type, since = "", "CastLike", 15

    def compute(self, ctx):
        x, like = ctx.input(0), ctx.input(1)
        cast_to_output(ctx, x, like.dtype, self.saturate, self.round_mode, f"CastLike node {self.name!r}")


assert all(helper.tensor_dtype_to_np_dtype(k) == v for k, v in _TO_ALL.items() if k != TensorProto.STRING)
