"""SequenceLength-11: the number of tensors in the sequence, an int64 scalar."""
import numpy as np

from onnxep.ops.sequence._seq import SeqKernel, sequence_input


class SequenceLength_11(SeqKernel):
    op_type, since = "SequenceLength", 11

    def compute(self, ctx):
        n = len(sequence_input(ctx, 0, self.name, "SequenceLength"))
        ctx.output(0, (), np.int64)[...] = n
