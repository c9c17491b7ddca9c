import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._cumulative import AXIS_TYPES, CUMULATIVE_TYPES, cumulate


class CumProd_26(OpKernel):
    """Y := running products of X along the axis input, optionally exclusive (each excluding its own element, the
    first 1) and/or reverse (from the end) (opset 26). Accumulates in X's type, float16 and bfloat16 in float32;
    integers wrap around on overflow."""

    domain, op_type, since = "", "CumProd", 26
    type_constraints = {"T": CUMULATIVE_TYPES, "T2": AXIS_TYPES}
    exclusive = 0
    reverse = 0

    def compute(self, ctx):
        cumulate(self, ctx, np.multiply, 1)
