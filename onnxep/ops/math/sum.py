import numpy as np

from onnxep import _kernels
from onnxep.ops.math._broadcast import Variadic
from onnxep.ops.math._numpy import FLOATS


class Sum_6(Variadic):
    """Y := X0 + X1 + ... elementwise, with multidirectional broadcasting from opset 8 (opsets 6, 8, 13); float32
    native, float16/64 numpy"""

    domain, op_type, since = "", "Sum", 6
    kernel = staticmethod(_kernels.add_f32)
    ufunc = staticmethod(np.add)
    type_constraints = {"T": FLOATS}
