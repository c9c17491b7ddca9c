"""MaskedSoftmax (domain com.onnxep): Y = Softmax(X + Mask) along the last axis, Mask broadcast to X's shape (an
additive attention mask, e.g. (batch, 1, 1, seq) against scores (batch, heads, seq, seq)) -- what
graph/passes/fuse_softmax_mask.py makes of Add -> Softmax. One native pass per row (softmax_mask_lastaxis_f32; the
compiled run loop's RL_MASKED_SOFTMAX runs the same rows). Written by passes, never by users. float32."""
import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops._memo import ShapeMemo

DOMAIN = "com.onnxep"


def mask_rows(x_shape, m_shape):
    """(per-row element offsets into the flat mask, column stride 0 / 1) of a mask broadcast to x_shape, or None
    when it does not broadcast to it."""
    r = len(x_shape)
    if len(m_shape) > r:
        return None
    pm = (1,) * (r - len(m_shape)) + tuple(m_shape)
    if any(m not in (1, x) for m, x in zip(pm, x_shape)):
        return None
    strides, s = [], 1
    for d in reversed(pm):
        strides.append(s)
        s *= max(int(d), 1)
    strides = strides[::-1]
    lead = tuple(x_shape[:-1])
    off = np.zeros(lead, np.int64)
    for d in range(r - 1):
        if pm[d] != 1:
            dims = [1] * (r - 1)
            dims[d] = lead[d]
            off = off + (np.arange(lead[d], dtype=np.int64) * strides[d]).reshape(dims)
    return np.ascontiguousarray(off.reshape(-1)), (1 if pm[-1] != 1 else 0)


class MaskedSoftmax_1(OpKernel):
    domain, op_type, since = DOMAIN, "MaskedSoftmax", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types

    @classmethod
    def supports(cls, op):
        if len(op.node.inputs) != 2 or not all(op.node.inputs) or len(op.node.outputs) != 1:
            return False
        x, m = f32_shape(op.input_types[0]), f32_shape(op.input_types[1])
        return x is not None and m is not None and len(x) >= 1 and len(m) <= len(x)

    def _rows(self, x, mask):
        cache = ShapeMemo.of(self, "_rows_cache")
        key = (x.shape, mask.shape)
        rows = cache.get(key)
        if rows is None:
            rows = mask_rows(x.shape, mask.shape)
            if rows is None:
                raise ValueError(f"MaskedSoftmax: the mask of shape {mask.shape} does not broadcast to X {x.shape}")
            cache.keep(key, rows)
        return rows

    def c_step(self, ins, outs, nthreads):
        """RL_MASKED_SOFTMAX: softmax_mask_lastaxis_f32's rows, the mask row offsets a buffer of the program."""
        if type(self).compute is not MaskedSoftmax_1.compute or "compute" in self.__dict__:
            return None
        x, mask, y = ins[0], ins[1], outs[0]
        if (not _c_steps.plain(x, mask, y) or x.dtype != F32 or mask.dtype != F32 or y.dtype != F32 or x.ndim == 0
                or y.shape != x.shape or x.size == 0 or not _c_steps.apart(y, x, mask)):
            return None
        off, cs = self._rows(x, mask)
        k = x.shape[-1]
        if off.size and (int(off.min()) < 0 or int(off.max()) + (k - 1) * cs >= mask.size):
            return None
        return "masked_softmax", [0, 1, off, ~0], [x.size // k, k, cs], []

    def compute(self, ctx):
        x, mask = ctx.input(0), ctx.input(1)
        rows = self._rows(x, mask)
        y = ctx.output(0, x.shape, F32)
        k = x.shape[-1] if x.ndim else 1
        if x.size == 0:
            return
        _kernels.softmax_mask_lastaxis_f32(x.reshape(-1, k), y.reshape(-1, k), mask.reshape(-1), rows[0], rows[1],
                                           False, ctx.num_threads)
