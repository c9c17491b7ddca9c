import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, ints, new_output


def expand_shape(xshape, shape) -> tuple:
    """Expand's output shape: xshape broadcast with the shape input both ways (named errors for a negative dim or
    shapes that do not broadcast)."""
    shape = ints(shape, "Expand shape")
    if any(d < 0 for d in shape):
        raise InvalidArgument(f"Expand: negative dim in shape {shape}")
    try:
        return np.broadcast_shapes(xshape, tuple(shape))
    except ValueError:
        raise InvalidArgument(f"Expand: input shape {xshape} cannot be broadcast with shape {shape}") from None


class Expand_8(OpKernel):
    """Y := X broadcast with the shape input, both ways (a 1 in shape keeps X's dim) (opsets 8, 13). The output size
    is checked before it is allocated."""

    domain, op_type, since = "", "Expand", 8
    type_constraints = {"T": ALL_TYPES}

    def compute(self, ctx):
        x = ctx.input(0)
        out = expand_shape(x.shape, ctx.input(1))
        y = new_output(ctx, 0, out, x.dtype, f"Expand node {self.name!r}")
        if y.size:
            np.copyto(y, x)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: a strided copy of x broadcast (the output shape is the signature's)."""
        x, y = ins[0], outs[0]
        if not y.size:
            return None
        return _c_steps.strided(x, np.broadcast_to(x, y.shape), y)
