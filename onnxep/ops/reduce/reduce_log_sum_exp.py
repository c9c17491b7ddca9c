import numpy as np

from onnxep.ops.reduce._reduce import Reduce


class ReduceLogSumExp_1(Reduce):
    """Y := log(sum of exp(X) over axes), computed as m + log(sum exp(X - m)) with m the max over the axes (0 where
    that max is infinite); axes an attribute (opsets 1, 11, 13). float16 / bfloat16 compute in float32, integers in
    float64 with each exp term and the result truncated, as
    onnxruntime does."""

    domain, op_type, since = "", "ReduceLogSumExp", 1

    def reduce(self, x, axes, n, y):
        wt = np.dtype(np.float64 if x.dtype.kind in "iu" else np.float32 if x.dtype.itemsize < 4 else x.dtype)
        xs = x if x.dtype == wt else x.astype(wt)
        m = np.asarray(np.maximum.reduce(xs, axis=axes, keepdims=True, initial=-np.inf))
        # shift only by a finite max: an infinite one (or all -inf, or no elements) would give inf - inf = NaN
        np.copyto(m, 0, where=~np.isfinite(m))
        e = np.asarray(np.subtract(xs, m, out=None if xs is x else xs))
        np.exp(e, out=e)
        if x.dtype.kind in "iu":
            np.trunc(e, out=e)   # onnxruntime accumulates the exp terms in the integer type
        s = np.asarray(np.add.reduce(e, axis=axes, keepdims=True))
        with np.errstate(divide="ignore"):
            np.log(s, out=s)
        s += m
        with np.errstate(invalid="ignore"):
            np.copyto(y, s.reshape(y.shape), casting="unsafe")


class ReduceLogSumExp_18(ReduceLogSumExp_1):
    """ReduceLogSumExp with axes an optional input, noop_with_empty_axes (opset 18)"""

    since = 18
    axes_input = True
