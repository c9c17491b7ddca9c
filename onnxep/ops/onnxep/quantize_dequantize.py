"""QuantizeDequantize (domain com.onnxep): Y = (saturate(round_half_even(X / scale) + zero_point) - zero_point) *
scale, float32 -> float32, what graph/passes/fuse_qdq_pair.py makes of a per-tensor QuantizeLinear to int8 / uint8
(attribute signed) whose output only feeds DequantizeLinears with the same scale and zero point. The float32
operations of QuantizeLinear then DequantizeLinear in the same order, so bit-identical to the two nodes (a NaN gives
the type's minimum, as QuantizeLinear). Written by passes, never by users. One native pass (_k_qgemm.pxi's
qdq_tensor_f32, qgemm.h qg_qdq_tensor; chunked over the thread pool from two 16384-element chunks, as the
elementwise loops), a C step of the compiled run loop (RL_QDQ)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel, f32_shape

DOMAIN = "com.onnxep"


class QuantizeDequantize_1(OpKernel):
    domain, op_type, since = DOMAIN, "QuantizeDequantize", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    inplace = ((0, 0),)
    scale, zero_point, signed = 1.0, 0, 0

    @classmethod
    def supports(cls, op):
        n = op.node
        return len(n.outputs) == 1 and len(n.inputs) == 1 and bool(n.inputs[0]) \
            and f32_shape(op.input_types[0]) is not None

    def _params(self):
        return np.float32(self.scale), np.float32(self.zero_point), bool(self.signed)

    def compute(self, ctx):
        x = np.ascontiguousarray(ctx.input(0))
        y = ctx.output(0, x.shape, np.float32)
        if y.size == 0:
            return
        s, z, signed = self._params()
        if hasattr(_kernels, "qdq_tensor_f32"):
            _kernels.qdq_tensor_f32(x.reshape(-1), float(s), float(z), signed, y.reshape(-1), ctx.num_threads)
            return
        lo, hi = (-128, 127) if signed else (0, 255)      # the numpy path of QuantizeLinear / DequantizeLinear
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            r = np.rint(np.divide(x, s))
            r += z
            np.fmax(r, np.float32(lo), out=r)
            np.fmin(r, np.float32(hi), out=r)
            r -= z
            np.multiply(r, s, out=y)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: the same loop, RL_QDQ."""
        x, y = ins[0], outs[0]
        if not _c_steps.plain(x, y) or x.dtype != np.float32 or y.dtype != np.float32 or x.shape != y.shape \
                or y.size == 0 or not hasattr(_kernels, "qdq_tensor_f32") or not _c_steps.apart(y, x):
            return None
        s, z, signed = self._params()
        return "qdq", [0, ~0], [y.size, 1 if signed else 0], [float(s), float(z)]
