import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axes
from onnxep.ops.tensor._helpers import ALL_TYPES


def unsqueeze_shape(shape, axes) -> tuple:
    """shape with a 1 inserted at each of axes (axes index the output, negative counts from its end)."""
    axes = np.asarray(axes).reshape(-1).tolist()
    r = len(shape) + len(axes)
    pos = set(norm_axes(axes, r, "Unsqueeze"))
    it = iter(shape)
    return tuple(1 if d in pos else next(it) for d in range(r))


class Unsqueeze_1(OpKernel):
    """Y := X viewed with size-1 dims inserted at the axes attribute (opsets 1, 11 (negative axes)). A view."""

    domain, op_type, since = "", "Unsqueeze", 1
    type_constraints = {"T": ALL_TYPES}

    def compute(self, ctx):
        x = ctx.input(0)
        ctx.set_output(0, x.reshape(unsqueeze_shape(x.shape, self.axes)))


class Unsqueeze_13(OpKernel):
    """Y := X viewed with size-1 dims inserted at the axes input (opsets 13, 21). A view."""

    domain, op_type, since = "", "Unsqueeze", 13
    type_constraints = {"T": ALL_TYPES}

    def compute(self, ctx):
        x = ctx.input(0)
        ctx.set_output(0, x.reshape(unsqueeze_shape(x.shape, ctx.input(1))))
