import math

import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, first_input_type_ok


def reshape_target(in_shape, shape, allowzero: int) -> tuple:
    """The output shape of Reshape: 0 copies the input dim (unless allowzero), one -1 is inferred."""
    shape = np.asarray(shape)
    if shape.ndim != 1:
        raise ValueError(f"Reshape: the shape input must be 1-D, got shape {shape.shape}")
    dims = [int(d) for d in shape]
    if allowzero and 0 in dims and -1 in dims:
        raise ValueError(f"Reshape: with allowzero=1 the shape {dims} may not hold both 0 and -1")
    if dims.count(-1) > 1:
        raise ValueError(f"Reshape: at most one -1 allowed in shape {dims}")
    out = []
    for i, d in enumerate(dims):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise ValueError(f"Reshape: shape {dims} copies dim {i} (0) but the input {tuple(in_shape)} has rank "
                                 f"{len(in_shape)}")
            d = in_shape[i]
        elif d < -1:
            raise ValueError(f"Reshape: invalid dim {d} in shape {dims}")
        out.append(d)
    total = math.prod(in_shape)
    if -1 in out:
        k = out.index(-1)
        rest = math.prod([d for j, d in enumerate(out) if j != k])
        if rest == 0 or total % rest:
            raise ValueError(f"Reshape: cannot infer -1 in shape {dims} for an input of shape {tuple(in_shape)}")
        out[k] = total // rest
    if math.prod(out) != total:
        raise ValueError(f"Reshape: input of shape {tuple(in_shape)} ({total} elements) cannot become shape "
                         f"{tuple(out)} (requested {dims})")
    return tuple(out)


class Reshape_1(OpKernel):
    """Y := X viewed with the shape attribute (opsets 1-4: 0 copies the input dim, one -1 is inferred). A view."""

    domain, op_type, since = "", "Reshape", 1
    type_constraints = {"T": ALL_TYPES}

    @classmethod
    def check_types(cls, op):   # shape inference may leave opset-1 outputs untyped
        return first_input_type_ok(op, ("float16", "float32", "float64"))

    def compute(self, ctx):
        x = ctx.input(0)
        ctx.set_output(0, x.reshape(reshape_target(x.shape, np.asarray(self.shape, np.int64), 0)))


class Reshape_5(OpKernel):
    """Y := X viewed with the shape input (opsets 5, 13, 14 (allowzero), 19, 21: same semantics). A view, no copy."""

    domain, op_type, since = "", "Reshape", 5
    type_constraints = {"T": ALL_TYPES}
    allowzero = 0

    def __init__(self, info):
        super().__init__(info)
        self._targets = {}        # (input shape, shape bytes) -> output shape: the checks run once per shape

    def compute(self, ctx):
        x, shape = ctx.input(0), ctx.input(1)
        key = (x.shape, shape.dtype.str, shape.shape, shape.tobytes())
        target = self._targets.get(key)
        if target is None:
            target = reshape_target(x.shape, shape, self.allowzero)
            if len(self._targets) < 64:
                self._targets[key] = target
        ctx.set_output(0, x.reshape(target))
