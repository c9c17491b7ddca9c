import numpy as np

from onnxep.ops.math._numpy import FLOATS, NumpyKernel, fold


class Mean_6(NumpyKernel):
    """Y := (X0 + X1 + ...) / n elementwise; broadcasting from opset 8 (opsets 6, 8, 13; numpy)"""

    domain, op_type, since = "", "Mean", 6
    type_constraints = {"T": FLOATS}

    def compute(self, ctx):
        xs = [ctx.input(i) for i in range(ctx.input_count)]
        y = fold(self.op_type, xs, ctx, np.add)
        if y.size and len(xs) > 1:
            np.divide(y, y.dtype.type(len(xs)), out=y)
