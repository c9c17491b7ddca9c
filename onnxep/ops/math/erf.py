from onnxep import _kernels
from onnxep.ops.math._unary import UnaryF32


class Erf_9(UnaryF32):
    """Y := erf(X) (opsets 9, 13; float32): a vectorised polynomial, max error 1.3e-7 (~2 ulp), NaN stays NaN."""

    domain, op_type, since = "", "Erf", 9
    kernel = staticmethod(_kernels.erf_f32)


class Erf_13(Erf_9):
    since = 13
