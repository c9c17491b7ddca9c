from onnxep.ops.reduce._reduce import Reduce


class ReduceSum_1(Reduce):
    """Y := sum of X over axes; axes an attribute (opsets 1, 11)"""

    domain, op_type, since = "", "ReduceSum", 1


class ReduceSum_13(ReduceSum_1):
    """Y := sum of X over axes; axes an optional input, noop_with_empty_axes (opset 13)"""

    since = 13
    axes_input = True
