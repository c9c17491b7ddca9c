"""OptionalGetElement-15, -18, -28: the value an optional holds (an error when it is empty). From opset 18 a tensor
or sequence input comes back as it is."""
from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.sequence._seq import kind_ok


class OptionalGetElement_15(OpKernel):
    op_type, since = "OptionalGetElement", 15

    @classmethod
    def check_types(cls, op) -> bool:
        return kind_ok(op.input_types[0], "optional")

    def compute(self, ctx):
        v = ctx.input(0)
        if v is None:
            raise InvalidArgument(f"OptionalGetElement node {self.name!r}: the optional input "
                                  f"{ctx.ins[0]!r} is empty")
        ctx.set_output(0, v)


class OptionalGetElement_18(OptionalGetElement_15):
    since = 18

    @classmethod
    def check_types(cls, op) -> bool:
        return kind_ok(op.input_types[0], "optional", "tensor", "sequence")
