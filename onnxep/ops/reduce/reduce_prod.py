from onnxep.ops.reduce._reduce import Reduce


class ReduceProd_1(Reduce):
    """Y := product of X over axes; axes an attribute (opsets 1, 11, 13)"""

    domain, op_type, since = "", "ReduceProd", 1


class ReduceProd_18(ReduceProd_1):
    """Y := product of X over axes; axes an optional input, noop_with_empty_axes (opset 18)"""

    since = 18
    axes_input = True
