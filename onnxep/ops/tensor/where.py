import numpy as np

from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


class Where_9(OpKernel):
    """Y := X where condition else Z, the three broadcast together (opsets 9, 16 (bfloat16)). Two
    broadcasting copies into the output, no temporaries."""

    domain, op_type, since = "", "Where", 9
    type_constraints = {"B": ("bool",), "T": ALL_TYPES}

    def compute(self, ctx):
        c, x, z = ctx.input(0), ctx.input(1), ctx.input(2)
        shape = np.broadcast_shapes(c.shape, x.shape, z.shape)
        y = new_output(ctx, 0, shape, x.dtype, f"Where node {self.name!r}")
        if y.size:
            np.copyto(y, z)
            np.copyto(y, x, where=c)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: rl_where over the broadcast (bool condition, any fixed-size values)."""
        return _c_steps.where(ins[0], ins[1], ins[2], outs[0])
