import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import NUM4, output

F32 = np.float32


class Normalizer_1(OpKernel):
    """Each row of X (1-D: one row) divided by its MAX (the largest value), L1 or L2 norm, in float32 as onnxruntime;
    a row whose norm is 0 is copied."""

    domain, op_type, since = "ai.onnx.ml", "Normalizer", 1
    type_constraints = {"T": NUM4}

    @classmethod
    def supports(cls, op):
        return op.node.attrs.get("norm", "MAX") in ("MAX", "L1", "L2")

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"Normalizer node {self.name!r}"
        if x.ndim > 2:
            raise InvalidArgument(f"{what}: X must be 1-D or 2-D, got shape {x.shape}")
        x2 = x.reshape(1, -1) if x.ndim <= 1 else x
        xf = x2.astype(F32)
        norm = self.norm
        if norm == "MAX":
            d = xf.max(axis=1, initial=-np.finfo(F32).max, keepdims=True)
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(d != 0, xf / d, xf)
        elif norm == "L1":
            d = np.abs(x2).astype(F32).sum(axis=1, keepdims=True, dtype=F32)
            with np.errstate(divide="ignore", invalid="ignore"):
                r = np.where(d != 0, xf / d, xf)
        else:
            sq = (x2 * x2).astype(F32)
            d = sq.sum(axis=1, keepdims=True, dtype=F32)
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.sqrt(sq / d)
                r = np.where(d != 0, np.where(x2 < 0, -v, v), xf)
        y = output(ctx, 0, x.shape, F32, what)
        y[...] = r.reshape(x.shape)
