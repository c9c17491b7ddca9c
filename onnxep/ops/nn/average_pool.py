"""AveragePool (float32 native, float16 / float64 through numpy; NCHW, 1-3 spatial dims)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops._pool_common import WindowPool, supports_pool
from onnxep.ops.nn import _numpy_paths
from onnxep.ops.nn._numpy_paths import NumpyPath


class _AveragePool(NumpyPath, WindowPool, OpKernel):
    """Y[n, c, o] := mean over window o of X[n, c]; the divisor counts the taps inside the input, or inside the
    padded input when count_include_pad (never the ceil_mode overhang past the end pad)."""

    type_constraints = {"T": ("float32", "float16", "float64")}
    count_include_pad = 0

    @classmethod
    def supports(cls, op):
        return supports_pool(op) is not None

    def _compute_numpy(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape[:2] + self.out_spatial(x), x.dtype)
        if y.size:
            _numpy_paths.avg_pool(x, self.pool, y, int(self.count_include_pad))

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim != self.pool.rank + 2:
            raise ValueError(f"AveragePool: input rank {x.ndim}, kernel_shape has {self.pool.rank} dims")
        out, g = self._geom[x.shape[2:]]
        y = ctx.output(0, x.shape[:2] + tuple(out), np.float32)
        _kernels.avgpool_f32(x.reshape(-1), y.reshape(-1), x.shape[0] * x.shape[1], g, int(self.count_include_pad),
                             ctx.num_threads)


class AveragePool_1(_AveragePool):
    domain, op_type, since = "", "AveragePool", 1


class AveragePool_7(_AveragePool):
    domain, op_type, since = "", "AveragePool", 7


class AveragePool_10(_AveragePool):
    domain, op_type, since = "", "AveragePool", 10


class AveragePool_11(_AveragePool):
    domain, op_type, since = "", "AveragePool", 11


class AveragePool_19(_AveragePool):
    domain, op_type, since = "", "AveragePool", 19
