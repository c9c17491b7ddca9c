"""Shared kernel classes of the elementwise unary ops with a native float32 loop (UnaryF32; Unary adds the other
dtypes through numpy)."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops.math._numpy import FLOATS, NativeOrNumpy


class UnaryF32(OpKernel):
    """Y := f(X), float32. Subclasses set `kernel` (a _kernels.<op>_f32 taking (x, y, nthreads))."""

    type_constraints = {"T": ("float32",)}
    inplace = ((0, 0),)
    kernel = None

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, np.float32)
        self.kernel(x.reshape(-1), y.reshape(-1), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: the same float32 loop (RL_UNARY's op, or the erf of RL_TF_UNARY)."""
        if "compute" in self.__dict__ or type(self).compute is not UnaryF32.compute:
            return None
        x, y = ins[0], outs[0]
        if (not _c_steps.plain(x, y) or x.dtype != np.float32 or y.dtype != np.float32 or x.shape != y.shape
                or not _c_steps.apart(y, x)):
            return None
        k = self.kernel
        if k is _kernels.erf_f32:
            return "tf_unary", [0, ~0], [0, y.size], []
        op = _UNARY_OPS.get(k)
        return None if op is None else ("unary", [0, ~0], [op, y.size], [0.0, 0.0])


#: native kernel -> UN_* of _k_eltwise.pxi (parameterless ones)
_UNARY_OPS = {_kernels.sigmoid_f32: 1, _kernels.tanh_f32: 2, _kernels.exp_f32: 4, _kernels.sqrt_f32: 5,
              _kernels.neg_f32: 6, _kernels.abs_f32: 7}


class Unary(NativeOrNumpy, UnaryF32):
    """UnaryF32 for float32 nodes; every other dtype through `ufunc(x, out=y)` (`apply_numpy` when the op needs more
    than one ufunc)."""

    type_constraints = {"T": FLOATS}
    ufunc = None

    def compute_numpy(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, x.dtype)
        if y.size:
            with np.errstate(all="ignore"):
                self.apply_numpy(x, y)

    def apply_numpy(self, x, y):
        self.ufunc(x, out=y)
