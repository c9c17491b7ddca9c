"""InstanceNormalization (opsets 6, 22): y := scale * (x - mean) / sqrt(var + epsilon) + B, the statistics per
instance and channel over the spatial dims. float16 is computed in float32, float64 in float64."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, acc_dtype, bad


class InstanceNormalization_6(OpKernel):
    domain, op_type, since = "", "InstanceNormalization", 6
    type_constraints = {"T": FLOATS}
    epsilon = 1e-5

    def compute(self, ctx):
        x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
        if x.ndim < 2:
            raise bad("InstanceNormalization", f"input must have rank >= 2 (N x C x ...), got shape {x.shape}")
        N, C = x.shape[:2]
        for name, v in (("scale", scale), ("B", bias)):
            if v.shape != (C,):
                raise bad("InstanceNormalization", f"{name} has shape {v.shape}, expected ({C},) for input {x.shape}")
        y = ctx.output(0, x.shape, x.dtype)
        if y.size == 0:
            return
        acc = acc_dtype(x.dtype)
        xr = x.reshape(N, C, -1)
        d = y.reshape(N, C, -1) if acc == x.dtype else np.empty(xr.shape, acc)
        mean = np.mean(xr, axis=2, keepdims=True, dtype=acc)
        np.subtract(xr, mean, out=d)
        var = np.einsum("ncs,ncs->nc", d, d)[:, :, None]
        var /= d.shape[2]
        var += self.epsilon
        np.sqrt(var, out=var)
        np.divide(scale.astype(acc, copy=False)[:, None], var, out=var)
        np.multiply(d, var, out=d)
        np.add(d, bias.astype(acc, copy=False)[:, None], out=d)
        if d.dtype != y.dtype:
            np.copyto(y.reshape(d.shape), d, casting="same_kind")
