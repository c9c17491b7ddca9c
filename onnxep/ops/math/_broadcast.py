"""Multidirectional (numpy-style) broadcasting for the elementwise ops: collapse a broadcast into the few dims the
native binary kernels walk, and the shared kernel classes of Add/Sub/Mul/Div/Max/Min/Sum (Binary, Variadic: the
native float32 kernel, numpy ufuncs for the other dtypes)."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops._memo import ShapeMemo
from onnxep.ops.math._numpy import NUMERIC, NativeOrNumpy, broadcast_shape, fold

#: Collapsed dims the native kernels accept (BCAST_MAX_DIMS in _k_eltwise.pxi); beyond it numpy ufuncs run instead.
MAX_DIMS = 16


def collapse(out_shape, *shapes):
    """(dims, [strides per operand]) walking `out_shape` in C order, each operand (broadcastable to out_shape,
    C-contiguous) read with element strides (0 where it broadcasts). Dims of size 1 are dropped and adjacent dims that
    are contiguous in every operand merged, so e.g. NCHW + [C,1,1] gives dims (C, H*W), strides (H*W, 1) and (1, 0).
    Always at least one dim."""
    rank = len(out_shape)
    per_op = []
    for shp in shapes:
        shp = (1,) * (rank - len(shp)) + tuple(shp)
        st = [0] * rank
        acc = 1
        for d in range(rank - 1, -1, -1):
            st[d] = 0 if shp[d] == 1 else acc
            acc *= shp[d]
        per_op.append(st)
    dims = []
    strides = [[] for _ in shapes]
    for d in range(rank):
        n = out_shape[d]
        if n == 1:
            continue
        if dims and all(s[-1] == st[d] * n for s, st in zip(strides, per_op)):
            dims[-1] *= n
            for s, st in zip(strides, per_op):
                s[-1] = st[d]
            continue
        dims.append(n)
        for s, st in zip(strides, per_op):
            s.append(st[d])
    if not dims:
        return (1,), [(0,) for _ in shapes]
    return tuple(dims), [tuple(s) for s in strides]


class BinaryF32(OpKernel):
    """Z := A op B with broadcasting, float32. Subclasses set `kernel` (a _kernels.<op>_f32) and `ufunc` (numpy's
    equivalent, used only when the broadcast does not collapse to MAX_DIMS dims)."""

    type_constraints = {"T": ("float32",)}
    inplace = ((0, 0), (0, 1))   # elementwise: z[i] is written after a and b at i are read (same-size operands only)
    kernel = None
    ufunc = None

    def __init__(self, info):
        super().__init__(info)
        self._plans = ShapeMemo()

    def plan(self, out_shape, *shapes):
        key = (out_shape,) + shapes
        p = self._plans.get(key)
        if p is None:
            p = self._plans.keep(key, collapse(out_shape, *shapes))
        return p

    def apply(self, a, b, z, nthreads):
        """z := a op b, z already of the broadcast shape (z may be a when they have the same shape)."""
        if z.size == 0:
            return
        dims, (sa, sb) = self.plan(z.shape, a.shape, b.shape)
        if len(dims) > MAX_DIMS:
            self.ufunc(a, b, out=z)
            return
        self.kernel(a.reshape(-1), b.reshape(-1), z.reshape(-1), dims, sa, sb, nthreads)

    def compute(self, ctx):
        a, b = ctx.input(0), ctx.input(1)
        z = ctx.output(0, np.broadcast_shapes(a.shape, b.shape), np.float32)
        self.apply(a, b, z, ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (backends/cpu/runloop.py): binary_f32_range over the collapsed broadcast,
        as apply runs it. Only for the float32 compute of this class (not a dtype-bound or legacy one)."""
        op = _C_OPS.get(self.op_type)
        if op is None or "compute" in self.__dict__ or type(self).compute is not BinaryF32.compute:
            return None
        a, b, z = ins[0], ins[1], outs[0]
        if not all(v.__class__ is np.ndarray and v.dtype == np.float32 and v.flags.c_contiguous for v in (a, b, z)):
            return None
        dims, (sa, sb) = self.plan(z.shape, a.shape, b.shape)
        if len(dims) > MAX_DIMS:
            return None
        pad = (0,) * (MAX_DIMS - len(dims))
        return "binary", [0, 1, ~0], [op, len(dims), z.size, *dims, *pad, *sa, *pad, *sb, *pad], []


#: op type -> BIN_* of _k_eltwise.pxi, for c_step
_C_OPS = {"Add": 0, "Sub": 1, "Mul": 2, "Div": 3}


class VariadicF32(BinaryF32):
    """Y := X0 op X1 op ... (Sum/Max/Min): folded left to right into the output, one broadcast kernel per input."""

    def compute(self, ctx):
        xs = [ctx.input(i) for i in range(ctx.input_count)]
        if not xs or any(x is None for x in xs):
            raise ValueError(f"{self.op_type} needs at least one input and no omitted ones")
        y = ctx.output(0, np.broadcast_shapes(*(x.shape for x in xs)), np.float32)
        if y.size == 0:
            return
        if len(xs) == 1:
            np.copyto(y, xs[0])
            return
        self.apply(xs[0], xs[1], y, ctx.num_threads)
        for x in xs[2:]:
            self.apply(y, x, y, ctx.num_threads)



class Binary(NativeOrNumpy, BinaryF32):
    """BinaryF32 for float32 nodes; every other dtype through `ufunc` with out= (`apply_numpy` when the op needs more
    than the ufunc, e.g. integer Div)."""

    type_constraints = {"T": NUMERIC}

    def compute_numpy(self, ctx):
        a, b = ctx.input(0), ctx.input(1)
        z = ctx.output(0, broadcast_shape(self.op_type, a.shape, b.shape), a.dtype)
        if not z.size:
            return
        if a.dtype.kind == "f":        # no overflow / invalid warnings (onnxruntime gives none either)
            with np.errstate(all="ignore"):
                self.apply_numpy(a, b, z)
        else:
            self.apply_numpy(a, b, z)

    def apply_numpy(self, a, b, z):
        self.ufunc(a, b, out=z)

    def c_step(self, ins, outs, nthreads):
        """BinaryF32's entry for float32; RL_BINARY_INT (rl_binary_int, onnxep/_native/rl_ops.h) for int64 / int32 Add / Sub /
        Mul (positions and masks of decoders and encoders), wrapping as numpy does."""
        a = ins[0]
        if a.__class__ is not np.ndarray or a.dtype not in _INT_SIZES:
            return BinaryF32.c_step(self, ins, outs, nthreads)
        from onnxep.ops import _c_steps
        op = _INT_OPS.get(self.ufunc)
        if (op is None or type(self).compute_numpy is not Binary.compute_numpy
                or type(self).apply_numpy is not Binary.apply_numpy):
            return None
        b, z = ins[1], outs[0]
        if not _c_steps.plain(a, b, z) or b.dtype != a.dtype or z.dtype != a.dtype or not _c_steps.apart(z, a, b):
            return None
        if z.shape != np.broadcast_shapes(a.shape, b.shape) or z.size == 0:
            return None
        c = _c_steps.collapse(z.shape, _c_steps.broadcast_strides(a, z.shape), _c_steps.broadcast_strides(b, z.shape))
        if c is None:
            return None
        nd, shape, sa, sb = c
        return "binary_int", [0, 1, ~0], [op, nd, *shape, *sa, *sb, a.itemsize], []


#: ufunc -> rl_binary_int's RL_I_*; the integer types it takes
_INT_OPS = {np.add: 0, np.subtract: 1, np.multiply: 2}
_INT_SIZES = frozenset({np.dtype(np.int64), np.dtype(np.int32)})


class Variadic(NativeOrNumpy, VariadicF32):
    """VariadicF32 for float32 nodes; every other dtype folded with `ufunc`."""

    type_constraints = {"T": NUMERIC}

    def compute_numpy(self, ctx):
        fold(self.op_type, [ctx.input(i) for i in range(ctx.input_count)], ctx, self._apply_numpy)

    def _apply_numpy(self, a, b, y):
        self.ufunc(a, b, out=y)


def legacy_operand(kernel, a, b):
    """B as it broadcasts to A in the opset-1/6 binary ops (attributes `broadcast`, `axis`): broadcast=0, the same
    shape; broadcast=1, B's dims match A's from `axis` on (A's trailing dims when no axis), size-1 dims of B stretch.
    B comes back reshaped to A's rank, so numpy / the native kernels broadcast it; Z has A's shape."""
    op = kernel.op_type
    if not int(kernel.broadcast or 0):
        if a.shape != b.shape:
            raise InvalidArgument(f"{op}: without broadcast=1 (opset < 7) A and B must have the same shape, got "
                                  f"{a.shape} and {b.shape}")
        return b
    axis = a.ndim - b.ndim if kernel.axis is None else int(kernel.axis)
    if axis < 0:
        axis += a.ndim
    if not 0 <= axis <= a.ndim - b.ndim or any(d not in (1, a.shape[axis + i]) for i, d in enumerate(b.shape)):
        raise InvalidArgument(f"{op}: B of shape {b.shape} does not broadcast to A's shape {a.shape} at axis "
                              f"{kernel.axis}")
    return b.reshape((1,) * axis + b.shape + (1,) * (a.ndim - axis - b.ndim))


class LegacyBinary(Binary):
    """Binary for opset 6 (onnx's `broadcast` / `axis` attributes, see legacy_operand). Subclass it together with
    the op's opset-7 class: class Add_6(LegacyBinary, Add_7)."""

    broadcast = 0
    axis = None

    def _operands(self, ctx):
        a = ctx.input(0)
        b = legacy_operand(self, a, ctx.input(1))
        return a, b, ctx.output(0, a.shape, a.dtype)

    def compute(self, ctx):
        a, b, z = self._operands(ctx)
        self.apply(a, b, z, ctx.num_threads)

    def compute_numpy(self, ctx):
        a, b, z = self._operands(ctx)
        if z.size:
            with np.errstate(all="ignore"):
                self.apply_numpy(a, b, z)
