import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops.math._numpy import NUMERIC, NumpyBinary


class Mod_10(NumpyBinary):
    """C := A mod B with multidirectional broadcasting (opsets 10, 13). fmod=0: the remainder takes the divisor's
    sign (np.mod); fmod=1: the dividend's (C fmod, np.fmod). The spec asks fmod=1 for floats; fmod=0 on floats is
    computed as onnx.reference does (np.mod). An integer zero divisor raises."""

    domain, op_type, since = "", "Mod", 10
    type_constraints = {"T": NUMERIC}
    fmod = 0

    def apply(self, a, b, z):
        if z.dtype.kind in "iu" and not b.all():
            raise InvalidArgument(f"Mod: integer division by zero (divisor B of shape {b.shape} holds a 0)")
        (np.fmod if int(self.fmod) else np.mod)(a, b, out=z)
