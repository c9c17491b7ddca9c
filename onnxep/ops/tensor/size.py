import numpy as np

from onnxep.ops._base import OpKernel


class Size_1(OpKernel):
    """Y := the element count of X as an int64 scalar (opsets 1, 13, 19, 21, 23-25). Any tensor type."""

    domain, op_type, since = "", "Size", 1
    strided_inputs = (0,)      # (its shape only)

    @classmethod
    def supports(cls, op):
        vt = op.input_types[0] if op.input_types else None
        return vt is not None and vt.kind == "tensor"

    def compute(self, ctx):
        y = ctx.output(0, (), np.int64)
        y[...] = ctx.input(0).size
