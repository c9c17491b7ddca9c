import math

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops._data import DATA_TYPES, norm_axis


class Concat_4(OpKernel):
    """Y := the inputs joined along axis (opsets 4, 11 (negative axis), 13)."""

    domain, op_type, since = "", "Concat", 4
    type_constraints = {"T": DATA_TYPES}

    def compute(self, ctx):
        xs = [ctx.input(i) for i in range(ctx.input_count)]
        if not xs or any(x is None for x in xs):
            raise ValueError("Concat: needs at least one input and no omitted ones")
        r = xs[0].ndim
        axis = norm_axis(self.axis, r, "Concat")
        first = xs[0].shape
        for i, x in enumerate(xs):
            if x.ndim != r or x.shape[:axis] != first[:axis] or x.shape[axis + 1:] != first[axis + 1:]:
                raise ValueError(f"Concat: input {i} has shape {x.shape}, incompatible with input 0's {first} "
                                 f"along axis {axis}")
        shape = list(first)
        shape[axis] = sum(x.shape[axis] for x in xs)
        y = ctx.preallocated(0)      # producers with a plan slot wrote their inputs into it already
        if y is None or y.shape != tuple(shape) or y.dtype != xs[0].dtype:
            y = ctx.output(0, shape, xs[0].dtype)
        inner = math.prod(first[axis + 1:])
        rows = math.prod(first[:axis])
        native = not y.dtype.hasobject and y.flags.c_contiguous
        lead = (slice(None),) * axis
        o = 0
        for x in xs:
            n = x.shape[axis]
            if n and _in_place(x, y, lead + (slice(o, o + n),)):
                pass
            elif n and native and x.dtype == y.dtype and x.flags.c_contiguous:
                _kernels.copy_rows(x.reshape(-1).view(np.uint8), rows, n * inner * y.itemsize,
                                   y.reshape(-1).view(np.uint8), shape[axis] * inner * y.itemsize,
                                   o * inner * y.itemsize, ctx.num_threads)
            elif n:
                y[lead + (slice(o, o + n),)] = x
            o += n


def _in_place(x, y, index) -> bool:
    """Whether x is y[index] already, written there by its producer (KernelContext.slot): same memory, shape and
    strides (may_share_memory first: reading data pointers costs a microsecond each)."""
    if x.base is None or not np.may_share_memory(x, y) or x.strides != y.strides:
        return False
    dst = y[index]
    return x.shape == dst.shape and x.ctypes.data == dst.ctypes.data
