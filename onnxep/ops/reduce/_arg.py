"""The shared kernel of ArgMax / ArgMin."""
from __future__ import annotations

import math

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel

#: dtype -> rl_arg_extreme's type code (RL_T_*)
_C_TYPES = {np.dtype(np.float32): 0, np.dtype(np.int64): 2, np.dtype(np.int32): 3}

#: dtypes of ArgMax / ArgMin (bfloat16 from opset 13 when ml_dtypes is there)
ARG_TYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
             "uint64")
try:
    import ml_dtypes  # noqa: F401
    ARG_TYPES += ("bfloat16",)
except ImportError:  # pragma: no cover
    pass


class ArgReduce(OpKernel):
    """Y := int64 index of the max (argfn np.argmax) or min (np.argmin) of X along axis; the first such index, or the
    last with select_last_index (opset 12+). Ties and NaN as numpy: the first NaN counts as the extreme."""

    type_constraints = {"T": ARG_TYPES}
    axis = 0
    keepdims = 1
    select_last_index = 0
    argfn = None

    def compute(self, ctx):
        x = ctx.input(0)
        rank = x.ndim
        if not -rank <= self.axis < rank:
            raise InvalidArgument(f"{self.op_type}: axis {self.axis} is out of range for input of rank {rank}")
        axis = self.axis % rank
        n = x.shape[axis]
        shape = x.shape[:axis] + ((1,) if self.keepdims else ()) + x.shape[axis + 1:]
        if n == 0 and math.prod(shape):
            raise InvalidArgument(f"{self.op_type}: no index of an extreme along axis {axis} of size 0 (input shape "
                                  f"{x.shape})")
        y = ctx.output(0, shape, np.int64)
        if y.size == 0:
            return
        if x.dtype.name == "bfloat16":
            x = x.astype(np.float32)      # exact, and numpy's arg loops then apply
        if self.select_last_index:
            self.argfn(np.flip(x, axis), axis=axis, keepdims=bool(self.keepdims), out=y)
            np.subtract(n - 1, y, out=y)
        else:
            self.argfn(x, axis=axis, keepdims=bool(self.keepdims), out=y)

    def c_step(self, ins, outs, nthreads):
        """RL_ARG (rl_arg_extreme, onnxep/_native/rl_ops.h): float32 / int64 / int32, the first extreme (NaN first, as numpy's
        argmax / argmin) or the last one for the integer types."""
        if type(self).compute is not ArgReduce.compute or "compute" in self.__dict__:
            return None
        x, y = ins[0], outs[0]
        t = _C_TYPES.get(x.dtype)
        if t is None or not _c_steps.plain(x, y) or y.dtype != np.int64 or x.ndim == 0 or not _c_steps.apart(y, x):
            return None
        if self.select_last_index and t == 0:
            return None
        if self.argfn is np.argmax:
            mx = 1
        elif self.argfn is np.argmin:
            mx = 0
        else:
            return None
        axis = self.axis % x.ndim
        n = x.shape[axis]
        outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis + 1:])
        if n == 0 or y.size != outer * inner or y.size == 0:
            return None
        return "arg", [0, ~0], [outer, n, inner, t, mx, int(bool(self.select_last_index))], []
