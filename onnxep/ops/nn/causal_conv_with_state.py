"""CausalConvWithState (opset 27): causal depthwise 1-D convolution carrying state. padded := concat(past_state or
zeros (B, C, k-1), input) on the length axis; output[b, c, t] := sum_j weight[c, 0, j] * padded[b, c, t + j]
(+ bias[c]), then SiLU (x * sigmoid(x)) when activation is silu / swish; present_state := the last k-1 positions of
padded. float16 / float32 (float16 accumulated in float32); a loop over the k taps."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import bad

_OP = "CausalConvWithState"


class CausalConvWithState_27(OpKernel):
    domain, op_type, since = "", "CausalConvWithState", 27
    type_constraints = {"T": ("float16", "float32")}
    activation = "none"

    @classmethod
    def supports(cls, op):
        a = op.node.attrs.get("activation", "none")
        return a in ("none", "silu", "swish")

    def compute(self, ctx):
        x, w, b, past = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
        if x.ndim != 3:
            raise bad(_OP, f"input must be (batch, channels, length), got shape {x.shape}")
        B, C, L = x.shape
        if w.ndim != 3 or w.shape[:2] != (C, 1) or w.shape[2] < 1:
            raise bad(_OP, f"weight has shape {w.shape}, expected ({C}, 1, k)")
        k = w.shape[2]
        if b is not None and b.shape != (C,):
            raise bad(_OP, f"bias has shape {b.shape}, expected ({C},)")
        if past is not None and past.shape != (B, C, k - 1):
            raise bad(_OP, f"past_state has shape {past.shape}, expected {(B, C, k - 1)}")
        y = ctx.output(0, x.shape, x.dtype)
        state = ctx.output(1, (B, C, k - 1), x.dtype) if ctx.has_output(1) else None
        padded = np.empty((B, C, k - 1 + L), x.dtype)
        if past is None:
            padded[:, :, :k - 1] = 0
        else:
            padded[:, :, :k - 1] = past
        padded[:, :, k - 1:] = x
        acc = np.float32
        total = np.empty((B, C, L), acc)
        total[...] = 0 if b is None else b.astype(acc)[:, None]
        wa = w.astype(acc, copy=False)
        for j in range(k):     # the kernel taps
            total += padded[:, :, j:j + L] * wa[:, 0, j:j + 1]
        if x.dtype != acc:   # the conv result is cast to T before the activation (onnx.reference)
            total = total.astype(x.dtype).astype(acc)
        if self.activation in ("silu", "swish"):
            sig = np.negative(total)
            np.exp(sig, out=sig)
            sig += 1
            np.divide(total, sig, out=total)
        np.copyto(y, total, casting="same_kind")
        if state is not None:
            state[...] = padded[:, :, L:]

