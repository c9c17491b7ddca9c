"""Silu (domain com.onnxep): Y = X * Sigmoid(alpha * X) [* Gate], what graph/passes/fuse_silu.py makes of SiLU /
Swish (x * Sigmoid(x), alpha 1) and QuickGelu (x * Sigmoid(1.702 x)), with the gating product of a gated MLP
(act(gate_proj) * up_proj) taken in when the pass finds it (optional input 1, of Y's shape). Written by passes,
never by users. float32: one native loop (_k_eltwise.pxi's silu / silu_gate: x / (1 + exp(-alpha x)) [* gate],
vectorised exp), a C step of the compiled run loop (RL_UNARY's UN_SILU, or RL_SILU_GATE)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel, f32_shape

DOMAIN = "com.onnxep"

#: _k_eltwise.pxi's UN_SILU
UN_SILU = 8


class Silu_1(OpKernel):
    domain, op_type, since = DOMAIN, "Silu", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    inplace = ((0, 0),)
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
        if gate is None:
            _kernels.silu_f32(x.reshape(-1), y.reshape(-1), float(self.alpha), ctx.num_threads)
        else:
            _kernels.silu_gate_f32(x.reshape(-1), np.ascontiguousarray(gate).reshape(-1), y.reshape(-1),
                                   float(self.alpha), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: the same loop, RL_UNARY (UN_SILU) or RL_SILU_GATE."""
        x, y = ins[0], outs[0]
        gate = ins[1] if len(ins) > 1 else None
        if not _c_steps.plain(x, y) or x.dtype != np.float32 or y.dtype != np.float32 or x.shape != y.shape:
            return None
        alpha = float(self.alpha)
        if gate is None:
            if not _c_steps.apart(y, x):
                return None
            return "unary", [0, ~0], [UN_SILU, y.size], [alpha, 0.0]
        if not _c_steps.plain(gate) or gate.dtype != np.float32 or gate.shape != y.shape or not _c_steps.apart(
                y, x, gate):
            return None
        return "silu_gate", [0, 1, ~0], [y.size], [alpha]
