"""QLinearConv (opset 10): y = saturate(round_half_even((Conv(x - x_zp, w - w_zp) + B) * x_scale * w_scale /
y_scale) + y_zp), 1-, 2- and 3-D, groups, strides, pads, auto_pad, dilations; int8 / uint8 x, w and y, int32 bias;
w_scale and w_zero_point per tensor or per output channel. The integer conv is exact (int32 accumulation, as
ConvInteger) and the requantization is MLAS's (see quant/_common.py).

2-D convs of group 1 or depthwise with float32 scales run the native channel-last int8 conv (onnxep/_native/qconv.h,
quant/_qconv.py; x transposed to NHWC and the result back), its weights prepared once while they are constants; the
rest the numpy path. com.onnxep QLinearConvNhwc (ops/onnxep/q_linear_conv_nhwc.py) is the same op on NHWC x and y,
what the layout pass makes of it."""
from __future__ import annotations

import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.quant import _common as c
from onnxep.ops.quant import _qconv
from onnxep.ops.tensor._helpers import new_output


class QLinearConv_10(c.ConvAttrs, OpKernel):
    domain, op_type, since = "", "QLinearConv", 10
    type_constraints = {"T1": c.INT8S, "T2": c.INT8S, "T3": c.INT8S, "T4": ("int32",)}
    _prep = None       # (the constant arrays it was made from, _qconv.Prepared)

    def _native_prep(self, x, xs, xz, w, ws, wz, ys, yz, bias, out_dt):
        """The native conv's Prepared for these parameters (made once while they are the same constants), or None
        when the native conv does not compute this case."""
        if x.ndim != 4 or not _qconv.applies(x.dtype, w, int(self.group)) or out_dt not in _qconv.RANGES \
                or any(v.dtype != c.F32 for v in (xs, ws, ys)) or (xz is not None and xz.dtype != x.dtype) \
                or (wz is not None and wz.dtype != w.dtype):
            return None
        key = (w, ws, wz, xs, ys, bias)
        p = self._prep
        if p is not None and all(a is b for a, b in zip(p[0], key)):
            return p[1]
        prep = _qconv.Prepared(w, wz, ws, xs, ys, bias, int(self.group))
        if all(v is None or not v.flags.writeable for v in key):
            self._prep = (key, prep)
        return prep

    def _inputs(self, ctx):
        x, xs, xz, w, ws, wz, ys, yz = (ctx.input(i) for i in range(8))
        bias = ctx.input(8)
        for what, v in (("x_scale", xs), ("x_zero_point", xz), ("y_scale", ys), ("y_zero_point", yz)):
            if v is not None and v.size != 1:
                raise c.bad(self, f"{what} must have one element, got shape {v.shape}")
        m = w.shape[0]
        if bias is not None and bias.shape != (m,):
            raise c.bad(self, f"B has shape {bias.shape}, expected ({m},)")
        c.channel_param(self, wz, m, w.ndim - 1, "w_zero_point")
        c.channel_param(self, ws, m, w.ndim - 2, "w_scale")
        return x, xs, xz, w, ws, wz, ys, yz, bias

    def _numpy(self, x, xs, xz, w, ws, wz, ys, yz, bias, pb, outs, y):
        m = w.shape[0]
        wz = c.channel_param(self, wz, m, w.ndim - 1, "w_zero_point")
        ws = c.channel_param(self, ws, m, w.ndim - 2, "w_scale")
        xc, wc = c.centred_pair(x, xz, w, wz, w[0].size, bias)
        acc = c.wrap_int32(self.int_conv(xc, wc, None if bias is None else bias.astype(xc.dtype), pb, outs))
        mult = np.asarray(xs.astype(c.F32).reshape(()) * ws.astype(c.F32) / ys.astype(c.F32).reshape(()), c.F32)
        y[...] = c.requantize(acc, mult, None if yz is None else yz.reshape(()), y.dtype)

    def _params(self, prep, x_dt, out_dt, xshape_nhwc, outs, pb, xz):
        nsp = 2
        return prep.params(x_dt, out_dt, xshape_nhwc, outs, tuple(self.strides or (1,) * nsp), pb,
                           tuple(self.dilations or (1,) * nsp), 0 if xz is None else int(xz.reshape(())))

    def compute(self, ctx):
        x, xs, xz, w, ws, wz, ys, yz, bias = self._inputs(ctx)
        pb, outs, shape = self.conv_shape(x.shape, w.shape)
        out_dt = yz.dtype if yz is not None else x.dtype
        y = new_output(ctx, 0, shape, out_dt, f"QLinearConv node {self.name!r}")
        if not y.size:
            return
        prep = self._native_prep(x, xs, xz, w, ws, wz, ys, yz, bias, out_dt)
        if prep is None:
            self._numpy(x, xs, xz, w, ws, wz, ys, yz, bias, pb, outs, y)
            return
        xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        yh = np.empty((shape[0],) + tuple(outs) + (shape[1],), out_dt)
        lo, hi = _qconv.RANGES[out_dt]
        _qconv.run(prep, xh, self._params(prep, x.dtype, out_dt, xh.shape, outs, pb, xz), yh,
                   0 if yz is None else int(yz.reshape(())), lo, hi, ctx.num_threads)
        y[...] = yh.transpose(0, 3, 1, 2)
