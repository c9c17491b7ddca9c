import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops.math._numpy import FLOATS, NumpyKernel, broadcast_shape


class PRelu_7(NumpyKernel):
    """Y := X if X >= 0 else slope * X, slope broadcast to X's shape (unidirectional) (opsets 7, 9, 16; numpy; the
    integer types from opset 9)."""

    domain, op_type, since = "", "PRelu", 7
    type_constraints = {"T": FLOATS + ("int32", "int64", "uint32", "uint64")}

    def compute(self, ctx):
        x, slope = ctx.input(0), self.slope_for(ctx.input(0), ctx.input(1))
        if broadcast_shape(self.op_type, x.shape, slope.shape) != x.shape:
            raise InvalidArgument(f"PRelu: slope of shape {slope.shape} does not broadcast to X's shape {x.shape}")
        y = ctx.output(0, x.shape, x.dtype)
        if y.size:
            neg = x < 0                 # before Y is written
            np.copyto(y, x)
            np.multiply(x, slope, out=y, where=neg)

    @staticmethod
    def slope_for(x, slope):
        return slope


class PRelu_6(PRelu_7):
    """opset 6: a 1-D slope of C values that does not broadcast numpy's way is per channel (X's axis 1), as the
    PyTorch exporter of that opset writes it."""

    since = 6
    type_constraints = {"T": FLOATS}

    @staticmethod
    def slope_for(x, slope):
        if slope.ndim == 1 and slope.size > 1 and x.ndim >= 2 and x.shape[-1] != slope.size \
                and x.shape[1] == slope.size:
            return slope.reshape((slope.size,) + (1,) * (x.ndim - 2))
        return slope
