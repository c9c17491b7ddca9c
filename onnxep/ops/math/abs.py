import numpy as np

from onnxep import _kernels
from onnxep.ops.math._numpy import NUMERIC
from onnxep.ops.math._unary import Unary


class Abs_6(Unary):
    """Y := |X| (opsets 6, 13; float32 native, the other numeric dtypes numpy)"""

    domain, op_type, since = "", "Abs", 6
    type_constraints = {"T": NUMERIC}
    kernel = staticmethod(_kernels.abs_f32)
    ufunc = staticmethod(np.absolute)
