"""RotaryHalf (domain com.onnxep): Y = X * Cos + Concat(-X[..., B:], X[..., :A], axis=-1) * Sin, what
graph/passes/fuse_rotary.py makes of the rotate_half rotary embedding exporters write (two Slices of the last axis,
Neg, Concat, two Muls, Add). Inputs X, Cos, Sin (float32, broadcast as the Muls / Add broadcast), A (int64, one
element: the first Slice's end) and B (int64, one element: the second Slice's start), each Slice-clamped to the last
dim as Slice does. Written by passes, never by users.

Fast path (A == B == D / 2, Cos / Sin broadcast to X): per half, y1 = x1 * c1 - x2 * s1 and y2 = x2 * c2 + x1 * s2
written into Y's halves (six numpy calls on half-size views, no concatenated temporary); otherwise the numpy
expression itself."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel, f32_shape

DOMAIN = "com.onnxep"


def _halves(t, h):
    """(first half, second half) of t's last axis when it has 2h elements, (t, t) when it has 1 (broadcast)."""
    if t.shape[-1] == 1:
        return t, t
    return t[..., :h], t[..., h:]


def _fits(t, shape, d) -> bool:
    """t broadcasts to `shape` (without growing it) and its last dim is d or 1."""
    if t.ndim > len(shape) or t.shape[-1] not in (1, d):
        return False
    return all(s == 1 or s == n for s, n in zip(t.shape[::-1], shape[::-1]))


class RotaryHalf_1(OpKernel):
    domain, op_type, since = DOMAIN, "RotaryHalf", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types

    @classmethod
    def supports(cls, op):
        n = op.node
        if len(n.inputs) != 5 or len(n.outputs) != 1 or not all(n.inputs):
            return False
        if any(f32_shape(t) is None for t in op.input_types[:3]):
            return False
        return all(t is not None and t.type_str == "tensor(int64)" for t in op.input_types[3:5])

    def compute(self, ctx):
        x, cos, sin = ctx.input(0), ctx.input(1), ctx.input(2)
        a_t, b_t = ctx.input(3), ctx.input(4)
        if a_t.size != 1 or b_t.size != 1 or x.ndim == 0:
            raise InvalidArgument(f"RotaryHalf {self.name}: split points must hold one value each and X a rank >= 1 "
                                  f"tensor (got {a_t.shape}, {b_t.shape}, X {x.shape})")
        d = x.shape[-1]
        a, b = int(a_t.item()), int(b_t.item())
        a = min(max(a + d if a < 0 else a, 0), d)        # as Slice clamps an end / a start
        b = min(max(b + d if b < 0 else b, 0), d)
        h = d // 2
        if (a == h and b == h and h > 0 and d % 2 == 0 and _fits(cos, x.shape, d) and _fits(sin, x.shape, d)):
            y = ctx.output(0, x.shape, np.float32)
            x1, x2 = x[..., :h], x[..., h:]
            c1, c2 = _halves(cos, h)
            s1, s2 = _halves(sin, h)
            y1, y2 = y[..., :h], y[..., h:]
            tmp = np.multiply(x2, s1)
            np.multiply(x1, c1, out=y1)
            np.subtract(y1, tmp, out=y1)
            np.multiply(x1, s2, out=tmp)
            np.multiply(x2, c2, out=y2)
            np.add(y2, tmp, out=y2)
            return
        try:
            rot = np.concatenate([np.negative(x[..., b:]), x[..., :a]], axis=-1)
            val = np.multiply(x, cos) + np.multiply(rot, sin)
        except ValueError as e:
            raise InvalidArgument(f"RotaryHalf {self.name}: X {x.shape}, Cos {cos.shape}, Sin {sin.shape} with split "
                                  f"points {a}, {b}: {e}") from None
        y = ctx.output(0, val.shape, np.float32)
        y[...] = val
