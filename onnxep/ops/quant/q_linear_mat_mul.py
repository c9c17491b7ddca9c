"""QLinearMatMul (opsets 10, 21): y = saturate(round_half_even((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale)
+ y_zp), numpy.matmul semantics; int8 / uint8 operands and output; scales and zero points per tensor, per row of a,
per column of b; float32 scales (float16 / bfloat16 too at opset 21, used as float32). The integer product is exact
(int32 accumulation) and the requantization is MLAS's (see quant/_common.py). float8 operands (opset 21) are left to
the reference backend."""
from __future__ import annotations

import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.math.mat_mul import matmul_shape
from onnxep.ops.quant import _common as c
from onnxep.ops.tensor._helpers import new_output


class QLinearMatMul_10(OpKernel):
    domain, op_type, since = "", "QLinearMatMul", 10
    type_constraints = {"T1": c.INT8S, "T2": c.INT8S, "T3": c.INT8S}

    def compute(self, ctx):
        a, a_s, a_z, b, b_s, b_z, y_s, y_z = (ctx.input(i) for i in range(8))
        for what, s, z in (("a", a_s, a_z), ("b", b_s, b_z), ("y", y_s, y_z)):
            c.check_pair(self, s, z, what)
        if y_s.size != 1:
            raise c.bad(self, f"y_scale must have one element, got shape {y_s.shape}")
        if y_z is not None and y_z.size != 1:
            raise c.bad(self, f"y_zero_point must have one element, got shape {y_z.shape}")
        shape = matmul_shape(a.shape, b.shape)
        out_dt = y_z.dtype if y_z is not None else a.dtype
        y = new_output(ctx, 0, shape, out_dt, f"QLinearMatMul node {self.name!r}")
        za = c.row_param(self, a_z, a, "a_zero_point")
        zb = c.col_param(self, b_z, b, "b_zero_point")
        sa = c.row_param(self, a_s, a, "a_scale").astype(c.F32)
        sb = c.col_param(self, b_s, b, "b_scale").astype(c.F32)
        if not y.size:
            return
        acc = c.int_matmul(*c.centred_pair(a, za, b, zb, a.shape[-1]))
        mult = sa * sb / y_s.astype(c.F32).reshape(())
        y[...] = c.requantize(acc, np.asarray(mult, c.F32), None if y_z is None else y_z.reshape(()), out_dt)


class QLinearMatMul_21(QLinearMatMul_10):
    since = 21
    type_constraints = {"TS": c.SCALE_FLOATS, "T1": c.INT8S, "T2": c.INT8S, "T3": c.INT8S}
