from onnxep.ops.reduce._reduce import Reduce


class ReduceSumSquare_1(Reduce):
    """Y := sum of X^2 over axes; axes an attribute (opsets 1, 11, 13)"""

    domain, op_type, since = "", "ReduceSumSquare", 1


class ReduceSumSquare_18(ReduceSumSquare_1):
    """Y := sum of X^2 over axes; axes an optional input, noop_with_empty_axes (opset 18)"""

    since = 18
    axes_input = True
