import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops.math._numpy import FLOATS, NumpyKernel


class SwiGLU_28(NumpyKernel):
    """Y := A * sigmoid(alpha * A) * B, A and B of one shape, no broadcasting (opset 28; numpy)"""

    domain, op_type, since = "", "SwiGLU", 28
    type_constraints = {"T": FLOATS}
    alpha = 1.0

    def compute(self, ctx):
        a, b = ctx.input(0), ctx.input(1)
        if a.shape != b.shape:
            raise InvalidArgument(f"SwiGLU: A and B must have the same shape, got {a.shape} and {b.shape}")
        y = ctx.output(0, a.shape, a.dtype)
        if y.size:
            with np.errstate(all="ignore"):
                np.multiply(a, a.dtype.type(-self.alpha), out=y)
                np.exp(y, out=y)
                y += 1
                np.divide(a, y, out=y)
                y *= b
