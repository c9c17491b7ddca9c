"""SequenceInsert-11: a new sequence with a copy of the tensor inserted at `position` (default: at the end);
position in [-n, n]."""
from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.sequence._seq import kind_ok, position, sequence_input, tensor_copy


class SequenceInsert_11(OpKernel):
    op_type, since = "SequenceInsert", 11

    @classmethod
    def check_types(cls, op) -> bool:
        its = op.input_types
        return kind_ok(its[0], "sequence") and (len(its) < 2 or kind_ok(its[1], "tensor"))

    def compute(self, ctx):
        seq = sequence_input(ctx, 0, self.name, "SequenceInsert")
        x = tensor_copy(ctx.input(1), self.name, "SequenceInsert", "the tensor")
        if seq and seq[0].dtype != x.dtype:
            raise InvalidArgument(f"SequenceInsert node {self.name!r}: a {x.dtype} tensor cannot go into a sequence "
                                  f"of {seq[0].dtype}")
        p = ctx.input(2) if ctx.has_input(2) else None
        i = len(seq) if p is None else position(p, len(seq), self.name, "SequenceInsert", insert=True)
        out = list(seq)
        out.insert(i, x)
        ctx.set_output(0, out)
