import numpy as np

from onnxep.ops.tensor._cumulative import Cumulative


class CumSum_11(Cumulative):
    """Y := running sums of X along the axis input, optionally exclusive (each excluding its own element) and/or
    reverse (from the end) (opsets 11, 14). Accumulates in X's type, float16 and bfloat16 in float32 (as
    onnxruntime)."""

    domain, op_type, since = "", "CumSum", 11
    ufunc, identity = np.add, 0
