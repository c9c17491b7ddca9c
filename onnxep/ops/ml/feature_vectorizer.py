import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import output


class FeatureVectorizer_1(OpKernel):
    """Y [N, sum(inputdimensions)] float32: input i's row (flattened past dimension 0; a 1-D input is one row) fills
    inputdimensions[i] columns, cut when longer, zero-padded when shorter (onnxruntime)."""

    domain, op_type, since = "ai.onnx.ml", "FeatureVectorizer", 1
    type_constraints = {"T1": ("int32", "int64", "float32", "float64")}
    inputdimensions = None

    def compute(self, ctx):
        what = f"FeatureVectorizer node {self.name!r}"
        dims = [int(d) for d in (self.inputdimensions or [])]
        n_in = ctx.input_count
        if len(dims) != n_in:
            raise InvalidArgument(f"{what}: {n_in} inputs but {len(dims)} inputdimensions values")
        if any(d < 0 for d in dims):
            raise InvalidArgument(f"{what}: inputdimensions must be >= 0, got {dims}")
        xs = [ctx.input(i) for i in range(n_in)]
        rows = [1 if x.ndim <= 1 else x.shape[0] for x in xs]
        n = rows[0] if rows else 0
        if any(r != n for r in rows):
            raise InvalidArgument(f"{what}: the inputs have different batch sizes {rows}")
        y = output(ctx, 0, (n, sum(dims)), np.float32, what)
        y[...] = 0
        off = 0
        for x, d in zip(xs, dims):
            x2 = x.reshape(n, -1)
            c = min(d, x2.shape[1])
            y[:, off:off + c] = x2[:, :c]
            off += d
