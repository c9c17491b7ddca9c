import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, fill_value, new_output


class Trilu_14(OpKernel):
    """Y := the upper (upper=1: j >= i + k) or lower (j <= i + k) triangle of each matrix of the last two dims of X,
    zero elsewhere; k is the optional scalar input (default 0) (opset 14)."""

    domain, op_type, since = "", "Trilu", 14
    type_constraints = {"T": ALL_TYPES}
    upper = 1

    def compute(self, ctx):
        x, kin = ctx.input(0), ctx.input(1)
        if x.ndim < 2:
            raise InvalidArgument(f"Trilu: the input must have rank >= 2, got shape {x.shape}")
        k = 0 if kin is None else int(kin.reshape(-1)[0]) if kin.size == 1 else None
        if k is None:
            raise InvalidArgument(f"Trilu: k must be a scalar, got shape {kin.shape}")
        n, m = x.shape[-2:]
        k = min(max(k, -n - 1), m + 1)
        y = new_output(ctx, 0, x.shape, x.dtype, f"Trilu node {self.name!r}")
        if not y.size:
            return
        np.copyto(y, x)
        # the dropped part: below the k-th diagonal (j < i + k) for upper, above it (j > i + k) for lower
        drop = np.tri(n, m, k - 1, dtype=bool) if self.upper else ~np.tri(n, m, k, dtype=bool)
        np.copyto(y, fill_value(x.dtype), where=drop)
