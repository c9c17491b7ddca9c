import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis
from onnxep.ops.tensor._helpers import INDEX_TYPES, ALL_TYPES, new_output, normalize_indices


def along_axis_checks(op, x, idx, axis):
    """The axis normalised, and indices of data's rank, no dim above data's (others than axis), else raise."""
    try:
        axis = norm_axis(axis, x.ndim, op)
    except ValueError as e:
        raise InvalidArgument(str(e)) from None
    if idx.ndim != x.ndim or any(i > d for a, (i, d) in enumerate(zip(idx.shape, x.shape)) if a != axis):
        raise InvalidArgument(f"{op}: indices {idx.shape} must have data's rank, no dim but axis {axis}'s larger "
                              f"than data's {x.shape}")
    return axis


def flat_positions(data_shape, idx, axis):
    """Flat (C order) positions in data of shape data_shape of the elements indices address along axis: indices
    (already non-negative) on axis, their own coordinate on every other axis. One broadcasting add per dim."""
    strides = [1] * len(data_shape)
    for d in range(len(data_shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * data_shape[d + 1]
    flat = idx.astype(np.int64) * strides[axis]
    for d, n in enumerate(idx.shape):
        if d != axis and n > 1:
            flat += (np.arange(n, dtype=np.int64) * strides[d]).reshape((n,) + (1,) * (idx.ndim - 1 - d))
    return flat


class GatherElements_11(OpKernel):
    """Y[i..] := data[.., indices[i..], ..] with indices in place of the axis coordinate (opsets 11, 13). Negative
    indices count from the end; out-of-range ones raise."""

    domain, op_type, since = "", "GatherElements", 11
    type_constraints = {"T": ALL_TYPES, "Tind": INDEX_TYPES}
    axis = 0

    def compute(self, ctx):
        x, idx = ctx.input(0), ctx.input(1)
        axis = along_axis_checks("GatherElements", x, idx, self.axis)
        idx = normalize_indices(idx, x.shape[axis], "GatherElements", f" for axis {axis} of data shape {x.shape}")
        y = new_output(ctx, 0, idx.shape, x.dtype, f"GatherElements node {self.name!r}")
        if y.size:
            np.take(x.reshape(-1), flat_positions(x.shape, idx, axis), out=y)

    def c_step(self, ins, outs, nthreads):
        """RL_GATHER_ELEMENTS (rl_gather_elements, onnxep/_native/rl_ops.h): the indices read per run (one out of range stops
        the compiled run; the Python step then raises the named error)."""
        if type(self).compute is not GatherElements_11.compute or "compute" in self.__dict__:
            return None
        x, idx, y = ins[0], ins[1], outs[0]
        if (not _c_steps.plain(x, idx, y) or idx.dtype not in (np.int64, np.int32) or y.dtype != x.dtype
                or y.shape != idx.shape or y.size == 0 or not 0 < x.ndim <= _c_steps.MAXD or idx.ndim != x.ndim
                or not _c_steps.apart(y, x, idx)):
            return None
        axis = self.axis
        if not -x.ndim <= axis < x.ndim:
            return None
        axis %= x.ndim
        if any(i > d for a, (i, d) in enumerate(zip(idx.shape, x.shape)) if a != axis) or x.shape[axis] == 0:
            return None
        pad = [0] * (_c_steps.MAXD - x.ndim)
        return ("gather_elements", [0, 1, ~0], [x.ndim, axis, x.shape[axis], x.itemsize, idx.itemsize,
                                                *idx.shape, *pad, *x.strides, *pad], [])
