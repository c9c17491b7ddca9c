import numpy as np

from onnxep.ops.math._broadcast import legacy_operand
from onnxep.ops.math._numpy import FLOATS, NUMERIC, NumpyKernel, broadcast_shape

_F64 = np.dtype(np.float64)


class Pow_7(NumpyKernel):
    """Z := A ** B with multidirectional broadcasting (opsets 7, 12, 13, 15), Z of A's dtype. B's dtype may differ
    from A's (opset 12): the power is computed in numpy's common type of the two (float64 for an integer base with a
    float exponent, as onnxruntime's std::pow) and cast to A's dtype; an integer base with a negative integer
    exponent goes through float64 too (2 ** -1 -> 0, as onnxruntime, where numpy would raise)."""

    domain, op_type, since = "", "Pow", 7
    type_constraints = {"T": FLOATS + ("int32", "int64"), "T1": NUMERIC}

    def compute(self, ctx):
        a, b = ctx.input(0), ctx.input(1)
        self.power(a, b, ctx.output(0, broadcast_shape(self.op_type, a.shape, b.shape), a.dtype))

    @staticmethod
    def power(a, b, z):
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


class Pow_1(Pow_7):
    """opsets 1-6: B broadcasts to A only with broadcast=1, aligned at `axis` (legacy_operand); float types"""

    since = 1
    type_constraints = {"T": FLOATS}
    broadcast = 0
    axis = None

    def compute(self, ctx):
        a = ctx.input(0)
        self.power(a, legacy_operand(self, a, ctx.input(1)), ctx.output(0, a.shape, a.dtype))
