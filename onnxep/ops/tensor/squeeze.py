import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axes
from onnxep.ops.tensor._helpers import ALL_TYPES


def squeeze_shape(shape, axes) -> tuple:
    """shape without the dims listed in axes (each must be 1), or without every 1 when axes is None."""
    if axes is None:
        return tuple(d for d in shape if d != 1)
    pos = norm_axes(np.asarray(axes).reshape(-1).tolist(), len(shape), "Squeeze")
    for a in pos:
        if shape[a] != 1:
            raise ValueError(f"Squeeze: axis {a} of input shape {tuple(shape)} is not 1")
    return tuple(d for i, d in enumerate(shape) if i not in pos)


class Squeeze_1(OpKernel):
    """Y := X viewed without the size-1 dims of the axes attribute (all size-1 dims if absent) (opsets 1, 11)."""

    domain, op_type, since = "", "Squeeze", 1
    type_constraints = {"T": ALL_TYPES}
    axes = None

    def compute(self, ctx):
        x = ctx.input(0)
        ctx.set_output(0, x.reshape(squeeze_shape(x.shape, self.axes)))


class Squeeze_13(OpKernel):
    """Y := X viewed without the size-1 dims of the optional axes input (opsets 13, 21)."""

    domain, op_type, since = "", "Squeeze", 13
    type_constraints = {"T": ALL_TYPES}

    def compute(self, ctx):
        x = ctx.input(0)
        ctx.set_output(0, x.reshape(squeeze_shape(x.shape, ctx.input(1))))
