from onnxep.ops.reduce._reduce import Reduce


class ReduceL2_1(Reduce):
    """Y := sqrt(sum of X^2 over axes); axes an attribute (opsets 1, 11, 13)"""

    domain, op_type, since = "", "ReduceL2", 1


class ReduceL2_18(ReduceL2_1):
    """Y := sqrt(sum of X^2 over axes); axes an optional input, noop_with_empty_axes (opset 18)"""

    since = 18
    axes_input = True
