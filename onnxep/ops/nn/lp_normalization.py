"""LpNormalization (opsets 1, 22): y := x / ||x||_p along `axis`, p in {1, 2}; a zero norm gives 0 (onnx.reference
and onnxruntime agree). float16 is computed in float32."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, acc_dtype, axis_of


class LpNormalization_1(OpKernel):
    domain, op_type, since = "", "LpNormalization", 1
    type_constraints = {"T": FLOATS}
    axis = -1
    p = 2

    @classmethod
    def supports(cls, op):
        return int(op.node.attrs.get("p", 2)) in (1, 2)

    def compute(self, ctx):
        x = ctx.input(0)
        axis = axis_of(self.axis, x, "LpNormalization")
        y = ctx.output(0, x.shape, x.dtype)
        if y.size == 0:
            return
        acc = acc_dtype(x.dtype)
        if int(self.p) == 1:
            norm = np.sum(np.abs(x), axis=axis, keepdims=True, dtype=acc)
        else:
            xa = x.astype(acc, copy=False)
            norm = np.sqrt(np.sum(np.square(xa), axis=axis, keepdims=True))
        zero = norm == 0
        norm[zero] = 1
        np.divide(x, norm, out=y, casting="same_kind")
        if zero.any():
            np.multiply(y, ~zero, out=y, casting="unsafe")
