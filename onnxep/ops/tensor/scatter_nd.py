from onnxep.errors import InvalidArgument
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output
from onnxep.ops.tensor._scatter import ReducingScatter, scatter_into
from onnxep.ops.tensor.gather_nd import nd_rows


class ScatterND_11(ReducingScatter):
    """Y := data with the slices the last dim of indices addresses set to updates, or combined with reduction add /
    mul (opset 16) / max / min (opset 18) (opsets 11, 13, 16, 18). Negative indices count from the end. Without
    reduction a repeated index keeps the last update (the spec leaves it undefined)."""

    domain, op_type, since = "", "ScatterND", 11
    type_constraints = {"T": ALL_TYPES}

    def compute(self, ctx):
        x, idx, upd = ctx.input(0), ctx.input(1), ctx.input(2)
        what = f"ScatterND node {self.name!r}"
        if idx.ndim < 1:
            raise InvalidArgument(f"{what}: indices must have rank >= 1, got shape {idx.shape}")
        k = idx.shape[-1]
        inner = x.shape[k:] if k <= x.ndim else ()
        if k > x.ndim or upd.shape != idx.shape[:-1] + inner:
            raise InvalidArgument(f"{what}: updates {upd.shape} must have shape indices.shape[:-1] + "
                                  f"data.shape[{k}:] = {idx.shape[:-1] + tuple(inner)} (data {x.shape})")
        red = self.checked_reduction(x, what)
        rows = nd_rows(x.shape, idx, 0, what)
        y = new_output(ctx, 0, x.shape, x.dtype, what)
        y[...] = x
        if rows.size and y.size:
            scatter_into(y.reshape((-1,) + inner), rows.reshape(-1), upd.reshape((-1,) + inner), red)
