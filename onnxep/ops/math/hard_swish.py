import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops.math._unary import Unary

#: _k_eltwise.pxi's UN_HARD_SWISH
UN_HARD_SWISH = 10


class HardSwish_14(Unary):
    """Y := X * max(0, min(1, X / 6 + 1 / 2)) (opsets 14+; float32 native, float16/64 numpy)"""

    domain, op_type, since = "", "HardSwish", 14

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, np.float32)
        if y.size:
            _kernels.hard_swish_f32(np.ascontiguousarray(x).reshape(-1), y.reshape(-1), ctx.num_threads)

    def apply_numpy(self, x, y):
        t = np.empty_like(y)                          # not in y: y may be x (inplace)
        np.multiply(x, x.dtype.type(1 / 6), out=t)
        t += x.dtype.type(0.5)
        np.clip(t, 0, 1, out=t)
        np.multiply(t, x, out=y)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: RL_UNARY's UN_HARD_SWISH, float32."""
        x, y = ins[0], outs[0]
        if (not _c_steps.plain(x, y) or x.dtype != np.float32 or y.dtype != np.float32 or x.shape != y.shape
                or not _c_steps.apart(y, x)):
            return None
        return "unary", [0, ~0], [UN_HARD_SWISH, y.size], [0.0, 0.0]
