"""QLinearMatMul (opsets 10, 21): y = saturate(round_half_even((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale)
+ y_zp), numpy.matmul semantics; int8 / uint8 operands and output; scales and zero points per tensor, per row of a,
per column of b; float32 scales (float16 / bfloat16 too at opset 21, used as float32). The integer product is exact
(int32 accumulation) and the requantization is MLAS's (see quant/_common.py). float8 operands (opset 21) are left to
the reference backend.

A constant 2-D b (a model's weight, or the one graph/passes/fuse_qdq_ops.py folds a QDQ MatMul / Gemm into) runs the
native int8 GEMM (onnxep/_native/qgemm.h: VNNI / AVX2 / generic micro-kernels, b packed once through the shared
weight cache under _kernels.QGEMM_FORMAT, the requantization epilogue qg_requant_add) when a's scale and zero point
and y's are per tensor and all scales float32: a's leading dimensions fold into M. It is a C step of the compiled run
loop (RL_QLINEAR_MATMUL). The rest is the numpy path. Both compute the same integers: the exact int32 sum, float32(acc)
times the float32 multiplier a_scale * b_scale / y_scale (one per column), rounded half to even, plus y_zp,
saturated."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops._base import OpKernel
from onnxep.ops._packed import PackedWeightMixin
from onnxep.ops.math.mat_mul import matmul_shape
from onnxep.ops.quant import _common as c
from onnxep.ops.tensor._helpers import new_output

_BYTES = (np.dtype(np.int8), np.dtype(np.uint8))


class QLinearMatMul_10(PackedWeightMixin, OpKernel):
    domain, op_type, since = "", "QLinearMatMul", 10
    type_constraints = {"T1": c.INT8S, "T2": c.INT8S, "T3": c.INT8S}
    _nprep = None       # (the constant arrays it was made from, (zb shifted, mult, y zp, qlo, qhi, y dtype))
    c_value_inputs = (1, 2, 4, 5, 6, 7)    # the C step bakes in the scales and zero points

    def prepack_format(self, input_index):
        return _kernels.QGEMM_FORMAT

    def _pack_spec(self, tensor, input_index):
        if input_index != 3 or not hasattr(_kernels, "qlinear_matmul"):
            return None
        return c.qgemm_pack_spec(self, tensor)

    def _native_prep(self, a, a_s, a_z, b_s, b_z, y_s, y_z, N, b_dtype):
        """(zb int32 shifted for the packing, mult float32, y zero point, qlo, qhi, y dtype) of the native GEMM, made
        once while the parameters are the same constants; None when the native path does not compute this case."""
        key = (a_s, a_z, b_s, b_z, y_s, y_z)
        p = self._nprep
        if p is not None and all(u is v for u, v in zip(p[0], key)):
            return p[1]
        if a.dtype not in _BYTES or any(v.dtype != c.F32 for v in (a_s, b_s, y_s)) or a_s.size != 1 \
                or y_s.size != 1 or (a_z is not None and (a_z.size != 1 or a_z.dtype != a.dtype)) \
                or (y_z is not None and (y_z.size != 1 or y_z.dtype not in _BYTES)) \
                or b_s.size not in (1, N) or (b_s.size > 1 and b_s.ndim != 1) \
                or (b_z is not None and (b_z.dtype != b_dtype or b_z.size not in (1, N)
                                         or (b_z.size > 1 and b_z.ndim != 1))):
            return None
        shift = 128 if b_dtype == np.uint8 else 0
        zb = (np.zeros(1, np.int32) if b_z is None else np.asarray(b_z, np.int32).reshape(-1)) - shift
        if zb.size > 1 and np.all(zb == zb[0]):
            zb = zb[:1]
        mult = np.asarray(a_s.reshape(()) * b_s.reshape(-1) / y_s.reshape(()), c.F32).reshape(-1)
        out_dt = y_z.dtype if y_z is not None else a.dtype
        lo, hi = c.INT_RANGES[out_dt]
        prep = (np.ascontiguousarray(zb, np.int32), np.ascontiguousarray(mult),
                0 if y_z is None else int(y_z.reshape(())), lo, hi, out_dt)
        if all(v is None or not v.flags.writeable for v in key):
            self._nprep = (key, prep)
        return prep

    def compute(self, ctx):
        a, a_s, a_z, b_s, b_z, y_s, y_z = (ctx.input(i) for i in (0, 1, 2, 4, 5, 6, 7))
        bp = self.packed(3)
        if bp is not None and a.ndim >= 2:
            (K, N), b_dtype = self._b_kn, self._b_dtype
            prep = self._native_prep(a, a_s, a_z, b_s, b_z, y_s, y_z, N, b_dtype)
            if prep is not None and a.shape[-1] == K:
                zb, mult, yzp, lo, hi, out_dt = prep
                y = new_output(ctx, 0, a.shape[:-1] + (N,), out_dt, f"QLinearMatMul node {self.name!r}")
                if y.size:
                    rows = y.size // N
                    _kernels.qlinear_matmul(np.ascontiguousarray(a).reshape(rows, K).view(np.uint8),
                                            a.dtype == np.int8, bp.view(np.uint8), K, N,
                                            0 if a_z is None else int(a_z.reshape(())), zb, mult, None,
                                            y.reshape(rows, N).view(np.uint8), float(yzp), float(lo), float(hi),
                                            out_dt == np.int8, ctx.num_threads)
                return
        if bp is None:
            b = ctx.input(3)
        else:
            (K, N), b_dtype = self._b_kn, self._b_dtype
            b = self._unpacked(bp, K, N, b_dtype)
        self._numpy(ctx, a, a_s, a_z, b, b_s, b_z, y_s, y_z)

    @staticmethod
    def _unpacked(bp, K, N, b_dtype):
        """b (K, N) back from its packing (qgemm.h: 16-column panels of K4 groups of 4 bytes, b - 128 for a uint8 b):
        the numpy path of a packed b (per-row a parameters, a 1-D a) without keeping a second copy of the weight."""
        k4, npan = (K + 3) // 4, (N + 15) // 16
        raw = bp.view(np.uint8)[:npan * k4 * 64].reshape(npan, k4, 16, 4)
        b = raw.transpose(1, 3, 0, 2).reshape(k4 * 4, npan * 16)[:K, :N]
        return np.ascontiguousarray((b ^ np.uint8(0x80)) if b_dtype == np.uint8 else b.view(np.int8))

    def _numpy(self, ctx, a, a_s, a_z, b, b_s, b_z, y_s, y_z):
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

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (RL_QLINEAR_MATMUL -> _qg_qlinear_raw): the packed path of compute."""
        bp = self.packed(3)
        p = self._nprep
        if bp is None or p is None or type(self).compute is not QLinearMatMul_10.compute or len(outs) != 1:
            return None
        for i, v in zip((1, 2, 4, 5, 6, 7), p[0]):
            u = ins[i] if i < len(ins) else None
            if (u is None) != (v is None) or (u is not None and (u.dtype != v.dtype or not np.array_equal(u, v))):
                return None
        a, y = ins[0], outs[0]
        K, N = self._b_kn
        zb, mult, yzp, lo, hi, out_dt = p[1]
        if not _c_steps.plain(a, y) or a.ndim < 2 or a.shape[-1] != K or a.dtype not in _BYTES \
                or y.dtype != out_dt or y.shape != a.shape[:-1] + (N,) or y.size == 0 or np.may_share_memory(a, y):
            return None
        a_z = ins[2]
        return "qlinear_matmul", [0, bp, zb, mult, None, ~0], \
            [y.size // N, K, N, 1 if a.dtype == np.int8 else 0, 0 if a_z is None else int(a_z.reshape(())),
             1 if zb.size > 1 else 0, 1 if mult.size > 1 else 0, 1 if out_dt == np.int8 else 0], \
            [float(yzp), float(lo), float(hi)]


class QLinearMatMul_21(QLinearMatMul_10):
    since = 21
    type_constraints = {"TS": c.SCALE_FLOATS, "T1": c.INT8S, "T2": c.INT8S, "T3": c.INT8S}
