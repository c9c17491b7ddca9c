import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._cumulative import AXIS_TYPES, CUMULATIVE_TYPES, cumulate


class CumSum_11(OpKernel):
    """Y := running sums of X along the axis input, optionally exclusive (each excluding its own element) and/or
    reverse (from the end) (opsets 11, 14). Accumulates in X's type, float16 and bfloat16 in float32 (as
    onnxruntime)."""

    domain, op_type, since = "", "CumSum", 11
    type_constraints = {"T": CUMULATIVE_TYPES, "T2": AXIS_TYPES}
    exclusive = 0
    reverse = 0

    def compute(self, ctx):
        cumulate(self, ctx, np.add, 0)
