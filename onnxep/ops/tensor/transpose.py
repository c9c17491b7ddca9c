import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output

_NATIVE_ITEMSIZES = (1, 2, 4, 8)
_NATIVE_MAX_DIMS = 32   # transpose_copy's TR_MAX_DIMS
_RL_INTS = _kernels.RUNLOOP_LIMITS["ints"]


def transpose_step(x, y, shape, perm, nthreads):
    """The RL_TRANSPOSE run-loop step copying x, read as `shape`, permuted by `perm` into y (transpose_copy's plan and
    tiled kernels), or None where that plan does not apply: other element sizes, views, overlap, misalignment."""
    if (x.size and x.itemsize in _NATIVE_ITEMSIZES and len(shape) <= _NATIVE_MAX_DIMS and _c_steps.plain(x, y)
            and y.dtype == x.dtype and y.size == x.size and not np.may_share_memory(x, y)
            and x.ctypes.data % 4 == 0 and y.ctypes.data % 4 == 0):
        plan = _kernels.transpose_plan(tuple(shape), tuple(perm), x.itemsize, nthreads, _RL_INTS)
        if plan is not None:
            return "transpose", [0, ~0], plan, []
    return None


class Transpose_1(OpKernel):
    """Y := X with its dims permuted by perm (default: reversed) (opsets 1, 13, 21). Copied into a new tensor."""

    domain, op_type, since = "", "Transpose", 1
    type_constraints = {"T": ALL_TYPES}
    perm = None

    _last = None   # (input shape, perm, output shape) of the last input shape seen

    def compute(self, ctx):
        x = ctx.input(0)
        last = self._last
        if last is None or last[0] != x.shape:
            perm = list(range(x.ndim))[::-1] if self.perm is None else [int(p) for p in self.perm]
            if sorted(perm) != list(range(x.ndim)):
                raise ValueError(f"Transpose: perm {perm} is not a permutation of the {x.ndim} dims of input shape "
                                 f"{x.shape}")
            last = self._last = (x.shape, perm, tuple(x.shape[p] for p in perm))
        _, perm, yshape = last
        if x.dtype.hasobject:   # strings: object arrays live outside the arena
            np.copyto(new_output(ctx, 0, yshape, x.dtype, f"Transpose node {self.name!r}"), x.transpose(perm))
            return
        y = ctx.output(0, yshape, x.dtype)
        if (x.dtype.hasobject or x.itemsize not in _NATIVE_ITEMSIZES or x.ndim > _NATIVE_MAX_DIMS
                or not x.flags.c_contiguous or not y.flags.c_contiguous):
            np.copyto(y, x.transpose(perm))   # strings / objects, and strided views: numpy
            return
        _kernels.transpose_copy(x.reshape(-1).view(np.uint8), x.shape, perm, x.itemsize,
                                y.reshape(-1).view(np.uint8), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: transpose_copy's plan (RL_TRANSPOSE, its tiled kernels) for a 1, 2, 4 or
        8-byte dtype, else a strided copy of the permuted view (one thread)."""
        x, y = ins[0], outs[0]
        last = self._last
        if last is None or last[0] != x.shape:
            return None
        if y.shape == last[2]:
            step = transpose_step(x, y, x.shape, last[1], nthreads)
            if step is not None:
                return step
        return _c_steps.strided(x, x.transpose(last[1]), y)
