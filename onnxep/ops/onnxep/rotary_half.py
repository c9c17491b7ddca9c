"""RotaryHalf (domain com.onnxep): Y = X * Cos + Concat(-X[..., B:], X[..., :A], axis=-1) * Sin, what
graph/passes/fuse_rotary.py makes of the rotate_half rotary embedding exporters write (two Slices of the last axis,
Neg, Concat, two Muls, Add). Inputs X, Cos, Sin (float32, broadcast as the Muls / Add broadcast), A (int64, one
element: the first Slice's end) and B (int64, one element: the second Slice's start), each Slice-clamped to the last
dim as Slice does. Written by passes, never by users.

Fast path (A == B == D / 2, Cos / Sin broadcast to X): per half, y1 = x1 * c1 - x2 * s1 and y2 = x2 * c2 + x1 * s2;
with float32 C-contiguous operands and Y apart from X, rl_rotary_rows (onnxep/_native/rl_ops.h) per row of D, in compute and
as the compiled run loop's RL_ROTARY step (Cos / Sin rows found by broadcast strides), else six numpy calls on
half-size views written into Y's halves (no concatenated temporary); otherwise the numpy expression itself."""
import numpy as np

from onnxep import _kernels
from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel, f32_shape
from onnxep.ops._memo import ShapeMemo

DOMAIN = "com.onnxep"
F32 = np.dtype(np.float32)


def rotary_rows(x, cos, sin, y):
    """(rows' dims, Cos byte strides, Sin byte strides (each padded to _c_steps.MAXD), ndim, cl, sl) of the
    rl_rotary_rows call computing y from x, cos, sin, or None when it does not apply: float32 C-contiguous operands,
    X's last dim D even and > 0, Cos / Sin broadcasting to X (last dim D or 1), y of X's shape, sharing no memory with
    Cos / Sin, and X itself or apart from it."""
    if x.ndim == 0 or y.shape != x.shape or not _c_steps.plain(x, cos, sin, y):
        return None
    d = x.shape[-1]
    if d == 0 or d % 2 or any(t.dtype != F32 for t in (x, cos, sin, y)):
        return None
    if not (_fits(cos, x.shape, d) and _fits(sin, x.shape, d)):
        return None
    if any(np.may_share_memory(y, t) for t in (cos, sin)) or not _c_steps.apart(y, x):     # (y may be x itself)
        return None
    key = (x.shape, cos.shape, cos.strides, sin.shape, sin.strides)
    hit = _LAYOUTS.get(key)
    if hit is None:
        outer = x.shape[:-1]
        c = _c_steps.collapse(outer, _bstrides(cos, x.shape)[:-1], _bstrides(sin, x.shape)[:-1])
        hit = False if c is None else (c[1], c[2], c[3], c[0], int(cos.shape[-1] != 1), int(sin.shape[-1] != 1))
        _LAYOUTS.keep(key, hit)
    return hit or None


#: (X shape, Cos / Sin shapes and strides) -> rotary_rows' layout, or False: the shapes decide it, and a decoder fed
#: its growing past runs each step's new shapes through the Python loop, once per layer
_LAYOUTS = ShapeMemo()


def _bstrides(t, shape):
    """t's byte strides broadcast to `shape` (0 along the dims it repeats), as np.broadcast_to's view has them."""
    off = len(shape) - t.ndim
    return tuple(0 if i < off or t.shape[i - off] == 1 else t.strides[i - off] for i in range(len(shape)))


def rotary_c(x, cos, sin, y, interleaved, nthreads) -> bool:
    """y := the rotary embedding of x by rl_rotary_rows when rotary_rows applies; False (nothing done) otherwise."""
    r = rotary_rows(x, cos, sin, y)
    if r is None:
        return False
    shape, sc, ss, nd, cl, sl = r
    _kernels.rotary_f32(x.reshape(-1), cos.reshape(-1), sin.reshape(-1), y.reshape(-1), x.shape[-1], shape[:nd],
                        sc[:nd], ss[:nd], cl, sl, interleaved, nthreads)
    return True


def rotary_step(x, cos, sin, y, interleaved):
    """The RL_ROTARY step computing what rotary_c does, or None."""
    r = rotary_rows(x, cos, sin, y)
    if r is None:
        return None
    shape, sc, ss, nd, cl, sl = r
    d = x.shape[-1]
    return "rotary", [0, 1, 2, ~0], [x.size // d, d, cl, sl, int(interleaved), nd, *shape, *sc, *ss], []


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
    c_value_inputs = (3, 4)      # the split points decide the case

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
            if rotary_c(x, cos, sin, y, False, ctx.num_threads):
                return
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

    def c_step(self, ins, outs, nthreads):
        """RL_ROTARY: the fast path's case when rl_rotary_rows applies (split points at D / 2)."""
        if type(self).compute is not RotaryHalf_1.compute or "compute" in self.__dict__:
            return None
        x, cos, sin, a_t, b_t = ins[:5]
        if x.ndim == 0 or a_t.size != 1 or b_t.size != 1:
            return None
        d = x.shape[-1]
        a, b = int(a_t.item()), int(b_t.item())
        a = min(max(a + d if a < 0 else a, 0), d)
        b = min(max(b + d if b < 0 else b, 0), d)
        if a != d // 2 or b != d // 2:
            return None
        return rotary_step(x, cos, sin, outs[0], False)
