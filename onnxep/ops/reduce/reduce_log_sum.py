from onnxep.ops.reduce._reduce import Reduce


class ReduceLogSum_1(Reduce):
    """Y := log(sum of X over axes); axes an attribute (opsets 1, 11, 13)"""

    domain, op_type, since = "", "ReduceLogSum", 1


class ReduceLogSum_18(ReduceLogSum_1):
    """Y := log(sum of X over axes); axes an optional input, noop_with_empty_axes (opset 18)"""

    since = 18
    axes_input = True
