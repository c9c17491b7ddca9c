import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel

_WIDEN = ("float16", "bfloat16")


class Det_11(OpKernel):
    """Y := the determinants of the square matrices in the last two dims of X ([*, M, M] -> [*]) (opsets 11, 22; 22
    adds bfloat16). One batched numpy.linalg.det (LU with partial pivoting, LAPACK getrf) call; float16 and bfloat16
    are computed in float32 and rounded once."""

    domain, op_type, since = "", "Det", 11
    type_constraints = {"T": ("float32", "float64", "float16", "bfloat16")}

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
            raise InvalidArgument(f"Det node {self.name!r}: the input must be [*, M, M] (square matrices in the last "
                                  f"two dims), got shape {x.shape}")
        xc = x.astype(np.float32) if x.dtype.name in _WIDEN else x
        d = np.linalg.det(xc)
        y = ctx.output(0, x.shape[:-2], x.dtype)
        np.copyto(y, d, casting="unsafe")
