"""RMSNormalization (opset 23): y := x / sqrt(mean(x^2 over the dims from `axis` on) + epsilon) * scale (scale
unidirectionally broadcast to x). Stage one in float32 (stash_type 1; float64 input keeps float64), cast back to x's
type, then the scale product. X and scale of one type (the spec's Mul needs it)."""
import math

import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, acc_dtype, axis_of, bad


class RMSNormalization_23(OpKernel):
    domain, op_type, since = "", "RMSNormalization", 23
    type_constraints = {"T": FLOATS, "V": FLOATS}
    axis = -1
    epsilon = 1e-5
    stash_type = 1

    @classmethod
    def supports(cls, op):
        if int(op.node.attrs.get("stash_type", 1)) != 1:
            return False
        t = [vt.type_str if vt is not None else None for vt in op.input_types[:2]]
        return t[0] == t[1]

    def compute(self, ctx):
        x, scale = ctx.input(0), ctx.input(1)
        axis = axis_of(self.axis, x, "RMSNormalization")
        if scale.ndim > x.ndim or any(s not in (1, d) for s, d in zip(scale.shape[::-1], x.shape[::-1])):
            raise bad("RMSNormalization", f"scale of shape {scale.shape} does not broadcast to X {x.shape}")
        y = ctx.output(0, x.shape, x.dtype)
        if y.size == 0:
            return
        if x.dtype == np.float32 and scale.dtype == np.float32 and x.flags.c_contiguous and y.flags.c_contiguous:
            _rms_f32(x, scale, y, axis, self.epsilon)
            return
        acc = acc_dtype(x.dtype)
        axes = tuple(range(axis, x.ndim))
        ms = np.mean(np.square(x, dtype=acc), axis=axes, keepdims=True)
        ms += self.epsilon
        np.sqrt(ms, out=ms)
        np.divide(x, ms, out=y, casting="same_kind")
        np.multiply(y, scale, out=y)


_rowdot = getattr(np, "vecdot", None)      # numpy >= 2.0: the per-row dot product in one call


def _rms_f32(x, scale, y, axis, epsilon):
    """The float32 path: rows (R, C) of the C elements from `axis` on; per row the sum of squares in one call, then
    y := x / sqrt(ms + epsilon) (one broadcast division) * scale (in place). Small tensors are common (a decoder
    step): few calls, no temporaries beyond the R row statistics."""
    c = math.prod(x.shape[axis:])
    x2, y2 = x.reshape(-1, c), y.reshape(-1, c)
    ms = _rowdot(x2, x2) if _rowdot is not None else np.einsum("ij,ij->i", x2, x2)
    ms *= 1.0 / c
    ms += epsilon
    np.sqrt(ms, out=ms)
    np.divide(x2, ms[:, None], out=y2)
    np.multiply(y, scale, out=y)
