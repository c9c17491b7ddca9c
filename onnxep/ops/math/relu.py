import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops.math._numpy import FLOATS, SIGNED, NativeOrNumpy


class Relu_6(NativeOrNumpy, OpKernel):
    """Y := max(X, 0) (opsets 6, 13, 14; float32 native, float16/64 and (opset 14) signed ints numpy)"""

    domain, op_type, since = "", "Relu", 6
    type_constraints = {"T": FLOATS + SIGNED}
    inplace = ((0, 0),)

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, x.dtype)
        _kernels.relu_f32(x.reshape(-1), y.reshape(-1), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: relu_f32's loop (RL_UNARY op -1), float32 nodes only."""
        x, y = ins[0], outs[0]
        if "compute" in self.__dict__ or x.dtype != np.float32 or y.dtype != np.float32 or not (
                x.flags.c_contiguous and y.flags.c_contiguous) or x.size != y.size:
            return None
        return "unary", [0, ~0], [-1, y.size], [0.0, 0.0]

    def compute_numpy(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, x.dtype)
        if y.size:
            np.maximum(x, x.dtype.type(0), out=y)
