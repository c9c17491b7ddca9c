"""GroupNormalization: y := scale * (x - mean) / sqrt(var + epsilon) + bias, the statistics per instance and group of
C / num_groups channels. Opset 18 takes scale and bias per group (G,), opset 21 per channel (C,). The first stage
runs in float32 (stash_type 1; float64 input keeps float64), the result is cast back to x's type."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, bad, centred_and_std, inputs_typed


class GroupNormalization_18(OpKernel):
    domain, op_type, since = "", "GroupNormalization", 18
    type_constraints = {"T": FLOATS}
    epsilon = 1e-5
    stash_type = 1
    num_groups = None
    per_channel = False

    @classmethod
    def check_types(cls, op):
        # the inputs only: onnx's shape inference leaves the output of the opset-18 function untyped
        return inputs_typed(op, FLOATS, (0, 1, 2)) and len({op.input_types[i].dtype for i in range(3)}) == 1

    @classmethod
    def supports(cls, op):
        return int(op.node.attrs.get("stash_type", 1)) == 1 and op.node.attrs.get("num_groups") is not None

    def compute(self, ctx):
        x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
        G = int(self.num_groups)
        if x.ndim < 2:
            raise bad("GroupNormalization", f"input must have rank >= 2 (N x C x ...), got shape {x.shape}")
        N, C = x.shape[:2]
        if G <= 0 or C % G:
            raise bad("GroupNormalization", f"num_groups {G} must be positive and divide the {C} channels")
        want = (C,) if self.per_channel else (G,)
        for name, v in (("scale", scale), ("bias", bias)):
            if v.shape != want:
                raise bad("GroupNormalization", f"{name} has shape {v.shape}, expected {want} "
                                                f"(opset {'21' if self.per_channel else '18'}) for input {x.shape}")
        y = ctx.output(0, x.shape, x.dtype)
        if y.size == 0:
            return
        d, std = centred_and_std(x.reshape(N, G, -1), y.reshape(N, G, -1), self.epsilon)
        np.divide(d, std, out=d)
        if d.dtype != y.dtype:   # stage one ends with the cast back to x's type
            np.copyto(y.reshape(d.shape), d, casting="same_kind")
        if self.per_channel:
            yc = y.reshape(N, C, -1)
            np.multiply(yc, scale[:, None], out=yc)
            np.add(yc, bias[:, None], out=yc)
        else:
            yg = y.reshape(N, G, -1)
            np.multiply(yg, scale[:, None], out=yg)
            np.add(yg, bias[:, None], out=yg)


class GroupNormalization_21(GroupNormalization_18):
    domain, op_type, since = "", "GroupNormalization", 21
    per_channel = True
