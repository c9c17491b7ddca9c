"""SequenceLength-11: the number of tensors in the sequence, an int64 scalar."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.sequence._seq import kind_ok, sequence_input


class SequenceLength_11(OpKernel):
    op_type, since = "SequenceLength", 11

    @classmethod
    def check_types(cls, op) -> bool:
        return kind_ok(op.input_types[0], "sequence")

    def compute(self, ctx):
        n = len(sequence_input(ctx, 0, self.name, "SequenceLength"))
        ctx.output(0, (), np.int64)[...] = n
