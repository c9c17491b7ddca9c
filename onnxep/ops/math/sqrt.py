import numpy as np

from onnxep import _kernels
from onnxep.ops.math._unary import Unary


class Sqrt_6(Unary):
    """Y := sqrt(X) (NaN for X < 0) (opsets 6, 13; float32 native, float16/64 numpy)"""

    domain, op_type, since = "", "Sqrt", 6
    kernel = staticmethod(_kernels.sqrt_f32)
    ufunc = staticmethod(np.sqrt)
