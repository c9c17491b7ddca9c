from onnxep import _kernels
from onnxep.ops._base import OpKernel


class Relu_6(OpKernel):
    """Y := max(X, 0)"""

    domain, op_type, since = "", "Relu", 6
    type_constraints = {"T": ("float32",)}
    inplace = ((0, 0),)

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, x.dtype)
        _kernels.relu_f32(x.reshape(-1), y.reshape(-1), ctx.num_threads)
