"""MaxPool (float32 native; float16 / float64 / int8 / uint8 through numpy; NCHW, 1-3 spatial dims), with the
optional Indices output (storage_order 0 or 1)."""
from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops._pool_common import WindowPool, supports_pool
from onnxep.ops.nn import _numpy_paths
from onnxep.ops.nn._numpy_paths import NumpyPath
import numpy as np


class _MaxPool(NumpyPath, WindowPool, OpKernel):
    """Y[n, c, o] := max over window o of X[n, c]; Indices := flat index of that max in X (first one wins)."""

    type_constraints = {"T": ("float32", "float16", "float64", "int8", "uint8")}
    storage_order = 0

    @classmethod
    def supports(cls, op):
        if supports_pool(op) is None:
            return False
        a = op.node.attrs
        if int(a.get("storage_order") or 0) not in (0, 1):
            return False
        if len(op.node.outputs) > 1 and op.node.outputs[1]:
            return cls.since >= 8
        return True

    def _compute_numpy(self, ctx):
        x = ctx.input(0)
        shape = x.shape[:2] + self.out_spatial(x)
        y = ctx.output(0, shape, x.dtype)
        ind = ctx.output(1, shape, np.int64) if ctx.has_output(1) else None
        if y.size:
            _numpy_paths.max_pool(x, self.pool, y, ind, int(self.storage_order))

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim != self.pool.rank + 2:
            raise ValueError(f"MaxPool: input rank {x.ndim}, kernel_shape has {self.pool.rank} dims")
        out, g = self._geom[x.shape[2:]]
        shape = x.shape[:2] + tuple(out)
        y = ctx.output(0, shape, np.float32)
        ind = ctx.output(1, shape, np.int64) if ctx.has_output(1) else None
        _kernels.maxpool_f32(x.reshape(-1), y.reshape(-1), None if ind is None else ind.reshape(-1),
                             x.shape[0] * x.shape[1], g, int(self.storage_order), ctx.num_threads)


class MaxPool_1(_MaxPool):
    domain, op_type, since = "", "MaxPool", 1


class MaxPool_8(_MaxPool):
    domain, op_type, since = "", "MaxPool", 8


class MaxPool_10(_MaxPool):
    domain, op_type, since = "", "MaxPool", 10


class MaxPool_11(_MaxPool):
    domain, op_type, since = "", "MaxPool", 11


class MaxPool_12(_MaxPool):
    domain, op_type, since = "", "MaxPool", 12
