"""MatMulInteger (opset 10): Y (int32) = (A - a_zero_point) @ (B - b_zero_point), numpy.matmul semantics (N-D
batches broadcast, 1-D operands promoted then squeezed); a_zero_point per tensor or per row of A, b_zero_point per
tensor or per column of B; int8 / uint8 operands. Exact: a float64 (or, when exact, float32) GEMM of the centred
operands, summed modulo 2**32 (see quant/_common.py)."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
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
        if Y.size and self._native(ctx, A, B, za, zb, Y):
            return
        if Y.size:
            Y[...] = c.int_matmul(*c.centred_pair(A, za, B, zb, A.shape[-1]))

    def _native(self, ctx, A, B, za, zb, Y):
        """The int8 GEMM (_k_qgemm.pxi) for a 2-D B and A of rank >= 2 with a per-tensor A zero point; B packed once
        while it is the same read-only (constant) array. False: the float path above."""
        if B.ndim != 2 or A.ndim < 2 or (za is not None and za.size != 1) or not hasattr(_kernels, "qgemm"):
            return False
        K, N = B.shape
        hit = self.__dict__.get("_qpack")
        if hit is not None and hit[0] is B:
            bp = hit[1]
        else:
            bp = np.empty(_kernels.qgemm_pack_b_size(K, N), np.uint8)
            _kernels.qgemm_pack_b(np.ascontiguousarray(B).view(np.uint8), B.dtype == np.int8, bp)
            if not B.flags.writeable:
                self._qpack = (B, bp)
        shift = 128 if B.dtype == np.uint8 else 0
        zbv = np.zeros(1, np.int32) - shift if zb is None else (np.asarray(zb, np.int32).reshape(-1) - shift)
        zav = np.zeros(1, np.int32) if za is None else np.asarray(za, np.int32).reshape(1)
        a2 = np.ascontiguousarray(A).reshape(-1, K).view(np.uint8)
        y2 = Y.reshape(-1, N)
        _kernels.qgemm(a2, A.dtype == np.int8, bp, K, N, np.ascontiguousarray(zav), np.ascontiguousarray(zbv), y2,
                       ctx.num_threads)
        return True
