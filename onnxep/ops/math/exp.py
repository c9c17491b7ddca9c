from onnxep import _kernels
from onnxep.ops.math._unary import UnaryF32


class Exp_6(UnaryF32):
    """Y := exp(X) (opsets 6, 13; float32)"""

    domain, op_type, since = "", "Exp", 6
    kernel = staticmethod(_kernels.exp_f32)
