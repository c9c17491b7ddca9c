import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES


class Flatten_1(OpKernel):
    """Y := X viewed as [prod(dims[:axis]), prod(dims[axis:])] (opsets 1, 9, 11 (negative axis), 13, 21)."""

    domain, op_type, since = "", "Flatten", 1
    type_constraints = {"T": ALL_TYPES}
    axis = 1

    def compute(self, ctx):
        x = ctx.input(0)
        r = x.ndim
        axis = int(self.axis)
        if not -r <= axis <= r:
            raise ValueError(f"Flatten: axis {axis} is out of range for rank {r}")
        if axis < 0:
            axis += r
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        inner = int(np.prod(x.shape[axis:], dtype=np.int64))
        ctx.set_output(0, x.reshape(outer, inner))
