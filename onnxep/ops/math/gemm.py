"""Gemm: Y := alpha * op(A) @ op(B) + beta * C, C unidirectionally broadcast to (M, N). float32: constant B is
pre-packed, the native kernel. The other dtypes: numpy (float16 multiplied in float32; integers: alpha and beta
applied in float64 and truncated back, as onnx.reference)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.errors import InvalidArgument
from onnxep.ops._packed import PackedWeightMixin, gemm_b_format, gemm_b_pack_spec
from onnxep.ops._gemv import gemv_nk_of, gemv_nk_weight, tiny_n
from onnxep.ops.math._numpy import NativeOrNumpy
from onnxep.ops.math.mat_mul import matmul_into

F32 = np.float32


def _rank_ok(vt, ranks):
    return vt is None or vt.shape is None or len(vt.shape) in ranks


def _broadcasts_to(shape, target):
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def gemm_bias(C, M, N, beta):
    """Split beta*C (broadcast to (M, N)) into (bias_col, bias_row, full): the fused-epilogue forms of C."""
    C = np.asarray(C, dtype=F32)
    if np.broadcast_shapes(C.shape, (M, N)) != (M, N):
        raise ValueError(f"C of shape {C.shape} does not broadcast to ({M}, {N})")
    if C.size == 1 and M * N:
        return np.full(N, F32(beta) * C.reshape(-1)[0], F32), None, None
    if C.ndim <= 1 or C.shape[0] == 1:
        return np.ascontiguousarray(F32(beta) * C.reshape(-1), F32), None, None
    if C.shape[1] == 1:
        return None, np.ascontiguousarray(F32(beta) * C.reshape(-1), F32), None
    return None, None, C


class Gemm_7(NativeOrNumpy, PackedWeightMixin, OpKernel):
    domain, op_type, since = "", "Gemm", 7
    type_constraints = {"T": ("float32", "float16", "float64", "bfloat16", "int32", "int64", "uint32", "uint64")}
    alpha = 1.0
    beta = 1.0
    transA = 0
    transB = 0

    def compute_numpy(self, ctx):
        A, B, C = ctx.input(0), ctx.input(1), ctx.input(2)
        if A.ndim != 2 or B.ndim != 2:
            raise InvalidArgument(f"Gemm: A and B must be 2-D, got shapes {A.shape} and {B.shape}")
        A = A.T if self.transA else A
        B = B.T if self.transB else B
        if A.shape[1] != B.shape[0]:
            raise InvalidArgument(f"Gemm: op(A) is {A.shape[0]}x{A.shape[1]} but op(B) is {B.shape[0]}x{B.shape[1]}")
        M, N = A.shape[0], B.shape[1]
        if C is not None and not _broadcasts_to(C.shape, (M, N)):
            raise InvalidArgument(f"Gemm: C of shape {C.shape} does not broadcast to ({M}, {N})")
        Y = ctx.output(0, (M, N), A.dtype)
        if not Y.size:
            return
        matmul_into(A, B, Y)
        with np.errstate(all="ignore"):
            if self.alpha != 1.0:
                np.multiply(Y, self.alpha, out=Y, casting="unsafe")
            if C is not None and self.beta != 0.0:
                np.add(Y, C if self.beta == 1.0 else C * self.beta, out=Y, casting="unsafe")

    @classmethod
    def supports(cls, op):
        return (_rank_ok(op.input_types[0], (2,)) and _rank_ok(op.input_types[1], (2,))
                and (len(op.input_types) < 3 or not op.node.inputs[2] or _rank_ok(op.input_types[2], (0, 1, 2))))

    def prepack_format(self, input_index):
        return gemm_b_format(self, self.transB)

    def _pack_spec(self, tensor, input_index):
        if input_index != 1 or tensor.ndim != 2 or tensor.dtype != F32:
            return None
        return gemm_b_pack_spec(self, tensor, self.transB)

    def compute(self, ctx):
        A = ctx.input(0)
        if A.ndim != 2:
            raise ValueError(f"A must be 2-D, got shape {A.shape}")
        M, K = (A.shape[1], A.shape[0]) if self.transA else A.shape
        bp = self.packed(1)
        if bp is not None:
            Kb, N = self._b_kn
        else:
            B = ctx.input(1)
            if B.ndim != 2:
                raise ValueError(f"B must be 2-D, got shape {B.shape}")
            Kb, N = (B.shape[1], B.shape[0]) if self.transB else B.shape
        if K != Kb:
            raise ValueError(f"op(A) is {M}x{K} but op(B) is {Kb}x{N}")
        bias_col = bias_row = None
        beta = 0.0
        C = ctx.input(2)
        full = None
        if C is not None and self.beta != 0.0:
            bias_col, bias_row, full = self._bias_of(C, M, N)
        Y = ctx.output(0, (M, N), F32)
        if (self.__dict__.get("_nk") if bp is not None else tiny_n(N)):
            # tiny N (ops/_gemv.py): dot products against W (N, K), then alpha and beta*C where not the plain bias
            W = gemv_nk_weight(bp, K, N) if bp is not None else gemv_nk_of(B, self.transB)
            plain = self.alpha == 1.0 and full is None and bias_row is None
            _kernels.gemv_rows_f32(np.ascontiguousarray(A.T if self.transA else A), W,
                                   bias_col if plain else None, Y, False, ctx.num_threads)
            if not plain:
                if self.alpha != 1.0:
                    Y *= F32(self.alpha)
                if bias_col is not None:
                    Y += bias_col
                if bias_row is not None:
                    Y += bias_row[:, None]
                if full is not None:
                    Y += np.multiply(full, F32(self.beta), dtype=F32)
            return
        if bp is not None and self.__dict__.get("_bf16"):
            # bf16 GEMM: alpha on the product, beta*C as the column bias, a residual, or a row bias added after
            R = None if full is None else np.ascontiguousarray(np.multiply(full, F32(self.beta), dtype=F32))
            _kernels.bgemm_f32(np.ascontiguousarray(A.T) if self.transA else A, bp, N, Y, bias_col, R, self.alpha,
                               None, False, ctx.num_threads)
            if bias_row is not None:
                Y += bias_row[:, None]
            return
        if full is not None:
            Y[...] = full
            beta = self.beta
        if bp is not None:
            _kernels.sgemm_packed_f32(bool(self.transA), self.alpha, A, bp, N, beta, Y, bias_col, bias_row,
                                      False, ctx.num_threads)
        else:
            _kernels.sgemm_f32(bool(self.transA), bool(self.transB), self.alpha, A, B, beta, Y, ctx.num_threads,
                               bias_col, bias_row, False)


    def _bias_of(self, C, M, N):
        """gemm_bias(C, M, N, beta), kept for the node's constant C per (M, N): the split costs ~3 us of numpy per
        call (np.broadcast_shapes), which each Python-loop run (a profiled one, say) paid again."""
        const = self.info.constants.get(2) if getattr(self, "info", None) is not None else None
        if const is None or C is not const:
            return gemm_bias(C, M, N, self.beta)
        hit = self.__dict__.get("_c_split")
        if hit is None or hit[0] != (M, N):
            hit = self._c_split = ((M, N), gemm_bias(C, M, N, self.beta))
        return hit[1]

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry for a packed B, alpha 1, A not transposed and C absent or a row of N (beta 1):
        sgemm_packed_ex with C as the column bias, as compute's packed path runs it."""
        bp = self.packed(1)
        if (bp is None or "compute" in self.__dict__ or type(self).compute is not Gemm_7.compute or self.transA
                or self.alpha != 1.0):
            return None
        A, Y = ins[0], outs[0]
        K, N = self._b_kn
        C = ins[2] if len(ins) > 2 else None
        if (not all(v.__class__ is np.ndarray and v.dtype == F32 and v.flags.c_contiguous for v in (A, Y))
                or A.ndim != 2 or A.shape[1] != K or Y.shape != (A.shape[0], N) or K == 0 or Y.size == 0):
            return None
        if C is not None and self.beta != 0.0:
            if (self.beta != 1.0 or C.__class__ is not np.ndarray or C.dtype != F32 or not C.flags.c_contiguous
                    or C.shape not in ((N,), (1, N)) or (N == 1 and Y.shape[0] != 1)):
                return None
            bias = 2
        else:
            bias = None
        if self.__dict__.get("_nk"):        # tiny N: dot products against W (N, K) (ops/_gemv.py)
            return "gemv", [0, bp, bias, ~0], [K, N, 1, 0, A.shape[0]], []
        if self.__dict__.get("_bf16"):      # the bf16 GEMM (onnxep.compute_precision=bf16)
            return "bgemm", [0, bp, bias, None, ~0], [A.shape[0], N, K, 0, 0], [1.0]
        return "gemm_packed", [0, bp, bias, None, ~0], [A.shape[0], N, K, 0, 0], []


class Gemm_6(Gemm_7):
    """opset 6: C broadcasts only with broadcast=1 -- a case of opset 7's unidirectional broadcast"""

    since = 6


class Gemm_9(Gemm_7):
    since = 9


class Gemm_11(Gemm_7):
    since = 11


class Gemm_13(Gemm_7):
    since = 13
