"""SequenceEmpty-11: an empty sequence (an empty list; `dtype` names its element type)."""
from onnxep.ops.sequence._seq import SeqKernel


class SequenceEmpty_11(SeqKernel):
    op_type, since = "SequenceEmpty", 11
    input0_kinds = None

    def compute(self, ctx):
        ctx.set_output(0, [])
