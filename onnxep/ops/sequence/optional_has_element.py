"""OptionalHasElement-15, -18, -28: a bool scalar, whether the optional holds a value. From opset 18 the input may be
a tensor or a sequence (always true) or omitted (false)."""
import numpy as np

from onnxep.ops.sequence._seq import SeqKernel


class OptionalHasElement_15(SeqKernel):
    op_type, since = "OptionalHasElement", 15
    input0_kinds = ("optional",)

    def compute(self, ctx):
        ctx.output(0, (), np.bool_)[...] = ctx.has_input(0) and ctx.input(0) is not None


class OptionalHasElement_18(OptionalHasElement_15):
    since = 18
    input0_kinds = ("optional", "tensor", "sequence")
