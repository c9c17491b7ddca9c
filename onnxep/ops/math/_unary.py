"""Shared kernel class of the float32 elementwise unary ops (one native loop each)."""
from __future__ import annotations

import numpy as np

from onnxep.ops._base import OpKernel


class UnaryF32(OpKernel):
    """Y := f(X), float32. Subclasses set `kernel` (a _kernels.<op>_f32 taking (x, y, nthreads))."""

    type_constraints = {"T": ("float32",)}
    inplace = ((0, 0),)
    kernel = None

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, np.float32)
        self.kernel(x.reshape(-1), y.reshape(-1), ctx.num_threads)
