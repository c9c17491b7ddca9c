"""ChannelAffine (domain com.onnxep): y = act(x * a + b) with one a and b per channel of the LAST axis -- what the
layout pass makes of a BatchNormalization on channel-last activations, with the per-channel Mul / Add and the Relu
after it folded in (graph/passes/fuse_channel_affine.py). Written by passes, never by users. activation: "" or
"Relu"."""
import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import F32, OpKernel, f32_shape

DOMAIN = "com.onnxep"


class ChannelAffine_1(OpKernel):
    domain, op_type, since = DOMAIN, "ChannelAffine", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    activation = ""

    @classmethod
    def supports(cls, op):
        if len(op.node.inputs) != 3 or len(op.node.outputs) != 1 or not all(op.node.inputs):
            return False
        if op.node.attrs.get("activation", "") not in ("", "Relu"):
            return False
        shape = f32_shape(op.input_types[0])
        if not shape:
            return False
        c = shape[-1]
        return all(i in op.constants and op.constants[i].dtype == F32 and op.constants[i].shape == (c,)
                   for i in (1, 2))

    def compute(self, ctx):
        x, a, b = ctx.input(0), ctx.input(1), ctx.input(2)
        c = x.shape[-1] if x.ndim else 0
        if a.shape != (c,) or b.shape != (c,):
            raise ValueError(f"ChannelAffine: X has {c} channels (last axis) but a / b have shapes {a.shape} / "
                             f"{b.shape}")
        y = ctx.output(0, x.shape, np.float32)
        _kernels.channel_affine_f32(x.reshape(-1, c), y.reshape(-1, c), a, b, self.activation == "Relu",
                                    ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_ROWS, kind 1): compute's channel_affine_f32 rows."""
        if type(self).compute is not ChannelAffine_1.compute or "compute" in self.__dict__:
            return None
        x, a, b, y = ins[0], ins[1], ins[2], outs[0]
        if (not _c_steps.plain(x, a, b, y) or any(v.dtype != F32 for v in (x, a, b, y)) or x.ndim < 1
                or y.shape != x.shape or a.shape != (x.shape[-1],) or b.shape != a.shape or not _c_steps.apart(y, x)):
            return None
        c = x.shape[-1]
        return "rows", [0, 1, 2, ~0], [x.size // max(c, 1), c, 1, 1 if self.activation == "Relu" else 0, 0, 0, 1], []
