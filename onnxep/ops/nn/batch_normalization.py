"""BatchNormalization in inference mode (float32 native; float16 / float64 / mixed types through numpy; any rank
>= 2: N, C, ...), and in training mode (opsets 14, 15, training_mode=1; numpy): Y normalized with the batch's own
mean and (biased) variance over every axis but C, and the optional outputs running_mean / running_var :=
input_mean / input_var * momentum + batch mean / variance * (1 - momentum).

The cpu backend owns this op below opset 14: onnx.reference computes those versions with the training formula, so
the reference backend refuses them and this kernel is the only path (DESIGN.md, "Correctness and fallback")."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops.nn import _numpy_paths
from onnxep.ops.nn._helpers import bad
from onnxep.ops.nn._numpy_paths import NumpyPath

_FLOATS = ("float32", "float16", "float64")    # float32 native; float16 / float64 (and mixed types) through numpy


class _BatchNormalization(NumpyPath, OpKernel):
    """Y := (X - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + B[c]"""

    type_constraints = {"T": _FLOATS}
    epsilon = 1e-5
    numpy_path_inputs = range(5)   # float16 / float64 (or mixed, opset 15): numpy

    def __init__(self, info):
        super().__init__(info)
        if self.since >= 14 and int(getattr(self, "training_mode", 0) or 0) == 1:
            self.compute = self._compute_training

    def _compute_training(self, ctx):
        """training_mode=1: the batch statistics, accumulated in float32 (float64 for float64 X)."""
        x = ctx.input(0)
        if x.ndim < 2:
            raise bad("BatchNormalization", f"input rank {x.ndim} < 2 (N, C, ...)")
        n, c = x.shape[:2]
        ins = [ctx.input(i) for i in range(1, 5)]
        for nm, v in zip(("scale", "B", "input_mean", "input_var"), ins):
            if v.shape != (c,):
                raise bad("BatchNormalization", f"{nm} has shape {v.shape}, expected ({c},)")
        scale, b, in_mean, in_var = ins
        acc = np.float64 if x.dtype == np.float64 else np.float32
        x3 = x.reshape(n, c, -1)
        y = ctx.output(0, x.shape, x.dtype)
        cnt = n * x3.shape[2]
        if cnt:
            mean = x3.mean(axis=(0, 2), dtype=acc)
            d = x3 - mean[:, None].astype(acc)
            var = np.einsum("ncs,ncs->c", d, d) / cnt
            a = scale.astype(acc) / np.sqrt(var + acc(self.epsilon))
            d *= a[:, None]
            d += b.astype(acc)[:, None]
            np.copyto(y.reshape(x3.shape), d, casting="unsafe")
        else:   # an empty batch: no statistics (nan, as numpy's mean of nothing), nothing to normalize
            mean = var = np.full(c, np.nan, acc)
        m = float(self.momentum)
        for i, (stat, run) in ((1, (mean, in_mean)), (2, (var, in_var))):
            if ctx.has_output(i):
                out = ctx.output(i, (c,), run.dtype)
                np.copyto(out, run.astype(acc) * acc(m) + stat * acc(1 - m), casting="unsafe")

    def _compute_numpy(self, ctx):
        x = ctx.input(0)
        if x.ndim < 2:
            raise ValueError(f"BatchNormalization: input rank {x.ndim} < 2")
        y = ctx.output(0, x.shape, x.dtype)
        _numpy_paths.batch_norm(x, *(ctx.input(i) for i in range(1, 5)), self.epsilon, y)

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        training = int(a.get("training_mode") or 0)
        if training and (cls.since < 14 or training != 1 or len(op.node.outputs) > 3):
            return False
        if not training and any(o for o in op.node.outputs[1:]):
            return False  # running/saved statistics are training outputs
        if cls.since < 7 and int(a.get("is_test") or 0) != 1:
            return False  # opset 6 defaults to training (is_test=0)
        if cls.since < 9 and int(a.get("spatial") if a.get("spatial") is not None else 1) != 1:
            return False
        if len(op.node.inputs) != 5 or not all(op.node.inputs):
            return False
        # Refuse only what is known to be wrong: below opset 14 no other backend takes this op, and compute checks
        # the actual shapes (clear error naming the input) when they were not known statically.
        shape = op.input_types[0].shape if op.input_types[0] is not None else None
        if shape is not None and len(shape) < 2:
            return False
        c = shape[1] if shape is not None else None
        for vt in op.input_types[1:]:
            if vt is None or vt.shape is None:
                continue
            if len(vt.shape) != 1:
                return False
            if isinstance(c, int) and isinstance(vt.shape[0], int) and vt.shape[0] != c:
                return False
        return True

    def compute(self, ctx):
        x = ctx.input(0)
        scale, b, mean, var = (ctx.input(i) for i in range(1, 5))
        if x.ndim < 2:
            raise ValueError(f"BatchNormalization: input rank {x.ndim} < 2")
        c = x.shape[1]
        for nm, v in (("scale", scale), ("B", b), ("input_mean", mean), ("input_var", var)):
            if v.shape != (c,):
                raise ValueError(f"BatchNormalization: {nm} has shape {v.shape}, expected ({c},)")
        # the per-channel factor in double, rounded once
        a = (scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + float(self.epsilon))).astype(np.float32)
        y = ctx.output(0, x.shape, np.float32)
        rows = x.shape[0] * c
        s = int(np.prod(x.shape[2:])) if x.ndim > 2 else 1
        _kernels.batchnorm_f32(x.reshape(rows, s), y.reshape(rows, s), np.ascontiguousarray(mean, np.float32), a,
                               np.ascontiguousarray(b, np.float32), ctx.num_threads)


class BatchNormalization_6(_BatchNormalization):
    domain, op_type, since = "", "BatchNormalization", 6


class BatchNormalization_7(_BatchNormalization):
    domain, op_type, since = "", "BatchNormalization", 7


class BatchNormalization_9(_BatchNormalization):
    domain, op_type, since = "", "BatchNormalization", 9


class BatchNormalization_14(_BatchNormalization):
    domain, op_type, since = "", "BatchNormalization", 14
    type_constraints = {"T": _FLOATS, "U": _FLOATS}


class BatchNormalization_15(_BatchNormalization):
    domain, op_type, since = "", "BatchNormalization", 15
    type_constraints = {"T": _FLOATS, "T1": _FLOATS, "T2": _FLOATS}
