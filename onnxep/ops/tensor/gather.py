import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


class Gather_1(OpKernel):
    """Y := take(data, indices, axis); negative indices count from the end (opsets 1, 11, 13). Out-of-range indices
    raise."""

    domain, op_type, since = "", "Gather", 1
    type_constraints = {"T": ALL_TYPES, "Tind": ("int32", "int64")}
    axis = 0

    def compute(self, ctx):
        x, idx = ctx.input(0), ctx.input(1)
        axis = norm_axis(self.axis, x.ndim, "Gather")
        n = x.shape[axis]
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise InvalidArgument(f"Gather: indices must be in [{-n}, {n - 1}] for axis {axis} of data shape "
                                  f"{x.shape}, got values in [{idx.min()}, {idx.max()}]")
        shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
        y = new_output(ctx, 0, shape, x.dtype, f"Gather node {self.name!r}") if x.dtype.hasobject else \
            ctx.output(0, shape, x.dtype)
        if y.size:
            np.take(x, idx, axis=axis, out=y)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: rl_gather (rows copied by index, read each run); an index out of range
        stops the compiled run and this step runs again in Python, which raises the error."""
        x, idx, y = ins[0], ins[1], outs[0]
        if (type(self).compute is not Gather_1.compute or not _c_steps.plain(x, idx, y) or idx.dtype.kind != "i"
                or idx.itemsize not in (4, 8) or y.dtype != x.dtype or not y.size or np.may_share_memory(x, y)
                or np.may_share_memory(idx, y)):
            return None
        axis = norm_axis(self.axis, x.ndim, "Gather")
        if y.shape != x.shape[:axis] + idx.shape + x.shape[axis + 1:]:
            return None
        outer = int(np.prod(x.shape[:axis], dtype=np.int64))
        inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64)) * x.itemsize
        return "gather", [0, 1, ~0], [outer, x.shape[axis], idx.size, inner, idx.itemsize], []
