"""SequenceConstruct-11: a sequence of the input tensors (copies), all of one element type."""
from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.sequence._seq import kind_ok, tensor_copy


class SequenceConstruct_11(OpKernel):
    op_type, since = "SequenceConstruct", 11

    @classmethod
    def check_types(cls, op) -> bool:
        return all(kind_ok(vt, "tensor") for vt in op.input_types)

    def compute(self, ctx):
        items = [tensor_copy(ctx.input(i), self.name, "SequenceConstruct", f"input {i}")
                 for i in range(ctx.input_count)]
        if items and any(x.dtype != items[0].dtype for x in items):
            raise InvalidArgument(f"SequenceConstruct node {self.name!r}: the inputs must share one element type, "
                                  f"got {[str(x.dtype) for x in items]}")
        ctx.set_output(0, items)
