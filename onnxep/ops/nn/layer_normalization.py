"""LayerNormalization (opset 17, float32 native, float16 / float64 through numpy; stash_type 1): normalize over the
dims from `axis` on, then scale and shift.

Spec: "Mean = ReduceMean<axes=normalized_axes>(X) ... Var = ReduceMean(D*D) ... InvStdDev = Reciprocal(Sqrt(Var +
epsilon)) ... Y = Normalized * Scale + B", "the shape of Mean and InvStdDev is [d[0], ..., d[axis-1], 1, ..., 1]",
and "tensors Scale and B should be unidirectional broadcastable to tensor X". Scale / B that vary only over the
normalized dims (the case of every exported model) are applied inside the native row loop; ones that also vary over
the leading dims are applied afterwards with numpy broadcasting."""
import math

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops._memo import ShapeMemo
from onnxep.ops.nn import _numpy_paths
from onnxep.ops.nn._numpy_paths import NumpyPath


def _row_operand(v, x_shape, axis):
    """v broadcast over the normalized dims as a flat (C,) array, or None when v also varies over dims < axis."""
    r = len(x_shape)
    shape = (1,) * (r - v.ndim) + tuple(v.shape)
    if any(d != 1 for d in shape[:axis]):
        return None
    return np.ascontiguousarray(np.broadcast_to(v.reshape(shape[axis:]), x_shape[axis:]), F32).reshape(-1)


class LayerNormalization_17(NumpyPath, OpKernel):
    domain, op_type, since = "", "LayerNormalization", 17
    type_constraints = {"T": ("float32", "float16", "float64"), "U": ("float32",)}
    axis = -1
    epsilon = 1e-5
    stash_type = 1

    def _compute_numpy(self, ctx):
        x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
        r = x.ndim
        axis = int(self.axis)
        if not -r <= axis < r:
            raise ValueError(f"LayerNormalization: axis {axis} out of range for X of rank {r}")
        axis %= r
        for name, v in (("Scale", scale), ("B", bias)):
            if v is not None and (v.ndim > r or np.broadcast_shapes(v.shape, x.shape) != x.shape):
                raise ValueError(f"LayerNormalization: {name} of shape {v.shape} does not broadcast to X {x.shape}")
        stat = x.shape[:axis] + (1,) * (r - axis)
        y = ctx.output(0, x.shape, x.dtype)
        mean = ctx.output(1, stat, F32) if ctx.has_output(1) else None
        inv = ctx.output(2, stat, F32) if ctx.has_output(2) else None
        _numpy_paths.layer_norm(x, scale, bias, axis, float(self.epsilon), y, mean, inv)

    @classmethod
    def supports(cls, op):
        stash = op.node.attrs.get("stash_type")
        if stash is not None and int(stash) != 1:   # 1: float32 statistics, the only kind computed here
            return False
        shape = op.input_types[0].shape if op.input_types[0] is not None else None
        if shape is None:
            return True
        r = len(shape)
        return r >= 1 and -r <= int(op.node.attrs.get("axis", -1)) < r

    def _plan(self, x_shape, scale, bias):
        """(R, C, stats shape, scale row, bias row, general) for these inputs. Cached per X shape when Scale and B
        are constant inputs of the node (the usual case; a graph input could change between runs): after the GEMMs
        have streamed their weights through the caches, even this much Python costs ~100 us per node, cold. Scale
        and B that span the normalized dims only (every exported model's) make rows that depend on those dims
        alone: an X of a new length takes them from a memo of their own (keyed by rank and normalized dims)."""
        const = {1, 2} <= set(self.info.constants) or (1 in self.info.constants and bias is None)
        cache = ShapeMemo.of(self, "_plans")
        if const:
            hit = cache.get(x_shape)
            if hit is not None:
                return hit
        r = len(x_shape)
        axis = int(self.axis)
        if not -r <= axis < r:
            raise ValueError(f"LayerNormalization: axis {axis} out of range for X of rank {r}")
        axis %= r
        tail = x_shape[axis:]
        spans_tail = const and scale.ndim <= r - axis and (bias is None or bias.ndim <= r - axis)
        rows_key = (r, tail) if spans_tail else None
        rows = None if rows_key is None else ShapeMemo.of(self, "_rows").get(rows_key)
        if rows is None:
            for name, v in (("Scale", scale), ("B", bias)):
                if v is not None and np.broadcast_shapes(v.shape, x_shape) != x_shape:
                    raise ValueError(f"LayerNormalization: {name} of shape {v.shape} does not broadcast to X "
                                     f"{x_shape}")
            s_row = _row_operand(scale, x_shape, axis)
            b_row = _row_operand(bias, x_shape, axis) if bias is not None else None
            general = s_row is None or (bias is not None and b_row is None)
            rows = (math.prod(tail), None if general else s_row, None if general else b_row, general)
            if rows_key is not None:
                ShapeMemo.of(self, "_rows").keep(rows_key, rows)
        C, s_row, b_row, general = rows
        plan = (math.prod(x_shape[:axis]), C, x_shape[:axis] + (1,) * (r - axis), s_row, b_row, general)
        if const:
            cache.keep(x_shape, plan)
        return plan

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (backends/cpu/runloop.py): layernorm_f32's rows, for constant Scale / B
        that are rows (not the general case compute finishes with numpy)."""
        if "compute" in self.__dict__ or type(self).compute is not LayerNormalization_17.compute:
            return None
        if not ({1, 2} <= set(self.info.constants) or (1 in self.info.constants and (len(ins) < 3 or ins[2] is None))):
            return None
        x, y = ins[0], outs[0]
        scale, bias = ins[1], ins[2] if len(ins) > 2 else None
        if x.dtype != F32 or y.dtype != F32 or not x.flags.c_contiguous or x.shape != y.shape:
            return None
        R, C, stat_shape, s_row, b_row, general = self._plan(x.shape, scale, bias)
        if general or R == 0 or C == 0:
            return None
        for v in (s_row, b_row):
            if v is not None and (v.dtype != F32 or not v.flags.c_contiguous or v.size != C):
                return None
        stats = [~j if j < len(outs) and outs[j] is not None else None for j in (1, 2)]
        for j in (1, 2):
            if j < len(outs) and outs[j] is not None and (outs[j].dtype != F32 or outs[j].size != R):
                return None
        return "layernorm", [0, s_row, b_row, ~0] + stats, [R, C], [float(self.epsilon)]

    def compute(self, ctx):
        x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
        R, C, stat_shape, s_row, b_row, general = self._plan(x.shape, scale, bias)
        y = ctx.output(0, x.shape, F32)
        mean = ctx.output(1, stat_shape, F32) if ctx.has_output(1) else None
        inv = ctx.output(2, stat_shape, F32) if ctx.has_output(2) else None
        _kernels.layernorm_f32(x.reshape(R, C), y.reshape(R, C), s_row, b_row, float(self.epsilon),
                               None if mean is None else mean.reshape(-1), None if inv is None else inv.reshape(-1),
                               ctx.num_threads)
        if general:   # Scale / B vary over the leading dims too
            np.multiply(y, scale, out=y)
            if bias is not None:
                np.add(y, bias, out=y)


class LayerNormalizationInternal_1(LayerNormalization_17):
    """com.onnxep LayerNormalization: the same op for models importing a default-domain opset below 17, written by
    graph/passes/fuse_layernorm.py (never by users). Attributes axis (default -1) and epsilon (default 1e-5)."""

    domain, op_type, since = "com.onnxep", "LayerNormalization", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types

    @classmethod
    def supports(cls, op):
        ins = op.node.inputs
        if len(ins) not in (2, 3) or not ins[0] or not ins[1] or f32_shape(op.input_types[0]) is None:
            return False
        if any(f32_shape(op.input_types[i]) is None for i in range(1, len(ins)) if ins[i]):
            return False
        return super().supports(op)
