"""QLinearAdd (domain com.onnxep): Y = saturate(round_half_even(((A - a_zero_point) * a_scale + (B - b_zero_point) *
b_scale) / y_scale) + y_zero_point), A, B and Y 8-bit (int8 where a_signed / b_signed / y_signed, else uint8), numpy
broadcasting; the parameters per tensor, as attributes. What graph/passes/fuse_qdq_ops.py makes of a QDQ model's
DequantizeLinear(A), DequantizeLinear(B) -> Add -> QuantizeLinear (onnxruntime folds the same group into its
com.microsoft QLinearAdd). The float32 operations of those four nodes in the same order (two products, a sum, a
quotient, no fused multiply-add), so bit-identical to them; onnxruntime's MLAS kernel computes (A - za) * (sa / ys) +
(B - zb) * (sb / ys) + yz instead, which can differ by one step where that rounds across a .5 boundary. Written by
passes, never by users.

Native (_k_qgemm.pxi qlinear_add, qgemm.h qg_qadd_range; chunked over the thread pool from two 16384-element chunks)
when one operand has Y's shape and the other Y's trailing dimensions (or one element): a residual Add, a bias Add; a
C step of the compiled run loop (RL_QLINEAR_ADD). Else numpy."""
import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel

DOMAIN = "com.onnxep"
F32 = np.dtype(np.float32)
_BYTES = (np.dtype(np.int8), np.dtype(np.uint8))


def _dt(signed):
    return np.dtype(np.int8) if signed else np.dtype(np.uint8)


def _trailing(small, big):
    """Whether shape `small` repeats along `big` as one contiguous block (small, leading 1s stripped, equals big's
    trailing dimensions): then its flat data repeats every small's size elements of big's."""
    s = list(small)
    while s and s[0] == 1:
        s.pop(0)
    return len(s) <= len(big) and tuple(s) == tuple(big[len(big) - len(s):])


class QLinearAdd_1(OpKernel):
    domain, op_type, since = DOMAIN, "QLinearAdd", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    a_scale = b_scale = y_scale = 1.0
    a_zero_point = b_zero_point = y_zero_point = 0
    a_signed = b_signed = y_signed = 0

    @classmethod
    def supports(cls, op):
        n, t = op.node, op.input_types
        if len(n.inputs) != 2 or len(n.outputs) != 1 or not all(n.inputs):
            return False
        a = n.attrs
        for i, side in ((0, "a"), (1, "b")):
            if t[i] is None or t[i].dtype is None or np.dtype(t[i].dtype) != _dt(int(a.get(f"{side}_signed", 0))):
                return False
        return True

    def _params(self):
        return (F32.type(self.a_scale), F32.type(self.a_zero_point), F32.type(self.b_scale),
                F32.type(self.b_zero_point), F32.type(self.y_scale), F32.type(self.y_zero_point))

    def _native_order(self, a, b, shape):
        """(first, second, first signed, second signed, first params, second params) for the native kernel, the
        operand with Y's shape first, or None."""
        sa, za, sb, zb = self.a_scale, self.a_zero_point, self.b_scale, self.b_zero_point
        if a.shape == shape and _trailing(b.shape, shape):
            return a, b, int(self.a_signed), int(self.b_signed), (sa, za), (sb, zb)
        if b.shape == shape and _trailing(a.shape, shape):
            return b, a, int(self.b_signed), int(self.a_signed), (sb, zb), (sa, za)
        return None

    def compute(self, ctx):
        a, b = ctx.input(0), ctx.input(1)
        shape = np.broadcast_shapes(a.shape, b.shape)
        y = ctx.output(0, shape, _dt(int(self.y_signed)))
        if y.size == 0:
            return
        o = self._native_order(a, b, shape) if hasattr(_kernels, "qlinear_add") else None
        if o is not None and o[1].size:
            x1, x2, s1, s2, p1, p2 = o
            _kernels.qlinear_add(np.ascontiguousarray(x1).reshape(-1).view(np.uint8), s1, float(p1[0]), int(p1[1]),
                                 np.ascontiguousarray(x2).reshape(-1).view(np.uint8), s2, float(p2[0]), int(p2[1]),
                                 y.reshape(-1).view(np.uint8), float(self.y_scale), int(self.y_zero_point),
                                 bool(self.y_signed), ctx.num_threads)
            return
        sa, za, sb, zb, ys, yz = self._params()
        lo, hi = (-128, 127) if self.y_signed else (0, 255)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            da = (a.astype(F32) - za) * sa
            db = (b.astype(F32) - zb) * sb
            r = np.rint(np.divide(da + db, ys, dtype=F32))
            r += yz
            np.fmax(r, F32.type(lo), out=r)
            np.fmin(r, F32.type(hi), out=r)
        y[...] = r.astype(y.dtype)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: the native path of compute, RL_QLINEAR_ADD."""
        a, b, y = ins[0], ins[1], outs[0]
        if not hasattr(_kernels, "qlinear_add") or not _c_steps.plain(a, b, y) or y.size == 0 \
                or type(self).compute is not QLinearAdd_1.compute or y.dtype != _dt(int(self.y_signed)):
            return None
        o = self._native_order(a, b, y.shape)
        if o is None or o[1].size == 0 or np.may_share_memory(o[1], y) or not _c_steps.apart(y, o[0]):
            return None
        x1, x2, s1, s2, p1, p2 = o
        slots = [0, 1] if x1 is a else [1, 0]
        return "qlinear_add", slots + [~0], \
            [y.size, x2.size, s1, s2, int(self.y_signed), int(p1[1]), int(p2[1]), int(self.y_zero_point)], \
            [float(p1[0]), float(p2[0]), float(self.y_scale)]
