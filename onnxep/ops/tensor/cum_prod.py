import numpy as np

from onnxep.ops.tensor._cumulative import Cumulative


class CumProd_26(Cumulative):
    """Y := running products of X along the axis input, optionally exclusive (each excluding its own element, the
    first 1) and/or reverse (from the end) (opset 26). Accumulates in X's type, float16 and bfloat16 in float32;
    integers wrap around on overflow."""

    domain, op_type, since = "", "CumProd", 26
    ufunc, identity = np.multiply, 1
