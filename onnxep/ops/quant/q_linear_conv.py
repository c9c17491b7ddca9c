"""QLinearConv (opset 10): y = saturate(round_half_even((Conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale /
y_scale) + y_zp), 1-, 2- and 3-D, groups, strides, pads, auto_pad, dilations; int8 / uint8 x, w and y, int32 bias;
w_scale and w_zero_point per tensor or per output channel. The integer conv is exact (int32 accumulation, as
ConvInteger) and the requantization is MLAS's (see quant/_common.py)."""
from __future__ import annotations

import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.quant import _common as c
from onnxep.ops.tensor._helpers import new_output


class QLinearConv_10(c.ConvAttrs, OpKernel):
    domain, op_type, since = "", "QLinearConv", 10
    type_constraints = {"T1": c.INT8S, "T2": c.INT8S, "T3": c.INT8S, "T4": ("int32",)}

    def compute(self, ctx):
        x, xs, xz, w, ws, wz, ys, yz = (ctx.input(i) for i in range(8))
        bias = ctx.input(8)
        pb, outs, shape = self.conv_shape(x.shape, w.shape)
        m = w.shape[0]
        for what, v in (("x_scale", xs), ("x_zero_point", xz), ("y_scale", ys), ("y_zero_point", yz)):
            if v is not None and v.size != 1:
                raise c.bad(self, f"{what} must have one element, got shape {v.shape}")
        if bias is not None and bias.shape != (m,):
            raise c.bad(self, f"B has shape {bias.shape}, expected ({m},)")
        out_dt = yz.dtype if yz is not None else x.dtype
        y = new_output(ctx, 0, shape, out_dt, f"QLinearConv node {self.name!r}")
        wz = c.channel_param(self, wz, m, w.ndim - 1, "w_zero_point")
        ws = c.channel_param(self, ws, m, w.ndim - 2, "w_scale")
        if not y.size:
            return
        xc, wc = c.centred_pair(x, xz, w, wz, w[0].size, bias)
        acc = c.wrap_int32(self.int_conv(xc, wc, None if bias is None else bias.astype(xc.dtype), pb, outs))
        mult = np.asarray(xs.astype(c.F32).reshape(()) * ws.astype(c.F32) / ys.astype(c.F32).reshape(()), c.F32)
        y[...] = c.requantize(acc, mult, None if yz is None else yz.reshape(()), out_dt)
