"""MatMulInteger (opset 10): Y (int32) = (A - a_zero_point) @ (B - b_zero_point), numpy.matmul semantics (N-D
batches broadcast, 1-D operands promoted then squeezed); a_zero_point per tensor or per row of A, b_zero_point per
tensor or per column of B; int8 / uint8 operands. Exact: a float64 (or, when exact, float32) GEMM of the centred
operands, summed modulo 2**32 (see quant/_common.py)."""
from __future__ import annotations

from onnxep.ops._base import OpKernel
from onnxep.ops.math.mat_mul import matmul_shape
from onnxep.ops.quant import _common as c
from onnxep.ops.tensor._helpers import new_output


class MatMulInteger_10(OpKernel):
    domain, op_type, since = "", "MatMulInteger", 10
    type_constraints = {"T1": c.INT8S, "T2": c.INT8S, "T3": ("int32",)}

    def compute(self, ctx):
        A, B = ctx.input(0), ctx.input(1)
        shape = matmul_shape(A.shape, B.shape)
        Y = new_output(ctx, 0, shape, "int32", f"MatMulInteger node {self.name!r}")
        za = c.row_param(self, ctx.input(2), A, "a_zero_point")
        zb = c.col_param(self, ctx.input(3), B, "b_zero_point")
        if Y.size:
            Y[...] = c.int_matmul(*c.centred_pair(A, za, B, zb, A.shape[-1]))
