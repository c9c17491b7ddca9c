import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel


def _clip(x, lo, hi, ctx):
    y = ctx.output(0, x.shape, np.float32)
    _kernels.clip_f32(x.reshape(-1), y.reshape(-1), lo, hi, ctx.num_threads)


class Clip_6(OpKernel):
    """Y := min(max(X, min), max), bounds as attributes (opset 6; float32)"""

    domain, op_type, since = "", "Clip", 6
    type_constraints = {"T": ("float32",)}
    inplace = ((0, 0),)

    def compute(self, ctx):
        _clip(ctx.input(0), float(self.min), float(self.max), ctx)


class Clip_11(OpKernel):
    """Y := min(max(X, min), max), bounds as optional scalar inputs; omitted = unbounded (opsets 11, 12, 13;
    float32)"""

    domain, op_type, since = "", "Clip", 11
    type_constraints = {"T": ("float32",)}
    inplace = ((0, 0),)

    @staticmethod
    def _bound(v, which, default):
        if v is None:
            return default
        if v.size != 1:
            raise ValueError(f"Clip: {which} must be a scalar, got shape {v.shape}")
        return float(v.reshape(-1)[0])

    def compute(self, ctx):
        lo = self._bound(ctx.input(1), "min", -np.inf)
        hi = self._bound(ctx.input(2), "max", np.inf)
        _clip(ctx.input(0), lo, hi, ctx)
