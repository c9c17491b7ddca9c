import math

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis
from onnxep.ops.tensor._helpers import ALL_TYPES, first_input_type_ok, ints, new_output


def split_sizes(n, split, outputs, num_outputs=None, what="Split") -> list:
    """The part sizes along a dim of size n: `split` when given (must sum to n), else num_outputs parts of
    ceil(n / num_outputs) with a smaller last one (opset 18), else `outputs` equal parts (n must divide)."""
    if split is not None:
        if len(split) != outputs or sum(split) != n or any(s < 0 for s in split):
            raise InvalidArgument(f"{what}: split {split} must have {outputs} non-negative sizes summing to {n}")
        return split
    if num_outputs is not None:
        if num_outputs != outputs or num_outputs < 1:
            raise InvalidArgument(f"{what}: num_outputs {num_outputs} but the node has {outputs} outputs")
        k = -(-n // num_outputs)
        sizes = [min(k, max(n - i * k, 0)) for i in range(num_outputs)]
        if sizes[-1] == 0 and n:
            raise InvalidArgument(f"{what}: a dim of {n} cannot be split into {num_outputs} parts of {k}")
        return sizes
    if n % outputs:
        raise InvalidArgument(f"{what}: a dim of {n} does not split into {outputs} equal parts")
    return [n // outputs] * outputs


class _Split(OpKernel):
    type_constraints = {"T": ALL_TYPES}
    axis = 0
    split = None
    num_outputs = None

    def split_input(self, ctx):
        return None if self.split is None else ints(self.split, "Split split")

    def compute(self, ctx):
        x = ctx.input(0)
        axis = norm_axis(self.axis, x.ndim, "Split") if x.ndim else 0
        if not x.ndim:
            raise InvalidArgument("Split: the input must have rank >= 1")
        num = None if self.num_outputs is None else int(self.num_outputs)
        sizes = split_sizes(x.shape[axis], self.split_input(ctx), ctx.output_count, num)
        lead = (slice(None),) * axis
        o = 0
        for i, n in enumerate(sizes):
            part = x[lead + (slice(o, o + n),)]
            o += n
            if ctx.has_output(i):
                np.copyto(new_output(ctx, i, part.shape, x.dtype, f"Split node {self.name!r}"), part)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: rl_split (row by row memcpy), every output present, of x's dtype, apart."""
        x = ins[0]
        k = len(outs)
        if (type(self).compute is not _Split.compute or not 0 < k < _c_steps.SLOTS or any(y is None for y in outs)
                or not _c_steps.plain(x, *outs) or x.ndim < 1):
            return None
        axis = norm_axis(self.axis, x.ndim, "Split")
        inner = math.prod(x.shape[axis + 1:]) * x.itemsize
        rows = math.prod(x.shape[:axis])
        if any(y.dtype != x.dtype or y.shape[:axis] != x.shape[:axis] or y.shape[axis + 1:] != x.shape[axis + 1:]
               or np.may_share_memory(x, y) for y in outs) or sum(y.shape[axis] for y in outs) != x.shape[axis]:
            return None
        return "split", [0, *(~j for j in range(k))], [k, rows, x.shape[axis] * inner,
                                                     *(y.shape[axis] * inner for y in outs)], []


class Split_1(_Split):
    """Y_i := consecutive parts of X along axis, sized by the split attribute or the optional second input (opset 1),
    else equal (opsets 1, 2, 11 (negative axis))."""

    domain, op_type, since = "", "Split", 1

    @classmethod
    def check_types(cls, op):
        return super().check_types(op) if op.node.opset >= 2 else first_input_type_ok(op, ("float16", "float32",
                                                                                               "float64"))

    def split_input(self, ctx):
        if self.split is None and ctx.input(1) is not None:
            return ints(ctx.input(1), "Split split")
        return super().split_input(ctx)


class Split_13(_Split):
    """Y_i := consecutive parts of X along axis, sized by the optional split input, else equal parts (opset 13) or
    num_outputs parts of ceil(n / num_outputs) (opset 18)."""

    domain, op_type, since = "", "Split", 13

    def split_input(self, ctx):
        s = ctx.input(1)
        return None if s is None else ints(s, "Split split")
