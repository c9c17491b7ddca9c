"""Shared kernel classes of the elementwise unary ops with a native float32 loop (UnaryF32; Unary adds the other
dtypes through numpy)."""
from __future__ import annotations

import numpy as np

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
