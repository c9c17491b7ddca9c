from onnxep import _kernels
from onnxep.ops.math._unary import UnaryF32


class Sqrt_6(UnaryF32):
    """Y := sqrt(X) (NaN for X < 0) (opsets 6, 13; float32)"""

    domain, op_type, since = "", "Sqrt", 6
    kernel = staticmethod(_kernels.sqrt_f32)
