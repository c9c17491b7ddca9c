import numpy as np

from onnxep import _kernels
from onnxep.ops.math._broadcast import VariadicF32


class Sum_6(VariadicF32):
    """Y := X0 + X1 + ... elementwise, with multidirectional broadcasting from opset 8 (opsets 6, 8, 13; float32)"""

    domain, op_type, since = "", "Sum", 6
    kernel = staticmethod(_kernels.add_f32)
    ufunc = staticmethod(np.add)
