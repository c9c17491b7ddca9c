"""Shared code of the ai.onnx.preview.training optimizers (Adagrad, Adam, Momentum): their inputs are R (the learning
rate, a scalar), T (the update count, an int64 scalar), then `per` groups of n tensors each (X1..Xn, G1..Gn, ...); their
outputs `outs` groups of n tensors (X_new1..n, then the updated states)."""
from __future__ import annotations

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel

DOMAIN = "ai.onnx.preview.training"
FLOATS = ("float32", "float64")


class Optimizer(OpKernel):
    """Base of the three optimizers: the input/output layout check and the per-tensor loop (one numpy expression
    per tensor, n is the number of optimized tensors, not of elements)."""

    domain, since = DOMAIN, 1
    type_constraints = {"T1": FLOATS, "T2": ("int64",), "T3": FLOATS}
    #: tensors per optimized tensor in the inputs (after R and T) and in the outputs
    per_input = 3
    per_output = 2
    required = ()

    @classmethod
    def supports(cls, op):
        n_in, n_out = len(op.node.inputs) - 2, len(op.node.outputs)
        if n_in <= 0 or n_in % cls.per_input or n_out != n_in // cls.per_input * cls.per_output:
            return False
        if any(not name for name in op.node.inputs) or any(op.node.attrs.get(a) is None for a in cls.required):
            return False
        return True

    def groups(self, ctx):
        """(r as a float, t as an int, [the per_input tensors of each optimized tensor]), checked."""
        what = f"{self.op_type} node {self.name!r}"
        r, t = ctx.input(0), ctx.input(1)
        if r.size != 1 or t.size != 1:
            raise InvalidArgument(f"{what}: R and T must be scalars, got shapes {r.shape} and {t.shape}")
        n = (ctx.input_count - 2) // self.per_input
        ins = [ctx.input(2 + i) for i in range(n * self.per_input)]
        out = []
        for i in range(n):
            g = ins[i::n]
            if any(a.shape != g[0].shape or a.dtype != g[0].dtype for a in g):
                raise InvalidArgument(f"{what}: the tensors of optimized input {i} must share shape and type, got "
                                      f"{[(str(a.dtype), a.shape) for a in g]}")
            out.append(g)
        return float(r.reshape(())), int(t.reshape(())), out

    @staticmethod
    def publish(ctx, i, n, results):
        """Publish the per_output results (fresh arrays) of optimized tensor i (of n) as outputs i, n + i, 2n + i..."""
        for k, v in enumerate(results):
            ctx.set_output(k * n + i, v)
