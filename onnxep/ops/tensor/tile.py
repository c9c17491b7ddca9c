import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, ints, new_output


def tile(ctx, x, reps, what):
    """Y := X repeated reps[d] times along each dim d: one broadcasting copy into Y viewed as [r0, d0, r1, d1, ...]."""
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise InvalidArgument(f"{what}: repeats {reps} must hold {x.ndim} non-negative values (input shape "
                              f"{x.shape})")
    y = new_output(ctx, 0, tuple(n * r for n, r in zip(x.shape, reps)), x.dtype, what)
    if y.size:
        inter = [v for pair in zip(reps, x.shape) for v in pair]
        np.copyto(y.reshape(inter), x.reshape([v for n in x.shape for v in (1, n)]))


class Tile_1(OpKernel):
    """Y := X repeated `tiles` times along `axis` (opset 1: both scalar inputs)."""

    domain, op_type, since = "", "Tile", 1
    type_constraints = {"T": ALL_TYPES}

    def compute(self, ctx):
        x = ctx.input(0)
        t, a = ints(ctx.input(1), "Tile tiles"), ints(ctx.input(2), "Tile axis")
        if len(t) != 1 or len(a) != 1 or not 0 <= a[0] < x.ndim:
            raise InvalidArgument(f"Tile: tiles {t} and axis {a} must be scalars, axis within rank {x.ndim}")
        reps = [1] * x.ndim
        reps[a[0]] = t[0]
        tile(ctx, x, reps, f"Tile node {self.name!r}")


class Tile_6(OpKernel):
    """Y := X repeated repeats[d] times along each dim d (opsets 6, 13)."""

    domain, op_type, since = "", "Tile", 6
    type_constraints = {"T": ALL_TYPES, "T1": ("int64",)}

    def compute(self, ctx):
        x = ctx.input(0)
        tile(ctx, x, ints(ctx.input(1), "Tile repeats"), f"Tile node {self.name!r}")
