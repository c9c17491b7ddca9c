import numpy as np

from onnxep import _kernels
from onnxep.ops.math._broadcast import BinaryF32


class Mul_7(BinaryF32):
    """C := A * B with multidirectional broadcasting (opsets 7, 13, 14: same semantics, float32 here)"""

    domain, op_type, since = "", "Mul", 7
    kernel = staticmethod(_kernels.mul_f32)
    ufunc = staticmethod(np.multiply)
