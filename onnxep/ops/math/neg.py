from onnxep import _kernels
from onnxep.ops.math._unary import UnaryF32


class Neg_6(UnaryF32):
    """Y := -X (opsets 6, 13; float32)"""

    domain, op_type, since = "", "Neg", 6
    kernel = staticmethod(_kernels.neg_f32)
