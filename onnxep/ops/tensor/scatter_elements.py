from onnxep.errors import InvalidArgument
from onnxep.ops.tensor._helpers import INDEX_TYPES, ALL_TYPES, new_output, normalize_indices
from onnxep.ops.tensor._scatter import ReducingScatter, scatter_into
from onnxep.ops.tensor.gather_elements import along_axis_checks, flat_positions


class ScatterElements_11(ReducingScatter):
    """Y := data with Y[.., indices[i..], ..] = updates[i..] along axis, or combined with reduction add / mul (opset
    16) / max / min (opset 18) (opsets 11, 13, 16, 18). Negative indices count from the end; out-of-range ones raise.
    Without reduction a repeated index keeps the last update in C order (the spec leaves it undefined)."""

    domain, op_type, since = "", "ScatterElements", 11
    type_constraints = {"T": ALL_TYPES, "Tind": INDEX_TYPES}
    axis = 0

    def compute(self, ctx):
        x, idx, upd = ctx.input(0), ctx.input(1), ctx.input(2)
        axis = along_axis_checks("ScatterElements", x, idx, self.axis)
        if idx.shape != upd.shape:
            raise InvalidArgument(f"ScatterElements: indices {idx.shape} and updates {upd.shape} must have one shape")
        red = self.checked_reduction(x, "ScatterElements")
        idx = normalize_indices(idx, x.shape[axis], "ScatterElements", f" for axis {axis} of data shape {x.shape}")
        y = new_output(ctx, 0, x.shape, x.dtype, f"ScatterElements node {self.name!r}")
        y[...] = x
        if idx.size:
            # the element (i0, .., ik, ..) of updates goes to y[i0, .., indices[i0, .., ik, ..], ..]
            scatter_into(y.reshape(-1), flat_positions(x.shape, idx, axis).reshape(-1), upd.reshape(-1), red)
