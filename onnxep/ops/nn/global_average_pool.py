"""GlobalAveragePool (float32 native, float16 / float64 through numpy; any rank >= 3)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops.nn import _numpy_paths
from onnxep.ops.nn._numpy_paths import NumpyPath


class GlobalAveragePool_1(NumpyPath, OpKernel):
    """Y[n, c, 1, ...] := mean(X[n, c, ...]) (accumulated in double)"""

    domain, op_type, since = "", "GlobalAveragePool", 1
    type_constraints = {"T": ("float32", "float16", "float64")}
    is_max = False

    def _compute_numpy(self, ctx):
        x = ctx.input(0)
        if x.ndim < 3:
            raise ValueError(f"{self.op_type}: input rank {x.ndim} < 3")
        y = ctx.output(0, x.shape[:2] + (1,) * (x.ndim - 2), x.dtype)
        if y.size:
            _numpy_paths.global_pool(x, y, self.is_max)

    @classmethod
    def supports(cls, op):
        shape = op.input_types[0].shape if op.input_types and op.input_types[0] is not None else None
        if shape is None or len(shape) < 3:
            return False
        # an empty spatial extent has no mean/max: leave it to the reference backend
        return not any(isinstance(d, int) and d == 0 for d in shape[2:])

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim < 3:
            raise ValueError(f"{self.op_type}: input rank {x.ndim} < 3")
        nc = x.shape[0] * x.shape[1]
        s = int(np.prod(x.shape[2:]))
        y = ctx.output(0, x.shape[:2] + (1,) * (x.ndim - 2), np.float32)
        _kernels.global_pool_f32(x.reshape(nc, s), y.reshape(-1), self.is_max, ctx.num_threads)
