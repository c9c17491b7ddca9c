import numpy as np

from onnxep import _kernels
from onnxep.ops.math._unary import Unary


class Sigmoid_6(Unary):
    """Y := 1 / (1 + exp(-X)) (opsets 6, 13; float32 native, float16/64 numpy)"""

    domain, op_type, since = "", "Sigmoid", 6
    kernel = staticmethod(_kernels.sigmoid_f32)

    def apply_numpy(self, x, y):
        # exp(-x) overflows to inf for very negative x, and 1 / inf = 0 is the right limit
        np.negative(x, out=y)
        np.exp(y, out=y)
        y += 1
        np.reciprocal(y, out=y)
