import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops._data import norm_axes
from onnxep.ops.tensor._helpers import INDEX_TYPES, ALL_TYPES, ints, new_output


def slices(shape, starts, ends, axes, steps) -> tuple:
    """Python slices of each dim for ONNX Slice: negative starts/ends count from the end, then starts and ends are
    clamped to [0, dim] ([0, dim-1] and [-1, dim-1] for a negative step)."""
    r = len(shape)
    if axes is None:
        axes = list(range(len(starts)))
    if steps is None:
        steps = [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise InvalidArgument(f"Slice: starts {starts}, ends {ends}, axes {axes} and steps {steps} must have one "
                              f"length")
    try:
        axes = norm_axes(axes, r, "Slice")
    except ValueError as e:
        raise InvalidArgument(str(e)) from None
    out = [slice(None)] * r
    for a, s, e, st in zip(axes, starts, ends, steps):
        n = shape[a]
        if st == 0:
            raise InvalidArgument(f"Slice: step 0 on axis {a}")
        s = s + n if s < 0 else s
        e = e + n if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), n), min(max(e, 0), n)
        else:
            s, e = min(max(s, 0), n - 1), min(max(e, -1), n - 1)
        out[a] = slice(s, None if e < 0 else e, st)
    return tuple(out)


class Slice_1(OpKernel):
    """Y := X[starts:ends] on the axes attribute (opset 1: starts, ends, axes are attributes, step 1)."""

    domain, op_type, since = "", "Slice", 1
    type_constraints = {"T": ALL_TYPES}
    axes = None

    def compute(self, ctx):
        x = ctx.input(0)
        axes = None if self.axes is None else ints(self.axes, "Slice axes")
        view = x[slices(x.shape, ints(self.starts, "Slice starts"), ints(self.ends, "Slice ends"), axes, None)]
        y = new_output(ctx, 0, view.shape, x.dtype, f"Slice node {self.name!r}")
        np.copyto(y, view)


class Slice_10(OpKernel):
    """Y := X[starts:ends:steps] on axes, all inputs (opsets 10, 11 (negative axes), 13). Copied out of a view."""

    domain, op_type, since = "", "Slice", 10
    type_constraints = {"T": ALL_TYPES, "Tind": INDEX_TYPES}

    def compute(self, ctx):
        x = ctx.input(0)
        opt = [None if ctx.input(i) is None else ints(ctx.input(i), "Slice input") for i in (3, 4)]
        view = x[slices(x.shape, ints(ctx.input(1), "Slice starts"), ints(ctx.input(2), "Slice ends"), *opt)]
        y = new_output(ctx, 0, view.shape, x.dtype, f"Slice node {self.name!r}")
        np.copyto(y, view)

    #: inputs whose values (not only shapes) a C step bakes in: the run loop takes the step only when they are
    #: constants or values it checks per run
    c_value_inputs = (1, 2, 3, 4)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: a strided copy of the sliced view (starts .. steps as captured)."""
        x = ins[0]
        opt = [None if len(ins) <= i or ins[i] is None else ints(ins[i], "Slice input") for i in (3, 4)]
        view = x[slices(x.shape, ints(ins[1], "Slice starts"), ints(ins[2], "Slice ends"), *opt)]
        return _c_steps.strided(x, view, outs[0])
