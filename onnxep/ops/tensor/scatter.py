import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


class Scatter_9(OpKernel):
    """Y := data with Y[.., indices[i..], ..] = updates[i..] along `axis` (ScatterElements without reduction; Scatter
    is its deprecated opset 9-10 name). Negative indices count from the end; out-of-range indices raise. A repeated
    index keeps the last update in C order (the spec leaves it undefined)."""

    domain, op_type, since, until = "", "Scatter", 9, 11
    type_constraints = {"T": ALL_TYPES, "Tind": ("int32", "int64")}
    axis = 0

    def compute(self, ctx):
        x, idx, upd = ctx.input(0), ctx.input(1), ctx.input(2)
        axis = norm_axis(self.axis, x.ndim, "Scatter")
        if idx.shape != upd.shape or idx.ndim != x.ndim or any(i > d for i, d in zip(idx.shape, x.shape)):
            raise InvalidArgument(f"Scatter: indices {idx.shape} and updates {upd.shape} must have one shape, of "
                                  f"data's rank, no dim larger than data's {x.shape}")
        n = x.shape[axis]
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise InvalidArgument(f"Scatter: indices must be in [{-n}, {n - 1}] for axis {axis} of data shape "
                                  f"{x.shape}, got values in [{idx.min()}, {idx.max()}]")
        y = new_output(ctx, 0, x.shape, x.dtype, f"Scatter node {self.name!r}")
        y[...] = x
        if idx.size:
            # the element (i0, .., ik, ..) of updates goes to y[i0, .., indices[i0, .., ik, ..], ..]: open-grid aranges
            # over indices' shape on every other axis
            pos = list(np.ogrid[tuple(slice(0, d) for d in idx.shape)])
            pos[axis] = np.where(idx < 0, idx + n, idx)
            y[tuple(pos)] = upd
