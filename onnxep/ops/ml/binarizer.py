import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import NUM4, output


class Binarizer_1(OpKernel):
    """Y := 1 where X > threshold else 0, in X's type. A NaN in X is an error (as onnxruntime)."""

    domain, op_type, since = "ai.onnx.ml", "Binarizer", 1
    type_constraints = {"T": NUM4}

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"Binarizer node {self.name!r}"
        if x.dtype.kind == "f":
            bad = np.isnan(x)
            if bad.any():
                raise InvalidArgument(f"{what}: input data with index {int(np.flatnonzero(bad.reshape(-1))[0])} "
                                      f"is NaN")
        y = output(ctx, 0, x.shape, x.dtype, what)
        np.greater(x, np.float32(self.threshold), out=y, casting="unsafe")
