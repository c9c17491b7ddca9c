from onnxep import _kernels
from onnxep.ops.math._unary import UnaryF32


class Tanh_6(UnaryF32):
    """Y := tanh(X) (opsets 6, 13; float32)"""

    domain, op_type, since = "", "Tanh", 6
    kernel = staticmethod(_kernels.tanh_f32)
