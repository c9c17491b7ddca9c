import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import output


class ArrayFeatureExtractor_1(OpKernel):
    """Z := X[..., Y] with the indices Y (any shape, read flat) along X's last axis; a 1-D X gives [1, len(Y)]
    (onnxruntime's shape). Indices must be in [0, X.shape[-1]) (onnxruntime refuses larger ones; negatives too)."""

    domain, op_type, since = "ai.onnx.ml", "ArrayFeatureExtractor", 1
    type_constraints = {"T": ("float32", "float64", "int64", "int32", "string")}

    def compute(self, ctx):
        x, y = ctx.input(0), ctx.input(1)
        what = f"ArrayFeatureExtractor node {self.name!r}"
        if x.ndim == 0:
            raise InvalidArgument(f"{what}: X must have at least one dimension, got a scalar")
        idx = np.asarray(y, np.int64).reshape(-1)
        if idx.size == 0:
            raise InvalidArgument(f"{what}: Y (the indices) is empty")
        n = x.shape[-1]
        if idx.min() < 0 or idx.max() >= n:
            raise InvalidArgument(f"{what}: indices must be in [0, {n - 1}], got values in [{idx.min()}, {idx.max()}]")
        shape = (1, idx.size) if x.ndim == 1 else x.shape[:-1] + (idx.size,)
        z = output(ctx, 0, shape, x.dtype, what)
        z[...] = np.take(x, idx, axis=-1).reshape(shape)
