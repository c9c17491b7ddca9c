from onnxep import _kernels
from onnxep.ops.math._unary import UnaryF32


class Abs_6(UnaryF32):
    """Y := |X| (opsets 6, 13; float32)"""

    domain, op_type, since = "", "Abs", 6
    kernel = staticmethod(_kernels.abs_f32)
