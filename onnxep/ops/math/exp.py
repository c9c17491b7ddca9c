import numpy as np

from onnxep import _kernels
from onnxep.ops.math._unary import Unary


class Exp_6(Unary):
    """Y := exp(X) (opsets 6, 13; float32 native, float16/64 numpy)"""

    domain, op_type, since = "", "Exp", 6
    kernel = staticmethod(_kernels.exp_f32)
    ufunc = staticmethod(np.exp)
