import numpy as np

from onnxep.ops.reduce._arg import ArgReduce


class ArgMin_1(ArgReduce):
    """Y := index of the min of X along axis, keepdims; select_last_index from opset 12 (opsets 1, 11, 12, 13)"""

    domain, op_type, since = "", "ArgMin", 1
    argfn = staticmethod(np.argmin)
