import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.math._numpy import FLOATS, NUMERIC, broadcast_shape

_F64 = np.dtype(np.float64)


class Pow_7(OpKernel):
    """Z := A ** B with multidirectional broadcasting (opsets 7, 12, 13, 15), Z of A's dtype. B's dtype may differ
    from A's (opset 12): the power is computed in numpy's common type of the two (float64 for an integer base with a
    float exponent, as onnxruntime's std::pow) and cast to A's dtype; an integer base with a negative integer
    exponent goes through float64 too (2 ** -1 -> 0, as onnxruntime, where numpy would raise)."""

    domain, op_type, since = "", "Pow", 7
    type_constraints = {"T": FLOATS + ("int32", "int64"), "T1": NUMERIC}

    def compute(self, ctx):
        a, b = ctx.input(0), ctx.input(1)
        z = ctx.output(0, broadcast_shape(self.op_type, a.shape, b.shape), a.dtype)
        if not z.size:
            return
        with np.errstate(all="ignore"):
            if a.dtype.kind == "f":
                dt = np.result_type(a.dtype, b.dtype) if b.dtype.kind == "f" else a.dtype
            elif b.dtype.kind == "f" or (b.dtype.kind == "i" and b.size and b.min() < 0):
                dt = _F64
            else:
                dt = a.dtype
            np.power(a, b, out=z, dtype=dt, casting="unsafe")
