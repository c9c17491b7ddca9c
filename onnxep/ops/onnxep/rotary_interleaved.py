"""RotaryInterleaved (domain com.onnxep): Y = X * Cos + Reshape(Stack(-X[..., 1::2], X[..., 0::2], axis=-1), Shape)
* Sin, what graph/passes/fuse_rotary.py makes of the interleaved (GPT-J rotate_every_two) rotary embedding exporters
write (two step-2 Slices of the last axis, Neg, two Unsqueezes, Concat, Reshape, two Muls, Add). Inputs X, Cos, Sin
(float32, broadcast as the Muls / Add broadcast) and Shape (int64: the Reshape's target, 0 copying a dim unless
allowzero, one -1 inferred). Written by passes, never by users.

Fast path (Shape resolves to X's shape, Cos / Sin broadcast to X): rl_rotary_rows (onnxep/_native/rl_ops.h) per row when
rotary_half.rotary_rows applies, in compute and as the compiled run loop's RL_ROTARY step; else the rotated tensor
written pairwise into one buffer (negate the odd elements into the even places, copy the even ones into the odd places), then three products
/ sums in place; otherwise the numpy expression itself."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel, f32_shape
from onnxep.ops.onnxep.rotary_half import _fits, rotary_c, rotary_step

DOMAIN = "com.onnxep"


def _resolve(shape, src_shape, allowzero):
    """Reshape's target of a `src_shape` tensor (0 copies the dim unless allowzero, one -1 inferred), or None."""
    out = [int(d) for d in shape]
    if not allowzero:
        out = [src_shape[i] if d == 0 and i < len(src_shape) else d for i, d in enumerate(out)]
    size = 1
    for d in src_shape:
        size *= d
    if out.count(-1) == 1:
        known = 1
        for d in out:
            if d != -1:
                known *= d
        if known == 0 or size % known:
            return None
        out[out.index(-1)] = size // known
    if any(d < 0 for d in out):
        return None
    n = 1
    for d in out:
        n *= d
    return tuple(out) if n == size else None


class RotaryInterleaved_1(OpKernel):
    domain, op_type, since = DOMAIN, "RotaryInterleaved", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    allowzero = 0
    c_value_inputs = (3,)        # the target shape decides the case

    @classmethod
    def supports(cls, op):
        n = op.node
        if len(n.inputs) != 4 or len(n.outputs) != 1 or not all(n.inputs):
            return False
        if any(f32_shape(t) is None for t in op.input_types[:3]):
            return False
        t = op.input_types[3]
        return t is not None and t.type_str == "tensor(int64)"

    def compute(self, ctx):
        x, cos, sin, shape = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
        d = x.shape[-1] if x.ndim else 0
        if x.ndim == 0 or d % 2:
            raise InvalidArgument(f"RotaryInterleaved {self.name}: X {x.shape} has an odd last dim: its even and odd "
                                  f"halves do not stack")
        stacked = x.shape[:-1] + (d // 2, 2)
        target = _resolve(shape.reshape(-1), stacked, int(self.allowzero or 0))
        if target is None:
            raise InvalidArgument(f"RotaryInterleaved {self.name}: cannot reshape {stacked} to {shape.tolist()}")
        if target == x.shape and _fits(cos, x.shape, d) and _fits(sin, x.shape, d):
            y = ctx.output(0, x.shape, np.float32)
            if rotary_c(x, cos, sin, y, True, ctx.num_threads):
                return
            rot = np.empty(x.shape, np.float32)
            np.negative(x[..., 1::2], out=rot[..., 0::2])
            rot[..., 1::2] = x[..., 0::2]
            np.multiply(x, cos, out=y)
            np.multiply(rot, sin, out=rot)
            np.add(y, rot, out=y)
            return
        try:
            rot = np.stack([np.negative(x[..., 1::2]), x[..., 0::2]], axis=-1).reshape(target)
            val = np.multiply(x, cos) + np.multiply(rot, sin)
        except ValueError as e:
            raise InvalidArgument(f"RotaryInterleaved {self.name}: X {x.shape}, Cos {cos.shape}, Sin {sin.shape}, "
                                  f"rotated {target}: {e}") from None
        y = ctx.output(0, val.shape, np.float32)
        y[...] = val

    def c_step(self, ins, outs, nthreads):
        """RL_ROTARY (interleaved): the fast path's case when rl_rotary_rows applies."""
        if type(self).compute is not RotaryInterleaved_1.compute or "compute" in self.__dict__:
            return None
        x, shape = ins[0], ins[3]
        d = x.shape[-1] if x.ndim else 0
        if x.ndim == 0 or d % 2:
            return None
        if _resolve(shape.reshape(-1), x.shape[:-1] + (d // 2, 2), int(self.allowzero or 0)) != x.shape:
            return None
        return rotary_step(x, ins[1], ins[2], outs[0], True)
