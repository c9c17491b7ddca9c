import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel, attr
from onnxep.ops._dtypes import EXOTIC_DTYPES
from onnxep.ops._data import norm_axis
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


class TensorScatter_24(OpKernel):
    """present_cache := past_cache with update written along axis (the sequence axis) at write_indices[b] (0 when
    absent) for each batch entry b, modulo max_sequence_length in circular mode (opset 24): the KV-cache update of
    the Attention ops. One copy and one fancy-index assignment over (batch, sequence) positions."""

    domain, op_type, since = "", "TensorScatter", 24
    type_constraints = {"T": ALL_TYPES + ("complex64", "complex128") + tuple(
        n for n in EXOTIC_DTYPES if n not in ("int2", "uint2"))}
    mode = "linear"
    axis = -2

    @classmethod
    def supports(cls, op):
        return attr(op, "mode", "linear") in ("linear", "circular")

    def compute(self, ctx):
        what = f"TensorScatter node {self.name!r}"
        past, upd, w = ctx.input(0), ctx.input(1), ctx.input(2)
        try:
            ax = norm_axis(self.axis, past.ndim, what)
        except ValueError as e:
            raise InvalidArgument(str(e)) from None
        if ax == 0:
            raise InvalidArgument(f"{what}: axis {self.axis} is the batch axis of past_cache {past.shape}")
        if upd.ndim != past.ndim or upd.dtype != past.dtype or upd.shape[ax] > past.shape[ax] or any(
                upd.shape[i] != past.shape[i] for i in range(past.ndim) if i != ax):
            raise InvalidArgument(f"{what}: update {upd.dtype} {upd.shape} must be past_cache's type and shape "
                                  f"{past.dtype} {past.shape} except on axis {ax}, where it must not be longer")
        b, smax, s = past.shape[0], past.shape[ax], upd.shape[ax]
        if w is None:
            w = np.zeros(b, np.int64)
        elif w.shape != (b,):
            raise InvalidArgument(f"{what}: write_indices must have shape ({b},) (the batch), got {w.shape}")
        y = new_output(ctx, 0, past.shape, past.dtype, what)
        np.copyto(y, past)
        if not upd.size:
            return
        if w.size and (w.min() < 0 or self.mode == "linear" and w.max() + s > smax):
            raise InvalidArgument(f"{what}: write_indices {w.tolist()} with {s} updates must stay in "
                                  f"[0, {smax}] ({self.mode} mode)")
        pos = w.astype(np.int64)[:, None] + np.arange(s)
        if self.mode == "circular":
            pos %= smax
        yv, uv = np.moveaxis(y, ax, 1), np.moveaxis(upd, ax, 1)
        yv[np.arange(b)[:, None], pos] = uv
