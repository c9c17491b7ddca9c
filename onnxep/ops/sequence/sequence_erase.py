"""SequenceErase-11: a new sequence without the tensor at `position` (default: the last), in [-n, n - 1]."""
from onnxep.ops.sequence._seq import SeqKernel, position, sequence_input


class SequenceErase_11(SeqKernel):
    op_type, since = "SequenceErase", 11

    def compute(self, ctx):
        seq = sequence_input(ctx, 0, self.name, "SequenceErase")
        p = ctx.input(1) if ctx.has_input(1) else None
        i = position(-1 if p is None else p, len(seq), self.name, "SequenceErase")
        ctx.set_output(0, seq[:i] + seq[i + 1:] if isinstance(seq, list) else list(seq[:i]) + list(seq[i + 1:]))
