"""InstanceNormalization (opsets 6, 22): y := scale * (x - mean) / sqrt(var + epsilon) + B, the statistics per
instance and channel over the spatial dims. float16 is computed in float32, float64 in float64."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, bad, centred_and_std


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
        d, std = centred_and_std(x.reshape(N, C, -1), y.reshape(N, C, -1), self.epsilon)
        np.divide(scale.astype(d.dtype, copy=False)[:, None], std, out=std)
        np.multiply(d, std, out=d)
        np.add(d, bias.astype(d.dtype, copy=False)[:, None], out=d)
        if d.dtype != y.dtype:
            np.copyto(y.reshape(d.shape), d, casting="same_kind")
