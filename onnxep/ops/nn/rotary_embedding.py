"""RotaryEmbedding (opset 23): rotate the first rotary_embedding_dim features of every head by the position's angle,
(x1, x2) -> (cos * x1 - sin * x2, sin * x1 + cos * x2), x1 / x2 the two halves (or the even / odd features when
interleaved). X is (batch, heads, seq, head_size), or (batch, seq, hidden) with num_heads; cos / sin caches are
(batch, seq, dim / 2), or (max_position, dim / 2) read at position_ids (batch, seq). float16 / float32 (float16
computed in float32); a handful of whole-array multiply-adds."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import bad

_OP = "RotaryEmbedding"


class RotaryEmbedding_23(OpKernel):
    domain, op_type, since = "", "RotaryEmbedding", 23
    type_constraints = {"T": ("float16", "float32"), "M": ("int64",)}
    interleaved = 0
    num_heads = 0
    rotary_embedding_dim = 0

    def compute(self, ctx):
        x, cos, sin, pos = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
        y = ctx.output(0, x.shape, x.dtype)
        if x.ndim == 4:
            B, H, S, D = x.shape
            xv, yv = x.transpose(0, 2, 1, 3), y.transpose(0, 2, 1, 3)       # (B, S, H, D) views
        elif x.ndim == 3:
            B, S, hidden = x.shape
            H = int(self.num_heads)
            if H <= 0 or hidden % H:
                raise bad(_OP, f"3-D input of hidden size {hidden} needs num_heads dividing it, got {H}")
            D = hidden // H
            xv, yv = x.reshape(B, S, H, D), y.reshape(B, S, H, D)
        else:
            raise bad(_OP, f"input must be 3-D or 4-D, got shape {x.shape}")
        rot = int(self.rotary_embedding_dim) or D
        if rot > D or rot % 2:
            raise bad(_OP, f"rotary_embedding_dim {rot} must be even and at most the head size {D}")
        half = rot // 2
        if pos is not None:
            if pos.shape != (B, S):
                raise bad(_OP, f"position_ids has shape {pos.shape}, expected {(B, S)}")
            if cos.ndim != 2 or sin.shape != cos.shape:
                raise bad(_OP, f"with position_ids, cos / sin caches must be (max_position, {half}), got "
                               f"{cos.shape} / {sin.shape}")
            if pos.size and (pos.min() < 0 or pos.max() >= cos.shape[0]):
                raise bad(_OP, f"position_ids must be in [0, {cos.shape[0] - 1}], got values in "
                               f"[{pos.min()}, {pos.max()}]")
            cos, sin = cos[pos], sin[pos]
        if cos.shape != (B, S, half) or sin.shape != (B, S, half):
            raise bad(_OP, f"cos / sin caches {cos.shape} / {sin.shape} must be {(B, S, half)} for input {x.shape}")
        if y.size == 0:
            return
        acc = np.float32
        c = cos.astype(acc, copy=False)[:, :, None, :]
        s = sin.astype(acc, copy=False)[:, :, None, :]
        if int(self.interleaved):
            x1, x2 = xv[..., 0:rot:2], xv[..., 1:rot:2]
            y1, y2 = yv[..., 0:rot:2], yv[..., 1:rot:2]
        else:
            x1, x2 = xv[..., :half], xv[..., half:rot]
            y1, y2 = yv[..., :half], yv[..., half:rot]
        x1 = x1.astype(acc, copy=False)
        x2 = x2.astype(acc, copy=False)
        np.copyto(y1, c * x1 - s * x2, casting="same_kind")
        np.copyto(y2, s * x1 + c * x2, casting="same_kind")
        if rot < D:
            yv[..., rot:] = xv[..., rot:]
