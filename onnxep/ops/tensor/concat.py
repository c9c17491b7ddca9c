import math

import numpy as np

from onnxep import _kernels
from onnxep.contracts.kernel import KernelContext
from onnxep.graph.model import check_size
from onnxep.ops import _c_steps, _grow
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axis
from onnxep.ops.tensor._helpers import NUMERIC_BOOL_BF16, first_input_type_ok


#: outputs up to this many bytes are joined by numpy.concatenate (a new output, inputs of its dtype)
SMALL_BYTES = 1024


class Concat_4(OpKernel):
    """Y := the inputs joined along axis (opsets 4, 11 (negative axis), 13)."""

    domain, op_type, since = "", "Concat", 4
    # no strings yet: tests/contracts/test_backend.py uses a string Concat as its node left to the reference backend
    type_constraints = {"T": NUMERIC_BOOL_BF16}
    #: set by the session (graph/executor.py enable_appends): the output is a graph output whose readers all take
    #: strided inputs, so it may be a view with spare rows that the next run appends to (ops/_grow.py)
    grow_output = False

    def __init__(self, info):
        super().__init__(info)
        # any input may be a strided view (the general path copies through numpy, the appending one reads input 0's
        # buffer record); the compiled step (c_step) takes C-contiguous arrays only
        self.strided_inputs = tuple(range(len(info.input_types)))

    def compute(self, ctx):
        y = ctx.preallocated(0)
        if y is not None and _all_placed(ctx, y, self.axis):
            return
        xs = [ctx.input(i) for i in range(ctx.input_count)]
        if not xs or any(x is None for x in xs):
            raise ValueError("Concat: needs at least one input and no omitted ones")
        r = xs[0].ndim
        axis = norm_axis(self.axis, r, "Concat")
        first = xs[0].shape
        for i, x in enumerate(xs):
            if x.ndim != r or x.shape[:axis] != first[:axis] or x.shape[axis + 1:] != first[axis + 1:]:
                raise ValueError(f"Concat: input {i} has shape {x.shape}, incompatible with input 0's {first} "
                                 f"along axis {axis}")
        shape = list(first)
        shape[axis] = sum(x.shape[axis] for x in xs)
        dtype = xs[0].dtype
        run = ctx.run
        if (self.grow_output and y is None and ctx.__class__ is KernelContext and 0 not in shape and len(xs) > 1
                and run is not None and run.outside(tuple(shape), dtype)):
            def check(full, dtype):
                check_size(full, dtype, f"Concat node {self.name!r}", run.limit)
            ctx.values[ctx.outs[0]] = _grow.concat(xs, axis, shape, dtype, ctx.num_threads, check)
            return
        if y is None and math.prod(shape) * dtype.itemsize <= SMALL_BYTES and all(x.dtype == dtype for x in xs):
            # (tiny arrays -- the shape vectors exporters join: numpy's loop costs ~1 us, copy_rows' memoryviews ~10)
            np.concatenate(xs, axis=axis, out=ctx.output(0, shape, dtype))
            return
        # y: the output producers with a plan slot have written their inputs into already, if any
        if y is None or y.shape != tuple(shape) or y.dtype != dtype:
            y = ctx.output(0, shape, dtype)
        last = axis == r - 1
        done, o = [], 0             # inputs already in y[..., o:o + n] (written there by their producers)
        for i, x in enumerate(xs):
            n = x.shape[axis]
            placed = ctx.placed(i) if last and n else None
            done.append(not n or (placed is not None and placed[0]() is y and placed[1] == o))
            o += n
        if not all(done) and any(not d and np.may_share_memory(x, y) for d, x in zip(done, xs)):
            # an input lives in y but elsewhere than its place: copying it there could overwrite another input
            # first, so the result goes to a new tensor
            y = ctx.output(0, shape, dtype)
            done = [False] * len(xs)
        join_into(y, xs, axis, done, ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: rl_concat (row by row memcpy), inputs of y's dtype apart from y."""
        y = outs[0]
        k = len(ins)
        if not 0 < k < _c_steps.SLOTS or not _c_steps.plain(y, *ins) or any(
                x.dtype != y.dtype or x.ndim != y.ndim or np.may_share_memory(x, y) for x in ins):
            return None
        axis = norm_axis(self.axis, y.ndim, "Concat")
        inner = math.prod(y.shape[axis + 1:]) * y.itemsize
        rows = math.prod(y.shape[:axis])
        chunks = [x.shape[axis] * inner for x in ins]
        if sum(chunks) != y.shape[axis] * inner or any(x.size != rows * c // y.itemsize for x, c in zip(ins, chunks)):
            return None
        return "concat", [*range(k), ~0], [k, rows, y.shape[axis] * inner, *chunks], []


def join_into(y, xs, axis, skip, nthreads) -> None:
    """Each input not skipped (`skip`: a flag per input) copied into y's rows [o, o + n) along axis, o the rows of the
    inputs before it; y's axis may be longer than theirs together (a buffer with spare rows, ops/_grow.py).
    copy_rows for a C-contiguous input of y's dtype, numpy's assignment for any other."""
    inner = math.prod(y.shape[axis + 1:]) * y.itemsize
    rows = math.prod(y.shape[:axis])
    native = not y.dtype.hasobject and y.flags.c_contiguous
    lead = (slice(None),) * axis
    o = 0
    for x, s in zip(xs, skip):
        n = x.shape[axis]
        if n and not s:
            if native and x.dtype == y.dtype and x.flags.c_contiguous:
                _kernels.copy_rows(x.reshape(-1).view(np.uint8), rows, n * inner, y.reshape(-1).view(np.uint8),
                                   y.shape[axis] * inner, o * inner, nthreads)
            else:
                y[lead + (slice(o, o + n),)] = x
        o += n


def _all_placed(ctx, y, axis) -> bool:
    """Whether every input was written by its producer into y's channel slice at its Concat offset, the last one
    ending at y's last channel (KernelContext.slot; then y is the result and nothing is left to do). A few dictionary
    lookups: the general path's checks cost 15-50 us per Concat in a model run."""
    if not y.ndim or axis not in (-1, y.ndim - 1):
        return False
    o = 0
    for i, name in enumerate(ctx.ins):
        placed = ctx.placed(i)
        if placed is None or placed[0]() is not y or placed[1] != o:
            return False
        o += ctx.values[name].shape[-1]
    return o == y.shape[-1]



class Concat_1(Concat_4):
    """As opset 4, with axis 1 when the attribute is absent (opsets 1-3)."""

    since, until = 1, 4
    axis = 1

    @classmethod
    def check_types(cls, op):   # shape inference may leave opset-1 outputs untyped
        return first_input_type_ok(op, ("float16", "float32", "float64"))
