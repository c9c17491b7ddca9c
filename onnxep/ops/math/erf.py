import numpy as np

from onnxep import _kernels
from onnxep.ops.math._erf import erf_f64
from onnxep.ops.math._unary import Unary


class Erf_9(Unary):
    """Y := erf(X) (opsets 9, 13): float32 a vectorised polynomial, max error 1.3e-7 (~2 ulp), NaN stays NaN;
    float16 / bfloat16 through it (computed in float32, rounded once); float64 _erf.erf_f64 (a few ulp). The integer
    types of opset 9 are left to another backend."""

    domain, op_type, since = "", "Erf", 9
    type_constraints = {"T": ("float32", "float16", "bfloat16", "float64")}
    kernel = staticmethod(_kernels.erf_f32)

    def compute_numpy(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, x.dtype)
        if y.size and x.dtype == np.float64:
            erf_f64(x, y)
        elif y.size:
            t = x.astype(np.float32).reshape(-1)
            _kernels.erf_f32(t, t, ctx.num_threads)
            y.reshape(-1)[...] = t


class Erf_13(Erf_9):
    since = 13
