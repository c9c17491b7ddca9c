"""Gelu (domain com.onnxep): Y = X * 0.5 * (1 + erf(X / sqrt(2))), what graph/passes/fuse_gelu.py makes of the Erf
form exporters write (Div, Erf, Add, Mul, Mul). Written by passes, never by users. float32."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel, f32_shape

DOMAIN = "com.onnxep"


class Gelu_1(OpKernel):
    domain, op_type, since = DOMAIN, "Gelu", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the type

    @classmethod
    def supports(cls, op):
        return (len(op.node.inputs) == 1 and len(op.node.outputs) == 1 and op.node.inputs[0]
                and f32_shape(op.input_types[0]) is not None)

    def compute(self, ctx):
        x = ctx.input(0)
        y = ctx.output(0, x.shape, np.float32)
        _kernels.gelu_f32(x.reshape(-1), y.reshape(-1), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: gelu_f32's loop (TF_UNARY_GELU = 1) over the flat tensor."""
        x, y = ins[0], outs[0]
        if x.dtype != np.float32 or y.dtype != np.float32 or not x.flags.c_contiguous or x.size != y.size:
            return None
        return "tf_unary", [0, ~0], [1, y.size], []
