"""The shared kernel of the Reduce* ops: one class reading a table of (pre-op, numpy reduction, post-op) per op.

Semantics (onnx spec, onnx.reference, onnxruntime where the spec is silent):
- axes: an attribute up to opset 17 (12 for ReduceSum), an optional int64 input from opset 18 (13). Empty or absent
  axes reduce over every axis, unless noop_with_empty_axes (input form only): then the reduction step is the identity
  but the pre/post-ops still apply (ReduceSumSquare gives the square of its input).
- An empty reduction gives the identity of the reduction: 0 (Sum, L1, L2, SumSquare), 1 (Prod), -inf / the dtype's
  minimum / False (Max), +inf / the maximum / True (Min), -inf (LogSum, LogSumExp); ReduceMean gives NaN, as
  onnx.reference does (0 for integers).
- float16 and bfloat16 sums and products accumulate in float32, rounded once at the end.
- Integer inputs: Sum, Prod, L1, SumSquare and Mean compute in the integer type (wrapping as onnxruntime does; Mean
  divides the integer sum, rounding toward zero); L2, LogSum, LogSumExp compute in float64 and the result is
  truncated toward zero, as onnxruntime does (a NaN or infinite result becomes the dtype's minimum, as there).
"""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops._memo import ShapeMemo

try:
    from ml_dtypes import bfloat16 as _BF16
except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
    _BF16 = None

#: dtypes of the sum-like reductions (ReduceSum, Mean, Prod, L1, L2, LogSum, LogSumExp, SumSquare)
NUMERIC = ("float16", "float32", "float64", "int32", "int64", "uint32", "uint64") + \
    (("bfloat16",) if _BF16 is not None else ())
#: dtypes of ReduceMax / ReduceMin (int8 / uint8 from opset 12, bool from opset 20)
ORDERED = NUMERIC + ("int8", "uint8", "bool")

_NARROW = tuple(np.dtype(t) for t in ("float16",) + (("bfloat16",) if _BF16 is not None else ()))
#: float sums over trailing axes of up to this many elements use einsum; longer ones numpy's pairwise summation,
#: whose error grows as log(n) rather than n
_SUM_FAST = (np.dtype(np.float32), np.dtype(np.float64))
_SUM_FAST_MAX = 1 << 16


_F32 = np.dtype(np.float32)


class _Inputs:
    """ctx.input for reduce_axes over captured inputs (c_step)."""

    def __init__(self, ins):
        self.ins = ins

    def input(self, i):
        return self.ins[i] if i < len(self.ins) else None


def _mean(r, n):
    """r := r / n (integers: the quotient rounded toward zero, as C++ division)"""
    if r.dtype.kind == "f":
        with np.errstate(invalid="ignore", divide="ignore"):
            np.divide(r, n, out=r)
        return r
    if n == 0:
        return r
    q = np.floor_divide(r, n)
    if r.dtype.kind == "i":
        q += (r < 0) & (q * n != r)
    return q


def _inplace(f):
    """post-op f applied in place on float results; integer results go to float64 (truncated when stored)."""
    def post(r, n):
        with np.errstate(invalid="ignore", divide="ignore"):
            return f(r, out=r) if r.dtype.kind == "f" else f(r, dtype=np.float64)
    return post


#: op -> (pre-op ufunc or None, reduction ufunc, post-op (r, n) -> result or None)
TABLE = {
    "ReduceSum": (None, np.add, None),
    "ReduceMean": (None, np.add, _mean),
    "ReduceMax": (None, np.maximum, None),
    "ReduceMin": (None, np.minimum, None),
    "ReduceProd": (None, np.multiply, None),
    "ReduceL1": (np.abs, np.add, None),
    "ReduceL2": (np.square, np.add, _inplace(np.sqrt)),
    "ReduceLogSum": (None, np.add, _inplace(np.log)),
    "ReduceSumSquare": (np.square, np.add, None),
}


def _empty_value(ufunc, dtype):
    """The value of a reduction over no elements: the ufunc's identity, or the neutral bound of the dtype."""
    if ufunc is np.maximum:
        return False if dtype.kind == "b" else (-np.inf if dtype.kind == "f" else np.iinfo(dtype).min)
    if ufunc is np.minimum:
        return True if dtype.kind == "b" else (np.inf if dtype.kind == "f" else np.iinfo(dtype).max)
    return None


class Reduce(OpKernel):
    """Y := post(reduce(pre(X), axes)) with keepdims; `axes` an attribute (axes_input False) or input 1."""

    type_constraints = {"T": NUMERIC}
    axes = None
    keepdims = 1
    noop_with_empty_axes = 0
    axes_input = False      # True from the opset where axes became an input (18; 13 for ReduceSum)

    def __init__(self, info):
        super().__init__(info)
        self._plans = ShapeMemo()
        self._axes_attr = () if self.axes is None else tuple(int(v) for v in self.axes)

    # ------------------------------------------------------------------ axes and output shape
    def reduce_axes(self, ctx, shape):
        """(sorted normalised axes, output shape, count of reduced elements) for an input of this shape; raises
        InvalidArgument on a bad axis."""
        if self.axes_input:
            a = ctx.input(1)
            raw = () if a is None else tuple(np.asarray(a).reshape(-1).tolist())
        else:
            raw = self._axes_attr
        key = (shape, raw)
        plan = self._plans.get(key)
        if plan is None:
            rank = len(shape)
            if not raw:
                axes = () if self.axes_input and self.noop_with_empty_axes else tuple(range(rank))
            else:
                if any(not -rank <= v < rank for v in raw):
                    raise InvalidArgument(f"{self.op_type}: axes {list(raw)} out of range for input of rank {rank} "
                                          f"(shape {shape})")
                axes = tuple(sorted({v % rank for v in raw}))
                if len(axes) != len(raw):
                    raise InvalidArgument(f"{self.op_type}: repeated axis in axes {list(raw)}")
            if self.keepdims:
                out = tuple(1 if d in axes else n for d, n in enumerate(shape))
            else:
                out = tuple(n for d, n in enumerate(shape) if d not in axes)
            count = 1
            for d in axes:
                count *= shape[d]
            plan = self._plans.keep(key, (axes, out, count))
        return plan

    def compute(self, ctx):
        x = ctx.input(0)
        axes, out_shape, n = self.reduce_axes(ctx, x.shape)
        y = ctx.output(0, out_shape, x.dtype)
        if y.size:
            self.reduce(x, axes, n, y)

    c_value_inputs = (1,)     # the axes input (opset 13 ReduceSum, 18): a constant or a checked value

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry for float32 ReduceSum / ReduceMean over trailing axes: rl_row_sum (the
        loop `_reduce` runs for them), the mean divided by the count in float32 as `_mean` does."""
        if self.op_type not in ("ReduceSum", "ReduceMean") or type(self).compute is not Reduce.compute:
            return None
        x, y = ins[0], outs[0]
        if not _c_steps.plain(x, y) or x.dtype != _F32 or y.dtype != _F32:
            return None
        axes, out_shape, n = self.reduce_axes(_Inputs(ins), x.shape)
        if y.shape != out_shape or not axes or axes[0] != x.ndim - len(axes) or not 0 < n <= _SUM_FAST_MAX \
                or n >= 1 << 24:
            return None
        return "row_sum", [0, ~0], [y.size, n, int(self.op_type == "ReduceMean")], []

    # ------------------------------------------------------------------ the table-driven reduction
    def reduce(self, x, axes, n, y):
        pre, ufunc, post = TABLE[self.op_type]
        src = x
        if x.dtype in _NARROW and (ufunc in (np.add, np.multiply) or x.dtype != np.float16):
            src = x.astype(np.float32)      # float32 accumulation; bfloat16 has no native numpy loops
        if pre is not None:
            src = pre(src, out=src) if src is not x else pre(src)
        # reduce straight into the output when it has the working dtype (and a post-op, if any, stays in it)
        out = y if src.dtype == y.dtype and (post is None or y.dtype.kind == "f") else None
        r = self._reduce(ufunc, src, axes, n, out)
        if post is not None:
            r = post(np.asarray(r), n)
        if r is not y:
            with np.errstate(invalid="ignore"):
                np.copyto(y, np.reshape(r, y.shape), casting="unsafe")

    def _reduce(self, ufunc, src, axes, n, out):
        """ufunc.reduce(src) over axes, into out (the output, or None), keepdims as the node says."""
        if ufunc is np.add and src.dtype in _SUM_FAST and 0 < n <= _SUM_FAST_MAX and axes \
                and axes[0] == src.ndim - len(axes) and src.flags.c_contiguous:
            # trailing axes of a contiguous tensor (the LayerNorm-style sums): einsum's SIMD row sums, 3x the speed
            # of add.reduce's pairwise loop, and as accurate as onnxruntime's (error bounded by _SUM_FAST_MAX)
            outer = src.size // n
            dst = np.empty(outer, src.dtype) if out is None else out.reshape(outer)
            if src.dtype == _F32:   # the loop the compiled run loop's RL_ROW_SUM step runs (c_step)
                _kernels.row_sum_f32(src.reshape(-1), dst, n)
            else:
                np.einsum("ij->i", src.reshape(outer, n), out=dst)
            return dst if out is None else out
        kw = {}
        if n == 0:
            ident = _empty_value(ufunc, src.dtype)
            if ident is not None:
                kw["initial"] = ident
        return ufunc.reduce(src, axis=axes, keepdims=bool(self.keepdims), out=out, **kw)
