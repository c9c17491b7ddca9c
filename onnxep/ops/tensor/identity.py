from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES


class Identity_1(OpKernel):
    """Y := X (tensors only; sequences and optionals of opsets 14/16+ go to the reference backend). No copy."""

    domain, op_type, since = "", "Identity", 1
    type_constraints = {"T": ALL_TYPES, "V": ALL_TYPES}

    def compute(self, ctx):
        ctx.set_output(0, ctx.input(0))
