import numpy as np

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
            raise ValueError(f"Gather: indices must be in [{-n}, {n - 1}] for axis {axis} of data shape {x.shape}, "
                             f"got values in [{idx.min()}, {idx.max()}]")
        shape = x.shape[:axis] + idx.shape + x.shape[axis + 1:]
        y = new_output(ctx, 0, shape, x.dtype, f"Gather node {self.name!r}") if x.dtype.hasobject else \
            ctx.output(0, shape, x.dtype)
        if y.size:
            np.take(x, idx, axis=axis, out=y)

    #: the indices are baked into the C step: constants or values the run loop checks per run only
    c_value_inputs = (1,)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry when the (fixed) indices step evenly (one index, a range): a strided copy of
        the slice they pick along the axis."""
        x, idx, y = ins[0], ins[1], outs[0]
        if type(self).compute is not Gather_1.compute or not _c_steps.plain(x, idx, y) or idx.dtype.kind != "i":
            return None
        axis = norm_axis(self.axis, x.ndim, "Gather")
        n = x.shape[axis]
        v = idx.reshape(-1).astype(np.int64)
        if not v.size or v.min() < -n or v.max() >= n:
            return None
        v = np.where(v < 0, v + n, v)
        step = int(v[1] - v[0]) if v.size > 1 else 1
        if step == 0 or np.any(v != v[0] + step * np.arange(v.size)):
            return None
        start, last = int(v[0]), int(v[-1])
        stop = last + step if last + step >= 0 else None
        view = x[(slice(None),) * axis + (slice(start, stop, step),)]
        if view.shape[axis] != v.size or view.size != y.size:
            return None
        return _c_steps.strided(x, view, y.reshape(view.shape))
