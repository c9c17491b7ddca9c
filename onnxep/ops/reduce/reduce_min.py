from onnxep.ops.reduce._reduce import ORDERED, Reduce


class ReduceMin_1(Reduce):
    """Y := min of X over axes (bool: all); axes an attribute (opsets 1, 11, 12, 13)"""

    domain, op_type, since = "", "ReduceMin", 1
    type_constraints = {"T": ORDERED}


class ReduceMin_18(ReduceMin_1):
    """Y := min of X over axes (bool: all); axes an optional input, noop_with_empty_axes (opsets 18, 20)"""

    since = 18
    axes_input = True
