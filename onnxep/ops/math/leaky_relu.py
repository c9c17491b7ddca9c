import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel


class LeakyRelu_6(OpKernel):
    """Y := X if X >= 0 else alpha * X (opsets 6, 16; float32)"""

    domain, op_type, since = "", "LeakyRelu", 6
    type_constraints = {"T": ("float32",)}
    inplace = ((0, 0),)
    alpha: float = 0.01

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, np.float32)
        _kernels.leaky_relu_f32(x.reshape(-1), y.reshape(-1), float(self.alpha), ctx.num_threads)
