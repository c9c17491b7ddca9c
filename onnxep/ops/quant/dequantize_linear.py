"""DequantizeLinear (opsets 10, 13, 19, 21, 23, 24, 25, 28): y = (x - x_zero_point) * x_scale, per tensor, per axis
or blocked (block_size); x int8, uint8, int16, uint16, int32, int4, uint4, int2, uint2, float8 (e4m3fn, e4m3fnuz,
e5m2, e5m2fnuz) or float4e2m1; the output type is output_dtype (opset 23+) or the scale's (float32, float16,
bfloat16; float8e8m0 scales from opset 24). x - x_zero_point is exact in float32 for every type but int32 (there in
int64), the product is one float32 multiplication (float64 for int32 x) rounded once to the output type, as
onnxruntime computes it. float6 inputs (opset 28) are left to the reference backend."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.ops import _dtypes
from onnxep.ops._base import OpKernel
from onnxep.ops.quant import _common as c
from onnxep.ops.tensor._helpers import new_output

_Q10 = c.INT8S + ("int32",)
_Q21 = c.INT8S + c.INT16S + ("int32",) + c.F8_NAMES + c.INT4S


class DequantizeLinear_10(c.PreparedParams, OpKernel):
    domain, op_type, since = "", "DequantizeLinear", 10
    type_constraints = {"T": _Q10}
    axis, block_size, output_dtype = 1, 0, 0

    @classmethod
    def supports(cls, op):
        od = int(op.node.attrs.get("output_dtype") or 0)
        return not od or c.np_dtype(od) in (c.F32, np.dtype(np.float16), c.BF16)

    def _prepare(self, x, scale, zp):
        """(output dtype, scale as float32 and zero point as float32 -- int64 for int32 x -- broadcasting against x),
        checked."""
        if zp is not None and zp.dtype != x.dtype:
            raise c.bad(self, f"x_zero_point has type {zp.dtype}, expected x's type {x.dtype}")
        c.check_pair(self, scale, zp, "x")
        if self.since < 21 and scale.ndim > 1:
            raise c.bad(self, f"x_scale must be a scalar or 1-D, got shape {scale.shape}")
        out_dt = c.np_dtype(self.output_dtype) if self.output_dtype else scale.dtype
        if out_dt not in (c.F32, np.dtype(np.float16), c.BF16):
            raise c.bad(self, f"output type {out_dt} is not float32, float16 or bfloat16")
        bs = int(self.block_size or 0)
        s = c.expand_param(self, scale, x.shape, int(self.axis), bs, "x_scale").astype(c.F32)
        z = None if zp is None else c.expand_param(self, zp, x.shape, int(self.axis), bs, "x_zero_point")
        if z is not None:
            z = z.astype(np.int64) if x.dtype == np.int32 else _dtypes.to_float32(z)
        return out_dt, s, z

    def compute(self, ctx):
        x, scale, zp = ctx.input(0), ctx.input(1), ctx.input(2)
        key = self._key
        if key is not None and key[0] is scale and key[1] is zp and key[2] == x.shape:
            out_dt, s, z = self._prepared
        else:
            out_dt, s, z = self.prepare_and_keep(x, scale, zp)
        y = new_output(ctx, 0, x.shape, out_dt, f"DequantizeLinear node {self.name!r}")
        if not y.size:
            return
        p = self._native(x, scale, zp, y)
        if p is not None:         # per tensor, 8 bits -> float32: one pass (_k_qgemm.pxi)
            _kernels.dequantize_tensor_f32(x.reshape(-1).view(np.uint8), x.dtype == np.int8, p[0], p[1], y.reshape(-1))
            return
        if x.dtype == np.int32:
            d = x.astype(np.int64) if z is not None else x
            if z is not None:
                d -= z
        else:
            d = _dtypes.widen(x)    # float8 / float4 -> float32, int4 / int2 -> int8 / uint8: exactly
        with np.errstate(over="ignore", invalid="ignore"):     # an inf scale gives inf / NaN, as IEEE
            if out_dt == c.F32 and d.dtype != np.int64 and d.dtype != np.int32:
                if z is None:
                    np.multiply(d, s, out=y, dtype=c.F32)
                else:
                    np.subtract(d, z, out=y, dtype=c.F32)     # exact: |x - zero point| < 2**24
                    np.multiply(y, s, out=y)
                return
            t = d.astype(c.F32)
            if z is not None and d.dtype != np.int64:
                t -= z
            np.multiply(t, s, out=t)
            y[...] = t if out_dt == c.F32 else t.astype(out_dt)

    c_value_inputs = (1, 2)     # the C step bakes in the scale and zero point

    def _native(self, x, scale, zp, y):
        return c.native_8bit(self, y, x, scale, zp, "dequantize_tensor_f32")

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_DEQUANTIZE): the per-tensor 8-bit path of compute."""
        return c.c_step_8bit(self, DequantizeLinear_10, "dequantize", ins, outs, 0)


class DequantizeLinear_13(DequantizeLinear_10):
    since = 13


class DequantizeLinear_19(DequantizeLinear_10):
    since = 19
    type_constraints = {"T1": _Q10 + c.F8_NAMES, "T2": c.SCALE_FLOATS}


class DequantizeLinear_21(DequantizeLinear_10):
    since = 21
    type_constraints = {"T1": _Q21, "T2": c.SCALE_FLOATS}


class DequantizeLinear_23(DequantizeLinear_10):
    since = 23
    type_constraints = {"T1": _Q21 + ("float4e2m1",), "T2": c.SCALE_FLOATS, "T3": c.SCALE_FLOATS}


class DequantizeLinear_24(DequantizeLinear_10):
    since = 24
    type_constraints = {"T1": _Q21 + ("float4e2m1",), "T2": c.SCALE_FLOATS + ("float8e8m0",), "T3": c.SCALE_FLOATS}


class DequantizeLinear_25(DequantizeLinear_10):
    since = 25
    type_constraints = {"T1": _Q21 + ("float4e2m1",) + c.INT2S, "T2": c.SCALE_FLOATS + ("float8e8m0",),
                        "T3": c.SCALE_FLOATS}


class DequantizeLinear_28(DequantizeLinear_25):
    since = 28
