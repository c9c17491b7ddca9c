"""OptionalGetElement-15, -18, -28: the value an optional holds (an error when it is empty). From opset 18 a tensor
or sequence input comes back as it is."""
from onnxep.errors import InvalidArgument
from onnxep.ops.sequence._seq import SeqKernel


class OptionalGetElement_15(SeqKernel):
    op_type, since = "OptionalGetElement", 15
    input0_kinds = ("optional",)

    def compute(self, ctx):
        v = ctx.input(0)
        if v is None:
            raise InvalidArgument(f"OptionalGetElement node {self.name!r}: the optional input "
                                  f"{ctx.ins[0]!r} is empty")
        ctx.set_output(0, v)


class OptionalGetElement_18(OptionalGetElement_15):
    since = 18
    input0_kinds = ("optional", "tensor", "sequence")
