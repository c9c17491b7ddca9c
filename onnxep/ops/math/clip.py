import numpy as np

from onnxep import _kernels
from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.math._numpy import FLOATS, NUMERIC, NativeOrNumpy


def _clip(x, lo, hi, ctx):
    y = ctx.output(0, x.shape, np.float32)
    _kernels.clip_f32(x.reshape(-1), y.reshape(-1), lo, hi, ctx.num_threads)


def _clip_numpy(x, lo, hi, ctx):
    """min(max(x, lo), hi) in X's dtype (lo > hi gives hi everywhere, as onnxruntime); None: that side unbounded."""
    y = ctx.output(0, x.shape, x.dtype)
    if not y.size:
        return
    if lo is None and hi is None:
        np.copyto(y, x)
        return
    with np.errstate(all="ignore"):
        if lo is not None:
            np.maximum(x, lo, out=y)
        if hi is not None:
            np.minimum(x if lo is None else y, hi, out=y)


class Clip_6(NativeOrNumpy, OpKernel):
    """Y := min(max(X, min), max), bounds as attributes (opset 6; float32 native, float16/64 numpy)"""

    domain, op_type, since = "", "Clip", 6
    type_constraints = {"T": FLOATS}
    inplace = ((0, 0),)

    def compute(self, ctx):
        _clip(ctx.input(0), float(self.min), float(self.max), ctx)

    def compute_numpy(self, ctx):
        x = ctx.input(0)
        _clip_numpy(x, x.dtype.type(self.min), x.dtype.type(self.max), ctx)


class Clip_11(NativeOrNumpy, OpKernel):
    """Y := min(max(X, min), max), bounds as optional scalar inputs; omitted = unbounded (opsets 11, 12, 13;
    float32 native, the other numeric dtypes (opset 12) numpy)"""

    domain, op_type, since = "", "Clip", 11
    type_constraints = {"T": NUMERIC}
    inplace = ((0, 0),)

    @staticmethod
    def _bound(v, which, default):
        if v is None:
            return default
        if v.size != 1:
            raise InvalidArgument(f"Clip: {which} must be a scalar, got shape {v.shape}")
        return v.reshape(-1)[0] if default is None else float(v.reshape(-1)[0])

    def compute(self, ctx):
        lo = self._bound(ctx.input(1), "min", -np.inf)
        hi = self._bound(ctx.input(2), "max", np.inf)
        _clip(ctx.input(0), lo, hi, ctx)

    def compute_numpy(self, ctx):
        _clip_numpy(ctx.input(0), self._bound(ctx.input(1), "min", None), self._bound(ctx.input(2), "max", None), ctx)
