from onnxep.ops.reduce._reduce import Reduce


class ReduceL1_1(Reduce):
    """Y := sum of |X| over axes; axes an attribute (opsets 1, 11, 13)"""

    domain, op_type, since = "", "ReduceL1", 1


class ReduceL1_18(ReduceL1_1):
    """Y := sum of |X| over axes; axes an optional input, noop_with_empty_axes (opset 18)"""

    since = 18
    axes_input = True
