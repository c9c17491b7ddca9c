import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


class Compress_9(OpKernel):
    """Y := the slices of X along axis (of X flattened when axis is absent) where condition is true; a condition
    shorter than the axis drops the rest (opsets 9, 11 (negative axis), 28)."""

    domain, op_type, since = "", "Compress", 9
    type_constraints = {"T": ALL_TYPES, "T1": ("bool",)}
    axis = None

    def compute(self, ctx):
        x, c = ctx.input(0), ctx.input(1)
        if c.ndim != 1:
            raise InvalidArgument(f"Compress: condition must be 1-D, got shape {c.shape}")
        if self.axis is None:
            x, axis = x.reshape(-1), 0
        else:
            try:
                axis = norm_axis(self.axis, x.ndim, "Compress")
            except ValueError as e:
                raise InvalidArgument(str(e)) from None
        n = x.shape[axis]
        if c.size > n:
            raise InvalidArgument(f"Compress: condition has {c.size} values for an axis of {n} (data shape "
                                  f"{x.shape})")
        shape = list(x.shape)
        shape[axis] = int(np.count_nonzero(c))
        y = new_output(ctx, 0, shape, x.dtype, f"Compress node {self.name!r}")
        if y.size:
            np.compress(c, x, axis=axis, out=y)
