"""GlobalLpPool (opsets 2, 22): Y[n, c] := (sum over the spatial dims of |X[n, c]|^p)^(1/p), spatial dims kept as 1.
float16 / float32 / float64 (float16 summed in float32)."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, acc_dtype, bad
from onnxep.ops.nn.lp_pool import _powered, _root


class GlobalLpPool_2(OpKernel):
    domain, op_type, since = "", "GlobalLpPool", 2
    type_constraints = {"T": FLOATS}
    p = 2

    @classmethod
    def supports(cls, op):
        return int(op.node.attrs.get("p", 2)) >= 1

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim < 2:
            raise bad("GlobalLpPool", f"input must have rank >= 2 (N x C x ...), got shape {x.shape}")
        y = ctx.output(0, x.shape[:2] + (1,) * (x.ndim - 2), x.dtype)
        if y.size == 0:
            return
        p = int(self.p)
        acc = acc_dtype(x.dtype)
        s = np.sum(_powered(x, p, acc).reshape(x.shape[0], x.shape[1], -1), axis=2)
        np.copyto(y.reshape(s.shape), _root(s, p), casting="same_kind")
