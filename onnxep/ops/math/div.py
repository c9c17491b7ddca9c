import numpy as np

from onnxep import _kernels
from onnxep.errors import InvalidArgument
from onnxep.ops.math._broadcast import Binary, LegacyBinary


class Div_7(Binary):
    """C := A / B with multidirectional broadcasting (opsets 7, 13, 14: same semantics; the dtypes grow). float32:
    the native kernel; float16/64: numpy; integers: the quotient truncated toward zero (C, onnxruntime and
    onnx.reference), and a zero divisor raises."""

    domain, op_type, since = "", "Div", 7
    kernel = staticmethod(_kernels.div_f32)
    ufunc = staticmethod(np.divide)

    def apply_numpy(self, a, b, z):
        if z.dtype.kind not in "iu":
            np.divide(a, b, out=z)
            return
        if not b.all():
            raise InvalidArgument(f"Div: integer division by zero (divisor B of shape {b.shape} holds a 0)")
        if z.dtype.kind == "u":
            np.floor_divide(a, b, out=z)
            return
        # floor -> trunc: add 1 where the division is inexact and the signs differ. Both masks are computed before
        # z is written (z may be A's memory).
        fix = np.fmod(a, b) != 0
        fix &= (a < 0) != (b < 0)
        np.floor_divide(a, b, out=z)
        np.add(z, fix, out=z, casting="unsafe")


class Div_6(LegacyBinary, Div_7):
    """opset 6: B broadcasts to A only with broadcast=1, aligned at `axis` (legacy_operand)"""

    since = 6
