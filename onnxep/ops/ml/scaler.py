import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import NUM4, output


class Scaler_1(OpKernel):
    """Y := (X - offset) * scale, float32; offset and scale have one value or one per feature (X's last axis).
    float64 X computes in float64 (onnxruntime's promotion) before the float32 output."""

    domain, op_type, since = "ai.onnx.ml", "Scaler", 1
    type_constraints = {"T": NUM4}
    offset = scale = None

    def __init__(self, info):
        super().__init__(info)
        self._off = np.asarray(self.offset if self.offset is not None else [0.0], np.float32)
        self._scl = np.asarray(self.scale if self.scale is not None else [1.0], np.float32)

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"Scaler node {self.name!r}"
        c = x.shape[-1] if x.ndim else 1
        for nm, v in (("offset", self._off), ("scale", self._scl)):
            if v.size not in (1, c):
                raise InvalidArgument(f"{what}: {nm} has {v.size} values; expected 1 or {c} (X's last dimension)")
        xf = x if x.dtype == np.float64 else x.astype(np.float32)
        off, scl = self._off.astype(xf.dtype), self._scl.astype(xf.dtype)
        y = output(ctx, 0, x.shape, np.float32, what)
        y[...] = (xf - off) * scl
