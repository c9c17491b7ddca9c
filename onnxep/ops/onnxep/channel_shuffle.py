"""ChannelShuffle (domain com.onnxep): ShuffleNet's channel shuffle on the LAST axis, y[..., c*G + g] =
x[..., g*Cg + c] for g < G = `group`, c < Cg = C / G -- what graph/passes/layout_nhwc.py (channel_shuffle) makes of the
Reshape (..., G, Cg) -> Transpose (swap the last two) -> Reshape (..., C) chain on channel-last activations, one
copy instead of three nodes. Written by passes, never by users."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor.transpose import _NATIVE_ITEMSIZES, transpose_step

DOMAIN = "com.onnxep"


class ChannelShuffle_1(OpKernel):
    domain, op_type, since = DOMAIN, "ChannelShuffle", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    group = 1

    @classmethod
    def supports(cls, op):
        vt = op.input_types[0] if op.input_types else None
        dt = vt.dtype if vt is not None else None
        g = int(op.node.attrs.get("group", 0) or 0)
        return (len(op.node.inputs) == 1 and len(op.node.outputs) == 1 and dt is not None and not dt.hasobject
                and dt.itemsize in _NATIVE_ITEMSIZES and g >= 1)

    _plan = None     # (X shape, dtype, P, G, C // G): the last seen, checked

    def compute(self, ctx):
        x = ctx.values[ctx.ins[0]]
        plan = self._plan
        if plan is None or plan[0] != x.shape or plan[1] != x.dtype:
            G = int(self.group)
            C = x.shape[-1] if x.ndim else 0
            if x.ndim < 1 or C % G:
                raise ValueError(f"ChannelShuffle: the last axis of X (shape {x.shape}) must be a multiple of "
                                 f"group={G}")
            plan = self._plan = (x.shape, x.dtype, x.size // C if C else 0, G, C // G)
        shape, dtype, P, G, Cg = plan
        y = ctx.output(0, shape, dtype)
        if dtype.itemsize == 4:
            _kernels.channel_shuffle_4b(np.ascontiguousarray(x).reshape(-1).view(np.float32), P, G, Cg,
                                        y.reshape(-1).view(np.float32), ctx.num_threads)
            return
        _kernels.transpose_copy(np.ascontiguousarray(x).reshape(-1).view(np.uint8), (P, G, Cg), (0, 2, 1),
                                x.itemsize, y.reshape(-1).view(np.uint8), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: the (P, G, Cg) -> (P, Cg, G) copy as an RL_TRANSPOSE step (transpose_copy's
        plan, the same kernels compute runs), for the shape compute last planned."""
        plan, x, y = self._plan, ins[0], outs[0]
        if plan is None or plan[0] != x.shape or plan[1] != x.dtype:
            return None
        _, _, P, G, Cg = plan
        return transpose_step(x, y, (P, G, Cg), (0, 2, 1), nthreads)
