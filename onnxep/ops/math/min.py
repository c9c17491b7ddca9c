import numpy as np

from onnxep import _kernels
from onnxep.ops.math._broadcast import VariadicF32


class Min_6(VariadicF32):
    """Y := minimum(X0, X1, ...) elementwise; broadcasting from opset 8 (opsets 6, 8, 12, 13; float32)"""

    domain, op_type, since = "", "Min", 6
    kernel = staticmethod(_kernels.min_f32)
    ufunc = staticmethod(np.minimum)
