"""Optional-15, -28: an optional holding the input (the value itself), or the empty optional (None) when the input
is omitted (`type` then names the element type)."""
from onnxep.ops.sequence._seq import SeqKernel


class Optional_15(SeqKernel):
    op_type, since = "Optional", 15
    input0_kinds = None

    def compute(self, ctx):
        ctx.set_output(0, ctx.input(0) if ctx.has_input(0) else None)
