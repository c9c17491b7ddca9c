from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES


class Identity_1(OpKernel):
    """Y := X: a tensor of any numpy-held type, and from opset 14 a sequence, from 16 an optional, passed on as they
    are (opsets 1, 13, 14, 16, 19, 21, 23-25). No copy."""

    domain, op_type, since = "", "Identity", 1
    type_constraints = {"T": ALL_TYPES, "V": ALL_TYPES}

    @classmethod
    def check_types(cls, op):
        vt = op.input_types[0] if op.input_types else None
        if vt is not None and (vt.kind == "sequence" and op.node.opset >= 14 or
                               vt.kind == "optional" and op.node.opset >= 16):
            return True
        return super().check_types(op)

    def compute(self, ctx):
        ctx.set_output(0, ctx.input(0))
