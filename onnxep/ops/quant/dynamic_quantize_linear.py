"""DynamicQuantizeLinear (opset 11): float32 x -> (y uint8, y_scale, y_zero_point) with the range [min(0, min x),
max(0, max x)] mapped onto [0, 255]: y_scale = (max - min) / 255 (1 when max == min, as onnxruntime), y_zero_point =
round_half_even(clamp(-min / y_scale, 0, 255)), y = saturate(round_half_even(x / y_scale) + y_zero_point), all in
float32."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops.quant import _common as c
from onnxep.ops.tensor._helpers import new_output

F32 = np.float32


class DynamicQuantizeLinear_11(OpKernel):
    domain, op_type, since = "", "DynamicQuantizeLinear", 11
    type_constraints = {"T1": ("float32",), "T2": ("uint8",)}

    def compute(self, ctx):
        x = ctx.input(0)
        y = new_output(ctx, 0, x.shape, np.uint8, f"DynamicQuantizeLinear node {self.name!r}")
        if x.size and x.dtype == F32 and x.flags.c_contiguous and y.flags.c_contiguous \
                and hasattr(_kernels, "dynamic_quantize_linear_u8") and not np.isnan(x).any():
            s, z = _kernels.dynamic_quantize_linear_u8(x.reshape(-1), y.reshape(-1))   # native (_k_qgemm.pxi)
            ctx.output(1, (), F32)[...] = s
            ctx.output(2, (), np.uint8)[...] = z
            return
        if x.size:
            hi, lo = F32(max(F32(0), x.max())), F32(min(F32(0), x.min()))
        else:
            hi = lo = F32(0)
        scale = F32(1) if hi == lo else F32((hi - lo) / F32(255))
        zp = np.rint(np.clip(F32(0) - lo / scale, F32(0), F32(255))).astype(np.uint8)
        if x.size:
            c.quantize_into(y, np.divide(x, scale, dtype=F32), np.asarray(zp, F32))
        s_out = ctx.output(1, (), F32)
        s_out[...] = scale
        z_out = ctx.output(2, (), np.uint8)
        z_out[...] = zp
