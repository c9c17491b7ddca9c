"""Silu (domain com.onnxep): Y = X * Sigmoid(alpha * X) [* Gate], what graph/passes/fuse_silu.py makes of SiLU /
Swish (x * Sigmoid(x), alpha 1) and QuickGelu (x * Sigmoid(1.702 x)), with the gating product of a gated MLP
(act(gate_proj) * up_proj) taken in when the pass finds it (optional input 1, of Y's shape). Written by passes,
never by users. float32: the native sigmoid loop, then one or two numpy products in place."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel, f32_shape

DOMAIN = "com.onnxep"


class Silu_1(OpKernel):
    domain, op_type, since = DOMAIN, "Silu", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    alpha = 1.0

    @classmethod
    def supports(cls, op):
        n = op.node
        if len(n.outputs) != 1 or not 1 <= len(n.inputs) <= 2 or not all(n.inputs):
            return False
        return all(f32_shape(t) is not None for t in op.input_types[:len(n.inputs)])

    def compute(self, ctx):
        x = np.ascontiguousarray(ctx.input(0))
        gate = ctx.input(1) if ctx.has_input(1) else None
        if gate is not None and gate.shape != x.shape:
            from onnxep.errors import InvalidArgument
            raise InvalidArgument(f"Silu {self.name}: gate of shape {gate.shape} is not X's {x.shape}")
        y = ctx.output(0, x.shape, np.float32)
        if y.size == 0:
            return
        xf, yf = x.reshape(-1), y.reshape(-1)
        alpha = float(self.alpha)
        if alpha == 1.0:
            _kernels.sigmoid_f32(xf, yf, ctx.num_threads)
        else:
            np.multiply(xf, np.float32(alpha), out=yf)
            _kernels.sigmoid_f32(yf, yf, ctx.num_threads)
        np.multiply(y, x, out=y)
        if gate is not None:
            np.multiply(y, gate, out=y)
