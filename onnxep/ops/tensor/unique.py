import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output

_I64 = np.int64


def _codes(x):
    """(sorted unique values of x flattened, x as int64 codes into them, first-occurrence index, counts): one
    np.unique call. Codes keep the values' order, so comparing codes compares values (strings and bfloat16 too)."""
    flat = x.reshape(-1)
    widen = flat.dtype.name == "bfloat16"
    vals, first, inv, counts = np.unique(flat.astype(np.float32) if widen else flat, return_index=True,
                                         return_inverse=True, return_counts=True)
    return vals, inv.reshape(-1).astype(_I64, copy=False), first, counts


class Unique_11(OpKernel):
    """Y := the unique elements of X flattened (axis absent) or the unique slices of X along axis, sorted ascending
    (sorted=1; slices compare lexicographically) or in order of first occurrence (sorted=0); indices := where each
    first occurs in X; inverse_indices := for each element (slice) of X its index in Y; counts := how many times each
    occurs (opsets 11, 28; 28 adds bfloat16). One np.unique call (over int64 codes of the values when an axis is
    given, which works for every dtype, strings included), plus one argsort for sorted=0."""

    domain, op_type, since = "", "Unique", 11
    type_constraints = {"T": ALL_TYPES + ("complex64", "complex128")}
    axis = None
    sorted = 1

    def compute(self, ctx):
        what = f"Unique node {self.name!r}"
        x = ctx.input(0)
        if self.axis is None:
            vals, inv, first, counts = _codes(x)
            src, ax = x.reshape(-1), 0
        else:
            try:
                ax = norm_axis(self.axis, x.ndim, what)
            except ValueError as e:
                raise InvalidArgument(str(e)) from None
            n = x.shape[ax]
            if x.size:
                codes = _codes(x)[1].reshape(x.shape)
                rows = np.moveaxis(codes, ax, 0).reshape(n, -1)
                _, first, inv, counts = np.unique(rows, axis=0, return_index=True, return_inverse=True,
                                                  return_counts=True)
                inv = inv.reshape(-1)
            else:   # no elements: every slice of an (n > 0) axis is the same empty slice
                k = min(n, 1)
                first, inv, counts = np.zeros(k, _I64), np.zeros(n, _I64), np.full(k, n, _I64)
            src = x
        if not self.sorted and first.size:
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            first, counts, inv = first[order], counts[order], rank[inv]
        shape = list(src.shape)
        shape[ax] = first.size
        y = new_output(ctx, 0, shape, x.dtype, what)
        if y.size:
            y[...] = np.take(src, first, axis=ax)
        for i, v in ((1, first), (2, inv), (3, counts)):
            if ctx.has_output(i):
                o = new_output(ctx, i, v.shape, _I64, what)
                o[...] = v
