import math

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


def nd_rows(data_shape, idx, b, what):
    """Row numbers of the slices idx (..., k) picks in data viewed as [prod(data_shape[:b+k]), inner]: the first b dims
    of idx and data are batch dims matched one to one. Negative indices count from the end; out of range raises."""
    k = idx.shape[-1]
    if b + k > len(data_shape):
        raise InvalidArgument(f"{what}: indices' last dim {k} plus batch_dims {b} exceeds data's rank "
                              f"{len(data_shape)}")
    if idx.shape[:b] != tuple(data_shape[:b]):
        raise InvalidArgument(f"{what}: the first {b} (batch) dims of indices {idx.shape} and data "
                              f"{tuple(data_shape)} must match")
    rows = np.zeros(idx.shape[:-1], np.int64)
    for j in range(k):   # one vector op per indexed dim
        n = data_shape[b + j]
        col = idx[..., j].astype(np.int64, copy=False)
        if col.size and (col.min() < -n or col.max() >= n):
            raise InvalidArgument(f"{what}: indices[..., {j}] must be in [{-n}, {n - 1}] for data shape "
                                  f"{tuple(data_shape)}, got values in [{col.min()}, {col.max()}]")
        rows *= n
        rows += np.where(col < 0, col + n, col)
    if b:
        batch = math.prod(data_shape[:b])
        per = math.prod(data_shape[b:b + k])
        rows += (np.arange(batch, dtype=np.int64) * per).reshape(idx.shape[:b] + (1,) * (idx.ndim - 1 - b))
    return rows


class GatherND_11(OpKernel):
    """Y := the slices of data that the last dim of indices addresses, the first batch_dims dims of both matched
    (opsets 11, 12 (batch_dims), 13). One take over data's rows."""

    domain, op_type, since = "", "GatherND", 11
    type_constraints = {"T": ALL_TYPES}
    batch_dims = 0

    def compute(self, ctx):
        x, idx = ctx.input(0), ctx.input(1)
        b = int(self.batch_dims)
        if idx.ndim < 1 or not 0 <= b < min(x.ndim, idx.ndim):
            raise InvalidArgument(f"GatherND: batch_dims {b} must be below the ranks of data {x.shape} and indices "
                                  f"{idx.shape}")
        what = f"GatherND node {self.name!r}"
        rows = nd_rows(x.shape, idx, b, what)
        inner = x.shape[b + idx.shape[-1]:]
        y = new_output(ctx, 0, idx.shape[:-1] + inner, x.dtype, what)
        if y.size:
            np.take(x.reshape((-1,) + inner), rows, axis=0, out=y)

    def c_step(self, ins, outs, nthreads):
        """RL_GATHER_ND (rl_gather_nd, onnxep/_native/rl_ops.h): the rows compute takes, the indices read per run (one out of
        range stops the compiled run; the Python step then raises the named error)."""
        if type(self).compute is not GatherND_11.compute or "compute" in self.__dict__:
            return None
        x, idx, y = ins[0], ins[1], outs[0]
        b = int(self.batch_dims)
        if (not _c_steps.plain(x, idx, y) or idx.dtype not in (np.int64, np.int32) or y.dtype != x.dtype
                or idx.ndim < 1 or not 0 <= b < min(x.ndim, idx.ndim) or not _c_steps.apart(y, x, idx)):
            return None
        k = idx.shape[-1]
        if not 0 < k <= _c_steps.MAXD or b + k > x.ndim or idx.shape[:b] != x.shape[:b]:
            return None
        inner = x.shape[b + k:]
        n = math.prod(idx.shape[:-1])
        if y.shape != idx.shape[:-1] + inner or n == 0 or y.size == 0:
            return None
        batch = math.prod(x.shape[:b])
        dims = list(x.shape[b:b + k])
        mult = [math.prod(dims[j + 1:]) for j in range(k)]
        pad = [0] * (_c_steps.MAXD - k)
        return ("gather_nd", [0, 1, ~0], [n, k, n // batch, math.prod(dims), math.prod(inner) * x.itemsize,
                                          idx.itemsize, *dims, *pad, *mult, *pad], [])
