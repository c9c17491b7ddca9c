import numpy as np

from onnxep import _kernels
from onnxep.ops.math._unary import Unary


class Tanh_6(Unary):
    """Y := tanh(X) (opsets 6, 13; float32 native, float16/64 numpy)"""

    domain, op_type, since = "", "Tanh", 6
    kernel = staticmethod(_kernels.tanh_f32)
    ufunc = staticmethod(np.tanh)
