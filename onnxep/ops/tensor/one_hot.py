import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import NUMERIC, ALL_TYPES, new_output


class OneHot_9(OpKernel):
    """Y := off_value everywhere but on_value where the new axis' coordinate equals the index (indices outside [0,
    depth) give an all-off row) (opset 9). Output size checked before allocating."""

    domain, op_type, since = "", "OneHot", 9
    type_constraints = {"T1": NUMERIC, "T2": NUMERIC, "T3": ALL_TYPES}
    axis = -1
    wrap_negative = False

    def compute(self, ctx):
        idx, depth, values = ctx.input(0), ctx.input(1), ctx.input(2)
        what = f"OneHot node {self.name!r}"
        if depth.size != 1 or values.size != 2:
            raise InvalidArgument(f"{what}: depth must hold one value and values two, got shapes {depth.shape} and "
                                  f"{values.shape}")
        d = int(depth.reshape(()))   # a float depth is truncated, as onnxruntime does
        if d < 1:
            raise InvalidArgument(f"{what}: depth must be positive, got {d}")
        r = idx.ndim + 1
        axis = int(self.axis)
        if not -r <= axis < r:
            raise InvalidArgument(f"{what}: axis {axis} is out of range for output rank {r}")
        axis %= r
        y = new_output(ctx, 0, idx.shape[:axis] + (d,) + idx.shape[axis:], values.dtype, what)
        if not y.size:
            return
        off, on = values.reshape(-1)
        y[...] = off
        i = idx.astype(np.int64) if idx.dtype != np.int64 else idx
        if self.wrap_negative:
            i = np.where(i < 0, i + d, i)
        coord = np.arange(d, dtype=np.int64).reshape((d,) + (1,) * (r - 1 - axis))
        # on where coordinate == index (an index outside [0, d) matches no coordinate)
        np.copyto(y, on, where=np.expand_dims(i, axis) == coord)


class OneHot_11(OneHot_9):
    """As opset 9, with negative indices counting from depth (opsets 11, 28)."""

    since = 11
    wrap_negative = True
