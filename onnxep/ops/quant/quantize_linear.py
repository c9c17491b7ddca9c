"""QuantizeLinear (opsets 10, 13, 19, 21, 23, 24, 25, 28): y = saturate(round_half_even(x / y_scale) + y_zero_point),
per tensor, per axis or blocked (block_size); output type from y_zero_point, else output_dtype, else uint8: int8,
uint8, int16, uint16, int4, uint4, int2, uint2 (saturated to the type's range), float8 (e4m3fn, e4m3fnuz, e5m2,
e5m2fnuz: cast to nearest even, `saturate` clamping to the largest finite value) and float4e2m1. From opset 23 the
division runs in the scale's type, or the `precision` attribute's, as the spec says (float8e8m0 scales, opset 24+,
divide in float32); before, the spec does not say and float16 / bfloat16 scales divide in float32 as onnxruntime does
(onnx.reference divides in float16 there).
float6 outputs (opset 28) are left to the reference backend."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel, static_dtype
from onnxep.ops.quant import _common as c
from onnxep.ops.tensor._helpers import new_output

_X = ("float32", "float16", "bfloat16", "int32")
_HALF = (np.dtype(np.float16), c.BF16)


class QuantizeLinear_10(c.PreparedParams, OpKernel):
    domain, op_type, since = "", "QuantizeLinear", 10
    type_constraints = {"T1": ("float32", "int32"), "T2": c.INT8S}
    axis, saturate, block_size, output_dtype, precision = 1, 1, 0, 0, 0

    def __init__(self, info):
        super().__init__(info)
        zdt = static_dtype(info, 2) if len(info.input_types) > 2 and info.input_types[2] is not None else None
        self.out_dtype = zdt if zdt is not None else (c.np_dtype(self.output_dtype) if self.output_dtype else
                                                      np.dtype(np.uint8))

    @classmethod
    def supports(cls, op):
        od = int(op.node.attrs.get("output_dtype") or 0)
        if od:
            dt = c.np_dtype(od)
            if dt is None or not (dt in c.INT_RANGES or dt in c.FLOAT8 or dt == c.FLOAT4):
                return False
        prec = int(op.node.attrs.get("precision") or 0)
        return not prec or c.np_dtype(prec) in (c.F32, c.F64, np.dtype(np.float16), c.BF16, np.dtype(np.int32))

    def _prepare(self, x, scale, zp):
        """(scale, zero point as arrays broadcasting against x, the division's dtype), checked."""
        dt = self.out_dtype
        if zp is not None and zp.dtype != dt:
            raise c.bad(self, f"y_zero_point has type {zp.dtype}, but the output type (output_dtype) is {dt}")
        c.check_pair(self, scale, zp, "y")
        if self.since < 21 and scale.ndim > 1:
            raise c.bad(self, f"y_scale must be a scalar or 1-D, got shape {scale.shape}")
        bs = int(self.block_size or 0)
        if self.since >= 23 or scale.dtype not in _HALF:
            div = c.compute_dtype(scale.dtype, int(self.precision or 0))
        else:   # before opset 23 the spec leaves the division's precision open: float32, as onnxruntime
            div = c.F32
        s = c.expand_param(self, scale, x.shape, int(self.axis), bs, "y_scale")
        s = s.astype(div if div != c.BF16 else c.F32)
        z = None if zp is None else c.expand_param(self, zp, x.shape, int(self.axis), bs, "y_zero_point")
        if z is not None and dt.kind in "iu":
            z = z.astype(c.F64 if div == c.F64 else c.F32)
        return s, z, div

    def compute(self, ctx):
        x, scale, zp = ctx.input(0), ctx.input(1), ctx.input(2)
        key = self._key
        if key is not None and key[0] is scale and key[1] is zp and key[2] == x.shape:
            s, z, div = self._prepared
        else:
            s, z, div = self.prepare_and_keep(x, scale, zp)
        y = new_output(ctx, 0, x.shape, self.out_dtype, f"QuantizeLinear node {self.name!r}")
        if y.size:
            p = self._native(x, scale, zp, y)
            if p is not None:     # per tensor, float32 -> 8 bits: one vector pass (_k_qgemm.pxi)
                _kernels.quantize_tensor_f32(x.reshape(-1), p[0], p[1], y.dtype == np.int8,
                                             y.reshape(-1).view(np.uint8))
                return
            c.quantize_into(y, c.divide(x, s, div), z, bool(self.saturate))

    c_value_inputs = (1, 2)     # the C step bakes in the scale and zero point

    def _native(self, x, scale, zp, y):
        return c.native_8bit(self, x, y, scale, zp, "quantize_tensor_f32")

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_QUANTIZE): the per-tensor 8-bit path of compute."""
        return c.c_step_8bit(self, QuantizeLinear_10, "quantize", ins, outs, 1)


class QuantizeLinear_13(QuantizeLinear_10):
    since = 13


class QuantizeLinear_19(QuantizeLinear_10):
    since = 19
    type_constraints = {"T1": _X, "T2": c.INT8S + c.F8_NAMES}


class QuantizeLinear_21(QuantizeLinear_10):
    since = 21
    type_constraints = {"T1": _X, "T2": c.INT8S + c.INT16S + c.F8_NAMES + c.INT4S}


class QuantizeLinear_23(QuantizeLinear_10):
    since = 23
    type_constraints = {"T1": _X, "T2": _X, "T3": c.INT8S + c.INT16S + c.F8_NAMES + c.INT4S + ("float4e2m1",)}


class QuantizeLinear_24(QuantizeLinear_10):
    since = 24
    type_constraints = {"T1": _X, "T2": _X + ("float8e8m0",),
                        "T3": c.INT8S + c.INT16S + c.F8_NAMES + c.INT4S + ("float4e2m1",)}


class QuantizeLinear_25(QuantizeLinear_10):
    since = 25
    type_constraints = {"T1": _X, "T2": _X + ("float8e8m0",),
                        "T3": c.INT8S + c.INT16S + c.F8_NAMES + c.INT4S + ("float4e2m1",) + c.INT2S}


class QuantizeLinear_28(QuantizeLinear_25):
    since = 28
