import numpy as np

from onnxep.ops.math._numpy import FLOATS, NumpyUnary


class IsInf_10(NumpyUnary):
    """Y := X is +inf (detect_positive) or -inf (detect_negative), as bool (opsets 10, 20; numpy)"""

    domain, op_type, since = "", "IsInf", 10
    type_constraints = {"T1": FLOATS}
    out_dtype = np.dtype(bool)
    inplace = ()
    detect_negative = 1
    detect_positive = 1

    def apply(self, x, y):
        neg, pos = int(self.detect_negative), int(self.detect_positive)
        if neg and pos:
            np.isinf(x, out=y)
        elif pos:
            np.equal(x, np.inf, out=y)
        elif neg:
            np.equal(x, -np.inf, out=y)
        else:
            y[...] = False
