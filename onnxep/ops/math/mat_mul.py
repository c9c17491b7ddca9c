"""MatMul (numpy.matmul semantics): N-D batched with broadcasting, 1-D operands promoted then squeezed.
float32: a constant 2-D B is pre-packed; A's leading dims then fold into M and the product is one GEMM. The other
dtypes: np.matmul (float16 through float32 -- BLAS, float32 accumulation -- rounded once; integers wrap around)."""
import math

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops._memo import ShapeMemo
from onnxep.errors import InvalidArgument
from onnxep.ops._packed import PackedWeightMixin, gemm_b_format, gemm_b_pack_spec
from onnxep.ops._gemv import gemv_nk_of, gemv_nk_weight, tiny_n
from onnxep.ops.math._numpy import NativeOrNumpy, broadcast_shape

F32 = np.float32


def matmul_shape(a_shape, b_shape):
    """np.matmul's output shape, else InvalidArgument."""
    if not a_shape or not b_shape:
        raise InvalidArgument(f"MatMul operands must have at least 1 dimension, got {a_shape} and {b_shape}")
    ae = (1,) + a_shape if len(a_shape) == 1 else a_shape
    be = b_shape + (1,) if len(b_shape) == 1 else b_shape
    if ae[-1] != be[-2]:
        raise InvalidArgument(f"MatMul: A {a_shape} and B {b_shape} have different inner dimensions")
    batch = broadcast_shape("MatMul", ae[:-2], be[:-2])
    return batch + ((ae[-2],) if len(a_shape) > 1 else ()) + ((be[-1],) if len(b_shape) > 1 else ())


def matmul_into(A, B, Y):
    """Y := A @ B in Y's dtype; float16 multiplied in float32."""
    if Y.size == 0:
        return
    if Y.dtype == np.float16:
        Y[...] = np.matmul(A.astype(F32), B.astype(F32))
    elif A.shape[-1] == 0:
        Y[...] = 0
    else:
        np.matmul(A, B, out=Y)


def _plain_f32(*arrays) -> bool:
    return all(a.__class__ is np.ndarray and a.dtype == F32 and a.flags.c_contiguous for a in arrays)


class MatMul_1(NativeOrNumpy, PackedWeightMixin, OpKernel):
    domain, op_type, since = "", "MatMul", 1
    type_constraints = {"T": ("float32", "float16", "float64", "bfloat16", "int32", "int64", "uint32", "uint64")}

    def compute_numpy(self, ctx):
        A, B = ctx.input(0), ctx.input(1)
        matmul_into(A, B, ctx.output(0, matmul_shape(A.shape, B.shape), A.dtype))

    @classmethod
    def supports(cls, op):
        return all(vt is None or vt.shape is None or len(vt.shape) >= 1 for vt in op.input_types[:2])

    def prepack_format(self, input_index):
        return gemm_b_format(self, False)

    def _pack_spec(self, tensor, input_index):
        if input_index != 1 or tensor.ndim != 2 or tensor.dtype != F32:
            return None
        return gemm_b_pack_spec(self, tensor, False)

    def compute(self, ctx):
        A = ctx.input(0)
        if A.ndim < 1:
            raise ValueError("MatMul operands must have at least 1 dimension")
        nt = ctx.num_threads
        bp = self.packed(1)
        B = None if bp is not None else ctx.input(1)
        if B is not None and B.ndim < 1:
            raise ValueError("MatMul operands must have at least 1 dimension")
        if bp is not None or B.ndim == 2:
            K, N = self._b_kn if bp is not None else B.shape
            if A.shape[-1] != K:
                raise ValueError(f"MatMul: A {A.shape} and B ({K}, {N}) have different inner dimensions")
            out_shape = A.shape[:-1] + (N,)
            Y = ctx.output(0, out_shape, F32)
            rows = math.prod(A.shape[:-1])      # (np.prod: 2.3 us a call)
            A2 = A.reshape(rows, K)
            Y2 = Y.reshape(rows, N)
            if bp is not None and self.__dict__.get("_nk"):     # tiny N (ops/_gemv.py)
                _kernels.gemv_rows_f32(A2, gemv_nk_weight(bp, K, N), None, Y2, False, nt)
            elif bp is None and tiny_n(N):                      # ... and its unpacked twin: the same bits
                _kernels.gemv_rows_f32(A2, gemv_nk_of(B, False), None, Y2, False, nt)
            elif bp is not None and self.__dict__.get("_bf16"):
                _kernels.bgemm_f32(A2, bp, N, Y2, None, None, 1.0, None, False, nt)
            elif bp is not None:
                _kernels.sgemm_packed_f32(False, 1.0, A2, bp, N, 0.0, Y2, None, None, False, nt)
            else:
                _kernels.sgemm_f32(False, False, 1.0, A2, B, 0.0, Y2, nt)
            return
        Ae = A[None, :] if A.ndim == 1 else A
        Be = B[:, None] if B.ndim == 1 else B
        M, K = Ae.shape[-2:]
        Kb, N = Be.shape[-2:]
        if K != Kb:
            raise ValueError(f"MatMul: A {A.shape} and B {B.shape} have different inner dimensions")
        batch, a_off, b_off, c_off = self._batch_offsets(Ae.shape, Be.shape)
        out_shape = batch + ((M,) if A.ndim > 1 else ()) + ((N,) if B.ndim > 1 else ())
        Y = ctx.output(0, out_shape, F32)
        _kernels.sgemm_batched_f32(np.ascontiguousarray(Ae).reshape(-1), np.ascontiguousarray(Be).reshape(-1),
                                   Y.reshape(-1), a_off, b_off, c_off, M, N, K, K, 1, N, 1, N, 1, 1.0, nt)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry for a packed B: sgemm_packed_ex as compute's packed path runs it (A's leading
        dims folded into M)."""
        bp = self.packed(1)
        if "compute" in self.__dict__ or type(self).compute is not MatMul_1.compute:
            return None
        if bp is None:
            return self._c_step_batched(ins[0], ins[1], outs[0])
        A, Y = ins[0], outs[0]
        K, N = self._b_kn
        if (not _plain_f32(A, Y) or A.ndim < 1 or A.shape[-1] != K or Y.shape != A.shape[:-1] + (N,) or K == 0
                or Y.size == 0):
            return None
        if self.__dict__.get("_nk"):        # tiny N: dot products against W (N, K) (ops/_gemv.py)
            return "gemv", [0, bp, None, ~0], [K, N, 1, 0, Y.size // N], []
        if self.__dict__.get("_bf16"):      # the bf16 GEMM (onnxep.compute_precision=bf16)
            return "bgemm", [0, bp, None, None, ~0], [Y.size // N, N, K, 0, 0], [1.0]
        return "gemm_packed", [0, bp, None, None, ~0], [Y.size // N, N, K, 0, 0], []

    def _c_step_batched(self, A, B, Y):
        """RL_GEMM_BATCHED for compute's batched path (A and B of rank >= 2, B not 2-D), the same offsets."""
        if not _plain_f32(A, B, Y) or A.ndim < 2 or B.ndim < 3:
            return None
        M, K = A.shape[-2:]
        Kb, N = B.shape[-2:]
        if K != Kb or 0 in (M, N, K):
            return None
        batch, a_off, b_off, c_off = self._batch_offsets(A.shape, B.shape)
        if Y.shape != batch + (M, N):
            return None
        return ("gemm_batched", [0, 1, ~0, a_off, b_off, c_off], [len(a_off), M, N, K, K, 1, N, 1, N, 1], [1.0])

    def _batch_offsets(self, a_shape, b_shape):
        """(batch shape, per-item element offsets of A, B and C) of a broadcast batched product, cached per shapes:
        a broadcast batch dim repeats the operand's offset."""
        cache = ShapeMemo.of(self, "_offsets")
        key = (a_shape, b_shape)
        hit = cache.get(key)
        if hit is None:
            batch = np.broadcast_shapes(a_shape[:-2], b_shape[:-2])
            M, K = a_shape[-2:]
            N = b_shape[-1]

            def offs(shape, size):
                idx = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape) * size
                return np.ascontiguousarray(np.broadcast_to(idx, batch).reshape(-1))

            hit = (batch, offs(a_shape[:-2], M * K), offs(b_shape[:-2], K * N), offs(batch, M * N))
            cache.keep(key, hit)
        return hit


class MatMul_9(MatMul_1):
    since = 9


class MatMul_13(MatMul_1):
    since = 13
