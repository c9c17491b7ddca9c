import numpy as np

from onnxep import _kernels
from onnxep.ops.math._broadcast import Binary, LegacyBinary


class Mul_7(Binary):
    """C := A * B with multidirectional broadcasting (opsets 7, 13, 14: same semantics; the dtypes grow). float32:
    the native kernel; the other numeric dtypes: numpy (integers wrap around)."""

    domain, op_type, since = "", "Mul", 7
    kernel = staticmethod(_kernels.mul_f32)
    ufunc = staticmethod(np.multiply)


class Mul_6(LegacyBinary, Mul_7):
    """opset 6: B broadcasts to A only with broadcast=1, aligned at `axis` (legacy_operand)"""

    since = 6
