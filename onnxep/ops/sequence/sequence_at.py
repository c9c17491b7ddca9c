"""SequenceAt-11: the tensor at `position` of the sequence, position in [-n, n - 1]."""
from onnxep.ops._base import OpKernel
from onnxep.ops.sequence._seq import kind_ok, position, sequence_input


class SequenceAt_11(OpKernel):
    op_type, since = "SequenceAt", 11

    @classmethod
    def check_types(cls, op) -> bool:
        return kind_ok(op.input_types[0], "sequence")

    def compute(self, ctx):
        seq = sequence_input(ctx, 0, self.name, "SequenceAt")
        ctx.set_output(0, seq[position(ctx.input(1), len(seq), self.name, "SequenceAt")])
