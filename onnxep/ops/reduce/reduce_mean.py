from onnxep.ops.reduce._reduce import Reduce


class ReduceMean_1(Reduce):
    """Y := mean of X over axes; axes an attribute (opsets 1, 11, 13)"""

    domain, op_type, since = "", "ReduceMean", 1


class ReduceMean_18(ReduceMean_1):
    """Y := mean of X over axes; axes an optional input, noop_with_empty_axes (opset 18)"""

    since = 18
    axes_input = True
