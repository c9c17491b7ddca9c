"""Softmax: opsets 1/11 coerce the input to 2-D at `axis` (default 1), opset 13 works along `axis` (default -1).
Numerically stable: the max is subtracted before exp. float32: along contiguous rows (the last axis, or the 2-D
coercion) the exp is vectorised (_kernels.softmax_lastaxis_f32); otherwise expf per element (softmax_f32).
float16 / float64: numpy on the (outer, k, inner) view. float16 Softmax runs in float16 steps (max, exp, sum,
divide), as onnx.reference, which computed onnx's conformance data (an attention case there fails its 1e-3 tolerance
when the probabilities are computed in float32 and rounded once, as onnxruntime does: they differ by an ulp);
float16 LogSoftmax runs in float32 and is rounded once (in float16 steps, log underflows to -inf)."""
import math

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops.math._numpy import FLOATS, NativeOrNumpy


class _Softmax(NativeOrNumpy, OpKernel):
    type_constraints = {"T": FLOATS}
    coerce_2d = True
    log = False

    @classmethod
    def supports(cls, op):
        shape = op.input_types[0].shape if op.input_types[0] is not None else None
        if shape is None or len(shape) == 0:
            return False
        r = len(shape)
        axis = op.node.attrs.get("axis")
        if axis is None:
            axis = cls.schema_defaults(op.node.opset).get("axis", 1 if cls.coerce_2d else -1)
        return -r <= int(axis) < r

    _plan = None     # (X shape, outer, k, inner): the last seen, checked

    def compute(self, ctx):
        x = ctx.values[ctx.ins[0]]
        plan = self._plan
        if plan is None or plan[0] != x.shape:
            plan = self._plan = (x.shape,) + self._geometry(x.shape)
        _, outer, k, inner = plan
        y = ctx.output(0, x.shape, np.float32)
        if inner == 1 and outer * k:   # contiguous rows: the vectorised-exp kernel
            _kernels.softmax_lastaxis_f32(x.reshape(outer, k), y.reshape(outer, k), self.log, ctx.num_threads)
            return
        _kernels.softmax_f32(x.reshape(-1), y.reshape(-1), outer, k, inner, self.log, ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: softmax_lastaxis_f32's rows when the axis is the last (inner == 1)."""
        if "compute" in self.__dict__ or type(self).compute is not _Softmax.compute:
            return None
        x, y = ins[0], outs[0]
        if x.dtype != np.float32 or y.dtype != np.float32 or not x.flags.c_contiguous or x.shape != y.shape:
            return None
        _, outer, k, inner = (x.shape,) + self._geometry(x.shape)
        if inner != 1 or not outer * k:
            return None
        return "softmax", [0, ~0], [outer, k, int(bool(self.log))], []

    def compute_numpy(self, ctx):
        x = ctx.input(0)
        outer, k, inner = self._geometry(x.shape)
        y = ctx.output(0, x.shape, x.dtype)
        if not y.size:
            return
        x3 = x.reshape(outer, k, inner)
        if x.dtype != np.float64 and self.log:
            x3 = x3.astype(np.float32)
        with np.errstate(all="ignore"):
            z = x3 - x3.max(axis=1, keepdims=True)
            if self.log:
                e = np.exp(z)
                z -= np.log(e.sum(axis=1, keepdims=True))
            else:
                np.exp(z, out=z)
                z /= z.sum(axis=1, keepdims=True)
        y.reshape(outer, k, inner)[...] = z

    def _geometry(self, shape):
        """(outer, k, inner) of X's shape: the rows softmax runs along, checked against axis."""
        r = len(shape)
        axis = int(self.axis)
        if not (-r <= axis < r) and not (r == 0 and axis in (0, -1)):
            raise ValueError(f"{self.op_type}: axis {axis} out of range for rank {r}")
        if axis < 0:
            axis += r
        if r == 0:
            return 1, 1, 1
        if self.coerce_2d:
            return math.prod(shape[:axis]), math.prod(shape[axis:]), 1
        return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


class Softmax_1(_Softmax):
    domain, op_type, since = "", "Softmax", 1


class Softmax_11(_Softmax):
    domain, op_type, since = "", "Softmax", 11


class Softmax_13(_Softmax):
    domain, op_type, since = "", "Softmax", 13
    coerce_2d = False
