"""LRN (float32 native, float16 / float64 through numpy; any rank >= 3: N, C, ...)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops.nn import _numpy_paths
from onnxep.ops.nn._numpy_paths import NumpyPath


class _LRN(NumpyPath, OpKernel):
    """Y := X / (bias + alpha / size * sum_{c' in [c - floor((size-1)/2), c + ceil((size-1)/2)]} X[c']^2) ** beta"""

    type_constraints = {"T": ("float32", "float16", "float64")}
    alpha = 0.0001
    beta = 0.75
    bias = 1.0

    @classmethod
    def supports(cls, op):
        size = op.node.attrs.get("size")
        shape = op.input_types[0].shape if op.input_types[0] is not None else None
        return size is not None and int(size) >= 1 and shape is not None and len(shape) >= 3

    def _compute_numpy(self, ctx):
        x = ctx.input(0)
        if x.ndim < 3:
            raise ValueError(f"LRN: input rank {x.ndim} < 3")
        y = ctx.output(0, x.shape, x.dtype)
        if y.size:
            _numpy_paths.lrn(x, int(self.size), float(self.alpha), float(self.beta), float(self.bias), y)

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim < 3:
            raise ValueError(f"LRN: input rank {x.ndim} < 3")
        n, c = x.shape[:2]
        s = int(np.prod(x.shape[2:]))
        y = ctx.output(0, x.shape, np.float32)
        _kernels.lrn_f32(x.reshape(n, c, s), y.reshape(n, c, s), int(self.size), float(self.alpha),
                         float(self.beta), float(self.bias), ctx.num_threads)


class LRN_1(_LRN):
    domain, op_type, since = "", "LRN", 1


class LRN_13(_LRN):
    domain, op_type, since = "", "LRN", 13
