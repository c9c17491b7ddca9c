"""SequenceEmpty-11: an empty sequence (an empty list; `dtype` names its element type)."""
from onnxep.ops._base import OpKernel


class SequenceEmpty_11(OpKernel):
    op_type, since = "SequenceEmpty", 11

    @classmethod
    def check_types(cls, op) -> bool:
        return True

    def compute(self, ctx):
        ctx.set_output(0, [])
