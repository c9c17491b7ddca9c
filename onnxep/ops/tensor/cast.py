import ml_dtypes
import numpy as np
from onnx import TensorProto, helper

from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, first_input_type_ok, new_output

#: TensorProto element types Cast handles here (float8, int4/uint4, int2/uint2, float4 and complex go to the reference
#: backend)
_TO = {getattr(TensorProto, n): np.dtype(d) for n, d in (
    ("FLOAT", np.float32), ("DOUBLE", np.float64), ("FLOAT16", np.float16), ("INT8", np.int8), ("INT16", np.int16),
    ("INT32", np.int32), ("INT64", np.int64), ("UINT8", np.uint8), ("UINT16", np.uint16), ("UINT32", np.uint32),
    ("UINT64", np.uint64), ("BOOL", np.bool_), ("STRING", np.dtype(object)), ("BFLOAT16", ml_dtypes.bfloat16))}


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


class Cast_6(OpKernel):
    """Y := X converted to the type `to` (opsets 6, 9, 13, 19 (saturate: float8 only, not here), 21, 23-25). Numeric,
    bool, string and bfloat16 (round to nearest even, as ml_dtypes and onnx.reference); float8, int4/uint4,
    int2/uint2 and float4 go to the reference backend."""

    domain, op_type, since = "", "Cast", 6
    type_constraints = {"T1": ALL_TYPES, "T2": ALL_TYPES}

    @classmethod
    def supports(cls, op):
        return op.node.attrs.get("to") in _TO

    def compute(self, ctx):
        x = ctx.input(0)
        dt = _TO[self.to]
        if x.dtype == dt:
            ctx.set_output(0, x)
            return
        cast_into(x, new_output(ctx, 0, x.shape, dt, f"Cast node {self.name!r}"))


class CastLike_15(OpKernel):
    """Y := X converted to the type of target_type (opsets 15, 19, 21, 23-25), as Cast."""

    domain, op_type, since = "", "CastLike", 15
    type_constraints = {"T1": ALL_TYPES, "T2": ALL_TYPES}

    def compute(self, ctx):
        x, like = ctx.input(0), ctx.input(1)
        if x.dtype == like.dtype:
            ctx.set_output(0, x)
            return
        cast_into(x, new_output(ctx, 0, x.shape, like.dtype, f"CastLike node {self.name!r}"))


assert all(helper.tensor_dtype_to_np_dtype(k) == v for k, v in _TO.items() if k != TensorProto.STRING)
