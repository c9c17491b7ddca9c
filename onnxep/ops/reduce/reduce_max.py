from onnxep.ops.reduce._reduce import ORDERED, Reduce


class ReduceMax_1(Reduce):
    """Y := max of X over axes (bool: any); axes an attribute (opsets 1, 11, 12, 13)"""

    domain, op_type, since = "", "ReduceMax", 1
    type_constraints = {"T": ORDERED}


class ReduceMax_18(ReduceMax_1):
    """Y := max of X over axes (bool: any); axes an optional input, noop_with_empty_axes (opsets 18, 20)"""

    since = 18
    axes_input = True
