"""BitCast (opset 26): Y := the bits of X reinterpreted as the type `to` (same bit width, same shape, little endian)."""
import ml_dtypes
import numpy as np
from onnx import TensorProto

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops._dtypes import EXOTIC_DTYPES
from onnxep.ops.tensor._helpers import first_input_type_ok

#: the types of BitCast's schema (every type but string) -> (numpy dtype, bit width)
_BITCAST = {getattr(TensorProto, n): (np.dtype(d), w) for n, d, w in (
    ("FLOAT", np.float32, 32), ("DOUBLE", np.float64, 64), ("FLOAT16", np.float16, 16), ("INT8", np.int8, 8),
    ("INT16", np.int16, 16), ("INT32", np.int32, 32), ("INT64", np.int64, 64), ("UINT8", np.uint8, 8),
    ("UINT16", np.uint16, 16), ("UINT32", np.uint32, 32), ("UINT64", np.uint64, 64), ("BOOL", np.bool_, 8),
    ("COMPLEX64", np.complex64, 64), ("COMPLEX128", np.complex128, 128), ("BFLOAT16", ml_dtypes.bfloat16, 16))}
_BITCAST.update({getattr(TensorProto, n.upper()): (d, 2 if n in ("int2", "uint2") else
                                                   4 if n in ("int4", "uint4", "float4e2m1") else 8)
                 for n, d in EXOTIC_DTYPES.items()})
#: numpy dtype -> bit width
_BIT_WIDTH = {dt: w for dt, w in _BITCAST.values()}
TYPES = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
         "bool", "complex64", "complex128", "bfloat16") + tuple(EXOTIC_DTYPES)


class BitCast_26(OpKernel):
    """Y := X's bits as the type `to`, which must have X's bit width (every type but string: numeric, bool, complex,
    bfloat16, float8, and the sub-byte int4 / uint4 / float4e2m1 and int2 / uint2, whose value lives in the low bits
    of each byte of their ml_dtypes arrays)."""

    domain, op_type, since = "", "BitCast", 26
    type_constraints = {"T1": TYPES, "T2": TYPES}

    @classmethod
    def check_types(cls, op):
        # the input's type only: shape inference leaves the output untyped when the widths differ, and compute then
        # raises InvalidArgument naming the node (rather than leaving an invalid node to the reference backend)
        return first_input_type_ok(op, TYPES)

    @classmethod
    def supports(cls, op):
        return op.node.attrs.get("to") in _BITCAST

    def compute(self, ctx):
        x = ctx.input(0)
        dt, w = _BITCAST[self.to]
        wx = _BIT_WIDTH.get(x.dtype)
        if wx is None or wx != w:
            raise InvalidArgument(f"BitCast node {self.name!r}: the target type {dt} ({w} bits) must have the input's "
                                  f"bit width, got input type {x.dtype} ({wx} bits)")
        check_size(x.shape, dt, f"BitCast node {self.name!r}")
        if not x.flags.c_contiguous:
            x = x.copy()   # (np.ascontiguousarray would make a scalar 1-D)
        if w < 8:   # sub-byte: keep the low bits only (ml_dtypes holds one value a byte)
            y = (x.view(np.uint8) & np.uint8((1 << w) - 1)).view(dt)
        else:
            y = x.view(dt).copy()
        ctx.set_output(0, y)
