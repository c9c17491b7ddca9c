"""The running reductions CumSum and CumProd share: the axis input, exclusive and reverse, the accumulation type."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis

#: T of CumSum / CumProd, and their axis type T2
CUMULATIVE_TYPES = ("float32", "float64", "float16", "bfloat16", "int32", "int64", "uint32", "uint64")
AXIS_TYPES = ("int32", "int64")


def cumulate(kernel, ctx, ufunc, identity):
    """Y := the running `ufunc` (np.add / np.multiply) of input 0 along the axis input 1, as kernel.exclusive (each
    excluding its own element, the first being `identity`) and kernel.reverse (from the end) say. Accumulates in X's
    type, float16 and bfloat16 in float32 (as onnxruntime). One numpy call."""
    what = f"{kernel.op_type} node {kernel.name!r}"
    x, a = ctx.input(0), ctx.input(1)
    if a.size != 1 or a.ndim > 1:
        raise InvalidArgument(f"{what}: axis must be a scalar (or a 1-element 1-D tensor), got shape {a.shape}")
    if not x.ndim:
        raise InvalidArgument(f"{what}: the input must have rank >= 1, got a scalar")
    try:
        axis = norm_axis(int(a.reshape(())), x.ndim, what)
    except ValueError as e:
        raise InvalidArgument(str(e)) from None
    y = ctx.output(0, x.shape, x.dtype)
    if not y.size:
        return y
    acc = np.dtype(np.float32) if x.dtype.name in ("float16", "bfloat16") else x.dtype
    xv, yv = x, y
    if kernel.reverse:
        flip = (slice(None),) * axis + (slice(None, None, -1),)
        xv, yv = x[flip], y[flip]
    if kernel.exclusive:
        lead = (slice(None),) * axis
        yv[lead + (0,)] = identity
        if x.shape[axis] > 1:
            part = yv[lead + (slice(1, None),)]
            np.copyto(part, ufunc.accumulate(xv[lead + (slice(0, -1),)], axis=axis, dtype=acc), casting="unsafe")
    elif acc == x.dtype:
        ufunc.accumulate(xv, axis=axis, dtype=acc, out=yv)
    else:
        np.copyto(yv, ufunc.accumulate(xv, axis=axis, dtype=acc), casting="unsafe")
    return y


class Cumulative(OpKernel):
    """CumSum / CumProd: the types, exclusive and reverse, and compute, the running `ufunc` from `identity`."""

    type_constraints = {"T": CUMULATIVE_TYPES, "T2": AXIS_TYPES}
    exclusive = 0
    reverse = 0
    ufunc = None
    identity = 0

    def compute(self, ctx):
        cumulate(self, ctx, self.ufunc, self.identity)
