import math

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops.math._numpy import FLOATS, NumpyKernel


class _Hardmax(NumpyKernel):
    """Y := 1 at the first maximum along the axis, 0 elsewhere. Opsets 1/11 coerce X to 2-D at `axis` (default 1),
    opset 13 works along `axis` (default -1). numpy: argmax, then one put_along_axis."""

    type_constraints = {"T": FLOATS}
    coerce_2d = True

    def compute(self, ctx):
        x = ctx.input(0)
        r = x.ndim
        axis = int(self.axis)
        if not -r <= axis < r:
            raise InvalidArgument(f"{self.op_type}: axis {axis} out of range for rank {r} (X shape {x.shape})")
        axis %= r
        if self.coerce_2d:
            outer, k, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis:]), 1
        else:
            outer, k, inner = math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:])
        y = ctx.output(0, x.shape, x.dtype)
        y[...] = 0
        if not y.size:
            return
        x3, y3 = x.reshape(outer, k, inner), y.reshape(outer, k, inner)
        np.put_along_axis(y3, np.argmax(x3, axis=1)[:, None, :], 1, axis=1)


class Hardmax_1(_Hardmax):
    domain, op_type, since = "", "Hardmax", 1


class Hardmax_13(_Hardmax):
    domain, op_type, since = "", "Hardmax", 13
    coerce_2d = False
