"""InstanceNormalization (opsets 6, 22): y := scale * (x - mean) / sqrt(var + epsilon) + B, the statistics per
instance and channel over the spatial dims. float16 is computed in float32, float64 in float64. float32: the native
GroupNorm kernel with one channel per group (_kernels.group_norm_f32), also as the compiled run loop's step."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import F32, OpKernel
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
        if x.dtype == F32 and scale.dtype == F32 and bias.dtype == F32:
            x = np.ascontiguousarray(x)
            _kernels.group_norm_f32(x.reshape(-1), y.reshape(-1), N, C, x.size // max(N * C, 1), C,
                                    np.ascontiguousarray(scale), np.ascontiguousarray(bias), float(self.epsilon),
                                    False, 0, ctx.num_threads)
            return
        d, std = centred_and_std(x.reshape(N, C, -1), y.reshape(N, C, -1), self.epsilon)
        np.divide(scale.astype(d.dtype, copy=False)[:, None], std, out=std)
        np.multiply(d, std, out=d)
        np.add(d, bias.astype(d.dtype, copy=False)[:, None], out=d)
        if d.dtype != y.dtype:
            np.copyto(y.reshape(d.shape), d, casting="same_kind")

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: RL_GROUP_NORM with one channel per group (float32, C-contiguous)."""
        x, scale, bias, y = ins[0], ins[1], ins[2], outs[0]
        if x.dtype != F32 or y.dtype != F32 or x.ndim < 2 or x.shape != y.shape or not x.flags.c_contiguous \
                or y.size == 0:
            return None
        N, C = x.shape[:2]
        for v in (scale, bias):
            if v.dtype != F32 or v.shape != (C,) or not v.flags.c_contiguous:
                return None
        return "group_norm", [0, 1, 2, ~0], [N, C, x.size // (N * C), C, 0, 0], [float(self.epsilon)]
