import numpy as np

from onnxep import _kernels
from onnxep.ops.math._numpy import FLOATS, SIGNED
from onnxep.ops.math._unary import Unary


class Neg_6(Unary):
    """Y := -X (opsets 6, 13; float32 native, float16/64 and signed ints numpy)"""

    domain, op_type, since = "", "Neg", 6
    type_constraints = {"T": FLOATS + SIGNED}
    kernel = staticmethod(_kernels.neg_f32)
    ufunc = staticmethod(np.negative)
