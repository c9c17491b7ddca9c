"""DynamicQuantizeMatMul (domain com.onnxep): onnxruntime's com.microsoft op of that name, as
graph/passes/fuse_dynamic_quantize_matmul.py writes it for quantize_dynamic's DynamicQuantizeLinear -> MatMulInteger
-> Cast -> Mul(scale_a * scale_b) [-> Add(bias)]. Inputs: A float32 (rank >= 1; leading dims fold into M), B a
constant 2-D (K, N) int8 / uint8 weight (packed once, _k_qgemm.pxi's layout), b_scale a constant float32 of 1 or N
values, b_zero_point (optional) a constant of B's type with 1 or N values, bias (optional) a constant float32 (N,).

Y = float((quantize(A) - za) @ (B - zb)) * (scale_a * b_scale) [+ bias], A quantized as DynamicQuantizeLinear does
(scale_a, za over the whole of A). The epilogue rounds as the unfused nodes do: the s32 sum to float32, one float32
product by the float32 scale_a * b_scale, then the bias added (no fused multiply-add): the result equals the unfused
graph's bit for bit. Written by passes, never by users."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops._packed import PackedWeightMixin
from onnxep.ops.quant import _common as c

DOMAIN = "com.onnxep"
INT8S = (np.dtype(np.int8), np.dtype(np.uint8))


def _per_col(v, n):
    return v is not None and v.ndim <= 1 and v.size in (1, n)


class DynamicQuantizeMatMul_1(PackedWeightMixin, OpKernel):
    domain, op_type, since = DOMAIN, "DynamicQuantizeMatMul", 1
    type_constraints = {}

    @classmethod
    def supports(cls, op):
        ins = op.node.inputs
        if len(ins) not in (3, 4, 5) or not ins[0] or not ins[1] or not ins[2] or len(op.node.outputs) != 1:
            return False
        a = f32_shape(op.input_types[0])
        b = op.constants.get(1)
        if a is None or len(a) < 1 or b is None or b.dtype not in INT8S or b.ndim != 2:
            return False
        n = b.shape[1]
        s = op.constants.get(2)
        if s is None or s.dtype != F32 or not _per_col(s, n):
            return False
        if len(ins) >= 4 and ins[3]:
            z = op.constants.get(3)
            if z is None or z.dtype != b.dtype or not _per_col(z, n):
                return False
        if len(ins) == 5 and ins[4]:
            bias = op.constants.get(4)
            if bias is None or bias.dtype != F32 or bias.shape != (n,):
                return False
        return True

    def prepack_format(self, input_index):
        return _kernels.QGEMM_FORMAT

    def _pack_spec(self, tensor, input_index):
        if input_index != 1 or not hasattr(_kernels, "qgemm"):
            return None
        return c.qgemm_pack_spec(self, tensor)

    def _params(self, ctx, N, b_dtype):
        """(zb int32 shifted for the packing, b_scale float32, bias or None, zb as given), made once (constants)."""
        p = self.__dict__.get("_p")
        if p is None:
            zb = ctx.input(3)
            shift = 128 if b_dtype == np.uint8 else 0
            zbv = (np.zeros(1, np.int32) if zb is None else np.asarray(zb, np.int32).reshape(-1)) - shift
            sc = np.ascontiguousarray(np.asarray(ctx.input(2), F32).reshape(-1))
            bias = ctx.input(4)
            if bias is not None:
                bias = np.ascontiguousarray(bias, F32).reshape(N)
            p = self._p = (np.ascontiguousarray(zbv, np.int32), sc, bias,
                           None if zb is None else np.asarray(zb).reshape(-1))
        return p

    def compute(self, ctx):
        A = ctx.input(0)
        bp = self.packed(1)
        if bp is not None:
            B = None
            (K, N), b_dtype = self._b_kn, self._b_dtype
        else:
            B = ctx.input(1)
            (K, N), b_dtype = B.shape, B.dtype
        if A.ndim < 1 or A.shape[-1] != K:
            raise ValueError(f"DynamicQuantizeMatMul: A {A.shape} and B ({K}, {N}) have different inner dimensions")
        zbv, sc, bias, zb = self._params(ctx, N, b_dtype)
        Y = ctx.output(0, A.shape[:-1] + (N,), F32)
        if Y.size == 0:
            return
        if bp is not None and K and not np.isnan(A).any():
            rows = Y.size // N
            _kernels.dq_matmul_f32(np.ascontiguousarray(A).reshape(rows, K), bp.view(np.uint8), K, N, zbv, sc, bias,
                                   Y.reshape(rows, N), ctx.num_threads)
            return
        self._reference(A, self._unpacked(bp, K, N, b_dtype) if B is None else B, zb, sc, bias, Y)

    @staticmethod
    def _unpacked(bp, K, N, b_dtype):
        """B (K, N) back from its packing (qgemm.h: 16-column panels of K4 groups of 4 bytes, B - 128 for a uint8
        B): the rare reference path (a NaN in A) without keeping a second copy of the weight."""
        k4, npan = (K + 3) // 4, (N + 15) // 16
        raw = bp.view(np.uint8)[:npan * k4 * 64].reshape(npan, k4, 16, 4)
        b = raw.transpose(1, 3, 0, 2).reshape(k4 * 4, npan * 16)[:K, :N]
        return (b ^ np.uint8(0x80)) if b_dtype == np.uint8 else b.view(np.int8)

    @staticmethod
    def _reference(A, B, zb, sc, bias, Y):
        """The unfused nodes in numpy: DynamicQuantizeLinear, MatMulInteger, Cast, Mul, Add."""
        hi, lo = F32(max(F32(0), A.max())), F32(min(F32(0), A.min()))
        sa = F32(1) if hi == lo else F32((hi - lo) / F32(255))
        za = np.rint(np.clip(F32(0) - lo / sa, F32(0), F32(255))).astype(np.uint8)
        q = np.empty(A.shape, np.uint8)
        c.quantize_into(q, np.divide(A, sa, dtype=F32), np.asarray(za, F32))
        acc = c.int_matmul(*c.centred_pair(q, np.asarray(za).reshape(()), B,
                                           None if zb is None else zb.reshape(-1), A.shape[-1]))
        np.multiply(acc.astype(F32), (sa * sc).astype(F32), out=Y)
        if bias is not None:
            np.add(Y, bias, out=Y)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_DQ_MATMUL, _k_runloop.pxi -> _qg_dq_matmul_raw): the packed path of
        compute; a NaN in A makes the step fall back to compute (the reference path)."""
        bp = self.packed(1)
        if bp is None or "_p" not in self.__dict__ or not hasattr(_kernels, "qgemm") \
                or type(self).compute is not DynamicQuantizeMatMul_1.compute:
            return None
        A, Y = ins[0], outs[0]
        K, N = self._b_kn
        if (A.__class__ is not np.ndarray or A.dtype != F32 or not A.flags.c_contiguous or A.ndim < 1
                or A.shape[-1] != K or Y.dtype != F32 or not Y.flags.c_contiguous or Y.shape != A.shape[:-1] + (N,)
                or K == 0 or Y.size == 0):
            return None
        zbv, sc, bias, _ = self._p
        args = [0, bp, zbv, sc, bias, ~0]
        return "dq_matmul", args, [Y.size // N, K, N, 1 if zbv.size == N and N > 1 else 0,
                                   1 if sc.size == N and N > 1 else 0], []
