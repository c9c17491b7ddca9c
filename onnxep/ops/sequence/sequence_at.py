"""SequenceAt-11: the tensor at `position` of the sequence, position in [-n, n - 1]."""
from onnxep.ops.sequence._seq import SeqKernel, position, sequence_input


class SequenceAt_11(SeqKernel):
    op_type, since = "SequenceAt", 11

    def compute(self, ctx):
        seq = sequence_input(ctx, 0, self.name, "SequenceAt")
        ctx.set_output(0, seq[position(ctx.input(1), len(seq), self.name, "SequenceAt")])
