import numpy as np

from onnxep import _kernels
from onnxep.ops.math._erf import erf_f64
from onnxep.ops.math._numpy import NumpyKernel


class Gelu_20(NumpyKernel):
    """Y := X * (1 + erf(X / sqrt 2)) / 2 (approximate "none"), or X * (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3))) / 2
    ("tanh") (opset 20). float32 the native kernels (gelu_f32, gelu_tanh_f32), float16 / bfloat16 through them
    (float32, rounded once); float64 with _erf.erf_f64 ("none") or numpy ("tanh")."""

    domain, op_type, since = "", "Gelu", 20
    type_constraints = {"T": ("float16", "float32", "float64", "bfloat16")}
    approximate = "none"

    @classmethod
    def supports(cls, op):
        a = op.node.attrs.get("approximate", "none")
        return a in ("none", "tanh")

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry for float32: gelu_f32's loop (TF_UNARY_GELU), or for approximate "tanh"
        gelu_tanh_f32's (RL_UNARY's UN_GELU_TANH = 11)."""
        x, y = ins[0], outs[0]
        if (type(self).compute is not Gelu_20.compute or x.dtype != np.float32
                or y.dtype != np.float32 or not (x.flags.c_contiguous and y.flags.c_contiguous) or x.size != y.size):
            return None
        if self.approximate == "tanh":
            return "unary", [0, ~0], [11, y.size], [0.0, 0.0]
        return "tf_unary", [0, ~0], [1, y.size], []

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, x.dtype)
        if not y.size:
            return
        if self.approximate == "tanh" and x.dtype != np.float64:
            if x.dtype == np.float32:
                _kernels.gelu_tanh_f32(np.ascontiguousarray(x).reshape(-1), y.reshape(-1), ctx.num_threads)
            else:
                t = x.astype(np.float32).reshape(-1)
                _kernels.gelu_tanh_f32(t, t, ctx.num_threads)
                y.reshape(-1)[...] = t
            return
        if self.approximate != "tanh":
            if x.dtype == np.float32:
                _kernels.gelu_f32(x.reshape(-1), y.reshape(-1), ctx.num_threads)
            elif x.dtype == np.float64:
                t = x * (1 / np.sqrt(2.0))
                erf_f64(t, t)
                t += 1
                t *= x
                np.multiply(t, 0.5, out=y)
            else:
                t = x.astype(np.float32).reshape(-1)
                _kernels.gelu_f32(t, t, ctx.num_threads)
                y.reshape(-1)[...] = t
            return
        c = x.dtype.type(np.sqrt(2 / np.pi))
        with np.errstate(all="ignore"):
            np.multiply(x, x, out=y)
            y *= x.dtype.type(0.044715)
            y += 1
            y *= x
            y *= c
            np.tanh(y, out=y)
            y += 1
            y *= x
            y *= x.dtype.type(0.5)
