from onnxep import _kernels
from onnxep.ops.math._unary import UnaryF32


class Sigmoid_6(UnaryF32):
    """Y := 1 / (1 + exp(-X)) (opsets 6, 13; float32)"""

    domain, op_type, since = "", "Sigmoid", 6
    kernel = staticmethod(_kernels.sigmoid_f32)
