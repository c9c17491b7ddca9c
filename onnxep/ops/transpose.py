import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops._data import DATA_TYPES


class Transpose_1(OpKernel):
    """Y := X with its dims permuted by perm (default: reversed) (opsets 1, 13, 21). Copied into a new tensor."""

    domain, op_type, since = "", "Transpose", 1
    type_constraints = {"T": DATA_TYPES}
    perm = None

    def compute(self, ctx):
        x = ctx.input(0)
        perm = list(range(x.ndim))[::-1] if self.perm is None else [int(p) for p in self.perm]
        if sorted(perm) != list(range(x.ndim)):
            raise ValueError(f"Transpose: perm {perm} is not a permutation of the {x.ndim} dims of input shape "
                             f"{x.shape}")
        xt = x.transpose(perm)
        y = ctx.output(0, xt.shape, x.dtype)
        np.copyto(y, xt)
