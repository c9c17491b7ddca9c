import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import new_output
from onnxep.ops.text._strings import STRING, as_str


class StringConcat_20(OpKernel):
    """Z := X + Y element-wise (string concatenation), with numpy broadcasting (opset 20). One numpy call over the
    object arrays (each element a Python str `+`); the output size is checked before it is allocated."""

    domain, op_type, since = "", "StringConcat", 20
    type_constraints = {"T": STRING}

    def compute(self, ctx):
        what = f"StringConcat node {self.name!r}"
        x, y = as_str(ctx.input(0), what), as_str(ctx.input(1), what)
        try:
            shape = np.broadcast_shapes(x.shape, y.shape)
        except ValueError:
            raise InvalidArgument(f"{what}: input shapes {x.shape} and {y.shape} cannot be broadcast") from None
        z = new_output(ctx, 0, shape, object, what)
        if z.size:
            np.add(x, y, out=z)
