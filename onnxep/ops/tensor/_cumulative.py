"""The running reductions CumSum and CumProd share: the axis input, exclusive and reverse, the accumulation type."""
from __future__ import annotations

import math

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis

#: dtype -> rl_cumsum's type code (RL_T_*)
_C_TYPES = {np.dtype(np.float32): 0, np.dtype(np.int64): 2, np.dtype(np.int32): 3}

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

    c_value_inputs = (1,)      # the axis

    def c_step(self, ins, outs, nthreads):
        """RL_CUMSUM (rl_cumsum, onnxep/_native/rl_ops.h) for CumSum of float32 / int64 / int32: sequential sums in X's type,
        as numpy's add.accumulate makes them."""
        if self.ufunc is not np.add or type(self).compute is not Cumulative.compute or "compute" in self.__dict__:
            return None
        x, a, y = ins[0], ins[1], outs[0]
        t = _C_TYPES.get(x.dtype)
        if (t is None or not _c_steps.plain(x, a, y) or y.dtype != x.dtype or y.shape != x.shape or x.ndim == 0
                or a.size != 1 or a.dtype.kind != "i" or y.size == 0 or np.may_share_memory(x, y)):
            return None
        axis = int(a.reshape(-1)[0])
        if not -x.ndim <= axis < x.ndim:
            return None
        axis %= x.ndim
        return ("cumsum", [0, ~0], [math.prod(x.shape[:axis]), x.shape[axis], math.prod(x.shape[axis + 1:]), t,
                                    int(bool(self.exclusive)), int(bool(self.reverse))], [])
