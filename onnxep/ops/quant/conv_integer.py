"""ConvInteger (opset 10): Y (int32) = Conv(X - x_zero_point, W - w_zero_point), 1-, 2- and 3-D, groups, strides,
pads (the padding is x_zero_point, i.e. 0 after centring), auto_pad, dilations; x_zero_point per tensor,
w_zero_point per tensor or per output channel; int8 / uint8. Exact: im2col by taps plus one float64 (or, when exact,
float32) GEMM per group (nn/_numpy_paths.conv) on the centred operands, summed modulo 2**32 (see quant/_common.py)."""
from __future__ import annotations

from onnxep.ops._base import OpKernel
from onnxep.ops.quant import _common as c
from onnxep.ops.tensor._helpers import new_output


class ConvInteger_10(c.ConvAttrs, OpKernel):
    domain, op_type, since = "", "ConvInteger", 10
    type_constraints = {"T1": c.INT8S, "T2": c.INT8S, "T3": ("int32",)}

    def compute(self, ctx):
        x, w, xz, wz = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
        pb, outs, shape = self.conv_shape(x.shape, w.shape)
        y = new_output(ctx, 0, shape, "int32", f"ConvInteger node {self.name!r}")
        if xz is not None and xz.size != 1:
            raise c.bad(self, f"x_zero_point must have one element, got shape {xz.shape}")
        wz = c.channel_param(self, wz, w.shape[0], w.ndim - 1, "w_zero_point")
        if y.size:
            xc, wc = c.centred_pair(x, xz, w, wz, w[0].size)
            y[...] = c.wrap_int32(self.int_conv(xc, wc, None, pb, outs))
