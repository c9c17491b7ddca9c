import numpy as np

from onnxep.ops.math._numpy import INTS, UNSIGNED, NumpyBinary


class BitShift_11(NumpyBinary):
    """Z := X << Y or X >> Y (direction LEFT / RIGHT) with broadcasting (opset 11: unsigned; opset 28: every
    integer type); numpy's shifts (a shift by the bit width or more gives 0, or -1 right-shifting a negative)."""

    domain, op_type, since = "", "BitShift", 11
    type_constraints = {"T": UNSIGNED}
    direction = ""

    @classmethod
    def supports(cls, op):
        d = op.node.attrs.get("direction")
        return d in ("LEFT", "RIGHT")

    def apply(self, a, b, z):
        (np.left_shift if self.direction == "LEFT" else np.right_shift)(a, b, out=z)


class BitShift_28(BitShift_11):
    since = 28
    type_constraints = {"T": INTS}
