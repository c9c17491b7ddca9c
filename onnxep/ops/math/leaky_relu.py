import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops.math._numpy import FLOATS, NativeOrNumpy


class LeakyRelu_6(NativeOrNumpy, OpKernel):
    """Y := X if X >= 0 else alpha * X (opsets 6, 16; float32 native, float16/64 numpy)"""

    domain, op_type, since = "", "LeakyRelu", 6
    type_constraints = {"T": FLOATS}
    inplace = ((0, 0),)
    alpha: float = 0.01

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, np.float32)
        _kernels.leaky_relu_f32(x.reshape(-1), y.reshape(-1), float(self.alpha), ctx.num_threads)

    def compute_numpy(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, x.dtype)
        if y.size:
            neg = x < 0                      # before y is written (y may be X's memory)
            np.copyto(y, x)
            np.multiply(x, x.dtype.type(self.alpha), out=y, where=neg)
