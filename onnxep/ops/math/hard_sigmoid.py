import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops.math._unary import Unary

#: _k_eltwise.pxi's UN_HARD_SIGMOID
UN_HARD_SIGMOID = 9


class HardSigmoid_6(Unary):
    """Y := max(0, min(1, alpha X + beta)) (opsets 6+; float32 native, float16/64 numpy; NaN stays NaN)"""

    domain, op_type, since = "", "HardSigmoid", 6

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, np.float32)
        if y.size:
            _kernels.hard_sigmoid_f32(np.ascontiguousarray(x).reshape(-1), y.reshape(-1), float(self.alpha),
                                      float(self.beta), ctx.num_threads)

    def apply_numpy(self, x, y):
        np.multiply(x, x.dtype.type(self.alpha), out=y)
        y += x.dtype.type(self.beta)
        np.clip(y, 0, 1, out=y)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: RL_UNARY's UN_HARD_SIGMOID, float32."""
        x, y = ins[0], outs[0]
        if (not _c_steps.plain(x, y) or x.dtype != np.float32 or y.dtype != np.float32 or x.shape != y.shape
                or not _c_steps.apart(y, x)):
            return None
        return "unary", [0, ~0], [UN_HARD_SIGMOID, y.size], [float(self.alpha), float(self.beta)]
