"""MatMul (numpy.matmul semantics): N-D batched with broadcasting, 1-D operands promoted then squeezed.
A constant 2-D B is pre-packed; A's leading dims then fold into M and the product is one GEMM."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import OpKernel
from onnxep.ops._packed import PackedWeightMixin

F32 = np.float32


class MatMul_1(PackedWeightMixin, OpKernel):
    domain, op_type, since = "", "MatMul", 1
    type_constraints = {"T": ("float32",)}

    @classmethod
    def supports(cls, op):
        return all(vt is None or vt.shape is None or len(vt.shape) >= 1 for vt in op.input_types[:2])

    def prepack_format(self, input_index):
        return f"{_kernels.SGEMM_FORMAT}:trans_b=0"   # the same layout as Gemm with transB=0, so they can share

    def _pack_spec(self, tensor, input_index):
        if input_index != 1 or tensor.ndim != 2 or tensor.dtype != F32:
            return None
        self._b_kn = tuple(int(d) for d in tensor.shape)
        b = np.ascontiguousarray(tensor)
        return _kernels.sgemm_pack_b_size(*self._b_kn), lambda out: _kernels.sgemm_pack_b(b, False, out)

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
            rows = int(np.prod(A.shape[:-1], dtype=np.int64))
            A2 = A.reshape(rows, K)
            Y2 = Y.reshape(rows, N)
            if bp is not None:
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
        batch = np.broadcast_shapes(Ae.shape[:-2], Be.shape[:-2])
        out_shape = batch + ((M,) if A.ndim > 1 else ()) + ((N,) if B.ndim > 1 else ())
        Y = ctx.output(0, out_shape, F32)
        Yv = Y.reshape(batch + (M, N))
        Ab = np.broadcast_to(Ae, batch + (M, K))
        Bb = np.broadcast_to(Be, batch + (K, N))
        for idx in np.ndindex(*batch):
            _kernels.sgemm_f32(False, False, 1.0, np.ascontiguousarray(Ab[idx]), np.ascontiguousarray(Bb[idx]), 0.0,
                               Yv[idx], nt)


class MatMul_9(MatMul_1):
    since = 9


class MatMul_13(MatMul_1):
    since = 13
