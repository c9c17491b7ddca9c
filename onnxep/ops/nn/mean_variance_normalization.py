"""MeanVarianceNormalization (opsets 9, 13): y := (x - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]),
the variance as E[x^2] - E[x]^2 like the spec's function body. float16 is computed in float32."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, acc_dtype, axes_of


class MeanVarianceNormalization_9(OpKernel):
    domain, op_type, since = "", "MeanVarianceNormalization", 9
    type_constraints = {"T": FLOATS}
    axes = (0, 2, 3)

    def compute(self, ctx):
        x = ctx.input(0)
        axes = axes_of(self.axes, x, "MeanVarianceNormalization")
        y = ctx.output(0, x.shape, x.dtype)
        if y.size == 0:
            return
        acc = acc_dtype(x.dtype)
        mean = np.mean(x, axis=axes, keepdims=True, dtype=acc)
        sq = np.square(x, dtype=acc)
        ex2 = np.mean(sq, axis=axes, keepdims=True)
        ex2 -= np.square(mean)
        np.maximum(ex2, 0, out=ex2)
        np.sqrt(ex2, out=ex2)
        ex2 += 1e-9
        d = np.subtract(x, mean, out=sq)
        np.divide(d, ex2, out=y, casting="same_kind")
