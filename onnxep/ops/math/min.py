import numpy as np

from onnxep import _kernels
from onnxep.ops.math._broadcast import Variadic


class Min_6(Variadic):
    """Y := minimum(X0, X1, ...) elementwise; broadcasting from opset 8 (opsets 6, 8, 12, 13;
    float32 native, the other dtypes numpy; NaN propagates)"""

    domain, op_type, since = "", "Min", 6
    kernel = staticmethod(_kernels.min_f32)
    ufunc = staticmethod(np.minimum)
