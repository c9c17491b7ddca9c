import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.reduce._arg import ARG_TYPES


class TopK_1(OpKernel):
    """Values, Indices := the k largest (largest=0: smallest) elements of X along axis, in order, and their int64
    indices; equal values keep their index order (the lower index first), as onnxruntime. k an attribute (opset 1).
    sorted=0 still returns them sorted (any order is allowed)."""

    domain, op_type, since = "", "TopK", 1
    type_constraints = {"T": ARG_TYPES, "I": ("int64",)}
    axis = -1
    k = None
    largest = 1
    sorted = 1

    def get_k(self, ctx):
        if self.k is None:
            raise InvalidArgument("TopK: attribute k is required (opset 1)")
        return int(self.k)

    def compute(self, ctx):
        x = ctx.input(0)
        k = self.get_k(ctx)
        rank = x.ndim
        if not -rank <= self.axis < rank:
            raise InvalidArgument(f"TopK: axis {self.axis} is out of range for input of rank {rank}")
        axis = self.axis % rank
        n = x.shape[axis]
        if not 0 <= k <= n:
            raise InvalidArgument(f"TopK: k must be in [0, {n}] (the size of axis {axis} of input shape {x.shape}), "
                                  f"got {k}")
        shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
        values = ctx.output(0, shape, x.dtype)
        indices = ctx.output(1, shape, np.int64)
        if values.size == 0:
            return
        keys = x.astype(np.float32) if x.dtype.name == "bfloat16" else x
        if self.largest:
            # descending with ties by ascending index: a stable ascending sort of the reversed axis, read backwards
            order = np.argsort(np.flip(keys, axis), axis=axis, kind="stable")
            order = np.flip(order, axis)[_head(axis, k, rank)]
            np.subtract(n - 1, order, out=indices)
        else:
            indices[...] = np.argsort(keys, axis=axis, kind="stable")[_head(axis, k, rank)]
        values[...] = np.take_along_axis(x, indices, axis=axis)


class TopK_10(TopK_1):
    """TopK with k an input (a one-element int64 tensor) (opset 10; largest, sorted and negative axis from 11; bfloat16
    from 24)"""

    since = 10

    def get_k(self, ctx):
        k = ctx.input(1)
        if k is None or k.size != 1:
            raise InvalidArgument(f"TopK: input K must hold one value, got shape {None if k is None else k.shape}")
        return int(k.reshape(-1)[0])


def _head(axis, k, rank):
    """the index selecting the first k entries along axis"""
    return (slice(None),) * axis + (slice(0, k),) + (slice(None),) * (rank - axis - 1)
