"""FastGelu (domain com.onnxep): Y = 0.5 X (1 + tanh(sqrt(2/pi) (X + 0.044715 X^3))), what
graph/passes/fuse_gelu_tanh.py makes of the tanh-approximation Gelu exporters write (gelu_new, gelu_pytorch_tanh:
Pow, Mul, Add, Mul, Tanh, Add, Mul, Mul), as onnxruntime's com.microsoft FastGelu. Written by passes, never by users.
float32: one native loop (_k_eltwise.pxi's gelu_tanh, X / (1 + exp(-2u)) with a vectorised exp), the compiled run
loop's RL_UNARY (UN_GELU_TANH)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel, f32_shape

DOMAIN = "com.onnxep"

#: _k_eltwise.pxi's UN_GELU_TANH
UN_GELU_TANH = 11


class FastGelu_1(OpKernel):
    domain, op_type, since = DOMAIN, "FastGelu", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the type
    inplace = ((0, 0),)

    @classmethod
    def supports(cls, op):
        return (len(op.node.inputs) == 1 and len(op.node.outputs) == 1 and op.node.inputs[0]
                and f32_shape(op.input_types[0]) is not None)

    def compute(self, ctx):
        x = np.ascontiguousarray(ctx.input(0))
        y = ctx.output(0, x.shape, np.float32)
        if y.size:
            _kernels.gelu_tanh_f32(x.reshape(-1), y.reshape(-1), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: gelu_tanh's loop (RL_UNARY, UN_GELU_TANH) over the flat tensor."""
        x, y = ins[0], outs[0]
        if (not _c_steps.plain(x, y) or x.dtype != np.float32 or y.dtype != np.float32 or x.shape != y.shape
                or not _c_steps.apart(y, x)):
            return None
        return "unary", [0, ~0], [UN_GELU_TANH, y.size], [0.0, 0.0]
