"""NhwcLRN (domain com.onnxep): LRN over channel-last activations, written by the layout pass when the input is
already channel-last. The ONNX LRN's attributes and formula; X and Y are (N, H, W, C), the window runs along the
last axis."""
import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import F32, OpKernel, f32_shape

DOMAIN = "com.onnxep"


class NhwcLRN_1(OpKernel):
    domain, op_type, since = DOMAIN, "NhwcLRN", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    alpha = 0.0001
    beta = 0.75
    bias = 1.0
    size = None

    @classmethod
    def supports(cls, op):
        size = op.node.attrs.get("size")
        return (size is not None and int(size) >= 1 and len(op.node.inputs) == 1 and len(op.node.outputs) == 1
                and f32_shape(op.input_types[0], 4) is not None)

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim != 4:
            raise ValueError(f"NhwcLRN: X must be 4-D (NHWC), got shape {x.shape}")
        c = x.shape[3]
        y = ctx.output(0, x.shape, np.float32)
        _kernels.lrn_nhwc_f32(x.reshape(-1, c), y.reshape(-1, c), int(self.size), float(self.alpha),
                              float(self.beta), float(self.bias), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_ROWS, kind 3): compute's lrn_nhwc_f32 rows, alpha / size rounded to
        float32 as that function rounds it."""
        if type(self).compute is not NhwcLRN_1.compute or "compute" in self.__dict__:
            return None
        x, y = ins[0], outs[0]
        size = int(self.size)
        if (not _c_steps.plain(x, y) or x.dtype != F32 or y.dtype != F32 or x.ndim != 4 or y.shape != x.shape
                or size < 1 or np.may_share_memory(x, y)):
            return None
        c = x.shape[3]
        lo = (size - 1) // 2
        alpha_n = float(np.float32(self.alpha) / np.float32(size))
        return ("rows", [0, None, None, ~0], [x.size // max(c, 1), c, 3, 0, lo, size - 1 - lo, size],
                [alpha_n, float(self.beta), float(self.bias)])
