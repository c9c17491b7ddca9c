import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES


class NonZero_9(OpKernel):
    """Y := the indices of the non-zero elements of X, [rank, count] int64 in C order (opsets 9, 13). A scalar counts
    as shape [1], as onnxruntime does."""

    domain, op_type, since = "", "NonZero", 9
    type_constraints = {"T": ALL_TYPES}

    def compute(self, ctx):
        x = ctx.input(0)
        if not x.ndim:
            x = x.reshape(1)
        nz = np.nonzero(x.astype(bool) if x.dtype.hasobject else x)
        y = ctx.output(0, (x.ndim, nz[0].size), np.int64)
        for d, v in enumerate(nz):   # one row per dim
            y[d] = v
