"""SplitToSequence-11, -24: the input split along `axis` into a sequence of tensors (copies). No `split`: parts of
size 1, the axis dropped when keepdims=0; a scalar split: parts of that size (the last one smaller when the axis does
not divide); a 1-D split: the parts' sizes, summing to the axis' length. Opset 24 only widens the element types."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.sequence._seq import kind_ok


class SplitToSequence_11(OpKernel):
    op_type, since = "SplitToSequence", 11
    axis, keepdims = 0, 1

    @classmethod
    def check_types(cls, op) -> bool:
        its = op.input_types
        if not kind_ok(its[0], "tensor"):
            return False
        return len(its) < 2 or its[1] is None or its[1].type_str in ("tensor(int32)", "tensor(int64)")

    def compute(self, ctx):
        x = ctx.input(0)
        name = self.name
        if x.ndim == 0:
            raise InvalidArgument(f"SplitToSequence node {name!r}: the input must have at least one axis")
        axis = int(self.axis)
        if not -x.ndim <= axis < x.ndim:
            raise InvalidArgument(f"SplitToSequence node {name!r}: axis {axis} is out of range for rank {x.ndim}")
        axis %= x.ndim
        dim = x.shape[axis]
        split = ctx.input(1) if ctx.has_input(1) else None
        squeeze = False
        if split is None:
            sizes = [1] * dim
            squeeze = not int(self.keepdims)
        else:
            s = np.asarray(split)
            if s.ndim == 0:
                k = int(s)
                if k <= 0:
                    raise InvalidArgument(f"SplitToSequence node {name!r}: a scalar split must be positive, got {k}")
                sizes = [k] * (dim // k) + ([dim % k] if dim % k else [])
            elif s.ndim == 1:
                sizes = [int(v) for v in s]
                if any(v < 0 for v in sizes) or sum(sizes) != dim:
                    raise InvalidArgument(f"SplitToSequence node {name!r}: split {sizes} must be non-negative and "
                                          f"sum to the length {dim} of axis {axis}")
            else:
                raise InvalidArgument(f"SplitToSequence node {name!r}: split must be a scalar or 1-D, got shape "
                                      f"{s.shape}")
        ends = np.cumsum([0] + sizes)
        index = [slice(None)] * x.ndim
        parts = []
        for a, b in zip(ends[:-1], ends[1:]):
            index[axis] = int(a) if squeeze else slice(int(a), int(b))
            parts.append(np.array(x[tuple(index)], copy=True, order="C"))
        ctx.set_output(0, parts)
