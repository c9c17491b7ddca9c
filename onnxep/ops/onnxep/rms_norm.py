"""RMSNormalization (domain com.onnxep): ONNX RMSNormalization-23 for models importing an older default-domain opset,
written by graph/passes/fuse_rms_norm.py (the decomposed RMSNorm / T5LayerNorm chains exporters write). The same
kernel as ops/nn/rms_normalization.py (float32 here: the pass fuses float32 chains only), except that the usual case
(contiguous X, a Scale of one value per normalized element) runs rl_rms_norm_rows (onnxep/_native/rl_ops.h: per row the sum
of squares, then x / sqrt(sum / C + epsilon) * scale), in compute and as the compiled run loop's RL_RMS_NORM step."""
import math

import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import f32_shape
from onnxep.ops.nn.rms_normalization import RMSNormalization_23

F32 = np.dtype(np.float32)


class RMSNormalizationInternal_1(RMSNormalization_23):
    domain, op_type, since = "com.onnxep", "RMSNormalization", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types

    @classmethod
    def supports(cls, op):
        n = op.node
        if len(n.inputs) != 2 or len(n.outputs) != 1 or int(n.attrs.get("stash_type", 1) or 1) != 1:
            return False
        return all(f32_shape(t) is not None for t in op.input_types[:2])

    def _rows(self, x, scale):
        """(R, C) when rl_rms_norm_rows computes this case (float32 C-contiguous X and Scale, Scale one value per
        element of the normalized dims: 1 on the dims before axis), else None."""
        if x.dtype != F32 or scale.dtype != F32 or not x.flags.c_contiguous or not scale.flags.c_contiguous:
            return None
        r = x.ndim
        axis = int(self.axis)
        if not -r <= axis < r or scale.ndim > r:
            return None
        axis %= r
        C = math.prod(x.shape[axis:])
        if scale.size != C or C == 0:
            return None
        k = r - scale.ndim
        if any(d != (1 if i + k < axis else x.shape[i + k]) for i, d in enumerate(scale.shape)):
            return None
        return x.size // C, C

    def compute(self, ctx):
        x, scale = ctx.input(0), ctx.input(1)
        rc = self._rows(x, scale)
        if rc is None:
            return super().compute(ctx)
        R, C = rc
        y = ctx.output(0, x.shape, F32)
        if y.flags.c_contiguous and _c_steps.apart(y, x, scale):
            _kernels.rms_norm_f32(x.reshape(R, C), scale.reshape(-1), y.reshape(R, C), float(self.epsilon),
                                  ctx.num_threads)
            return
        return super().compute(ctx)

    def c_step(self, ins, outs, nthreads):
        """RL_RMS_NORM: rl_rms_norm_rows, the case compute runs it for."""
        if type(self).compute is not RMSNormalizationInternal_1.compute or "compute" in self.__dict__:
            return None
        x, scale, y = ins[0], ins[1], outs[0]
        if not _c_steps.plain(x, scale, y) or y.shape != x.shape or y.dtype != F32 or not _c_steps.apart(y, x, scale):
            return None
        rc = self._rows(x, scale)
        if rc is None:
            return None
        return "rms_norm", [0, 1, ~0], list(rc), [float(self.epsilon)]
