import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis


class CumSum_11(OpKernel):
    """Y := running sums of X along the axis input, optionally exclusive (each excluding its own element) and/or
    reverse (from the end) (opsets 11, 14). Accumulates in X's type, float16 and bfloat16 in float32 (as
    onnxruntime)."""

    domain, op_type, since = "", "CumSum", 11
    type_constraints = {"T": ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64"),
                        "T2": ("int32", "int64")}
    exclusive = 0
    reverse = 0

    def compute(self, ctx):
        x, a = ctx.input(0), ctx.input(1)
        if a.size != 1:
            raise InvalidArgument(f"CumSum: axis must be a scalar, got shape {a.shape}")
        if not x.ndim:
            raise InvalidArgument("CumSum: the input must have rank >= 1")
        try:
            axis = norm_axis(int(a.reshape(())), x.ndim, "CumSum")
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        y = ctx.output(0, x.shape, x.dtype)
        if not y.size:
            return
        acc = np.dtype(np.float32) if x.dtype.name in ("float16", "bfloat16") else x.dtype
        xv, yv = x, y
        if self.reverse:
            flip = (slice(None),) * axis + (slice(None, None, -1),)
            xv, yv = x[flip], y[flip]
        if self.exclusive:
            lead = (slice(None),) * axis
            yv[lead + (0,)] = 0
            if x.shape[axis] > 1:
                part = yv[lead + (slice(1, None),)]
                np.copyto(part, np.cumsum(xv[lead + (slice(0, -1),)], axis=axis, dtype=acc), casting="unsafe")
        elif acc == x.dtype:
            np.cumsum(xv, axis=axis, dtype=acc, out=yv)
        else:
            np.copyto(yv, np.cumsum(xv, axis=axis, dtype=acc), casting="unsafe")
