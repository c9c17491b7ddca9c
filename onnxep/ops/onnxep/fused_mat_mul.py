"""FusedMatMul (domain com.onnxep): Y = act(A @ B + bias [+ R]) with B a constant 2-D (K, N) weight (pre-packed, the
layout MatMul and Gemm use), bias an optional constant (N,) vector and R an optional residual of Y's shape -- what
graph/passes/fuse_matmul_bias.py makes of MatMul -> Add(bias) [-> Add(R)] [-> Relu | com.onnxep Gelu]. A's leading
dims fold into M, as MatMul's (numpy.matmul) do. The bias, R and the activation go into the GEMM's epilogue (Gelu over
each tile just stored, still in L1: _native/sgemm.h ONNXEP_ACT_GELU). Written by passes, never by users.
activation: "", "Relu" or "Gelu"; trans_b: 1 when B is stored (N, K) (a Gemm with transB=1).

A batch-1 fully connected layer with B stored (N, K) (A's static shape has one row, trans_b) keeps B as stored and
runs gemv_f32: it reads each weight once either way (kernel alone, 1 and 2 threads: 0.54-1.15x the packed path's time
on 4096 x 25088 ... 1000 x 544), and packing would hold the weight twice while the session is made (VGG-19's fc6:
411 MB more at the peak). B stored (K, N) stays packed: gemv_f32 reads it in strided row segments, 1.6-2.0x the packed
path's time on 4096 x 4096. A bf16 session (onnxep.compute_precision) packs that layer to bf16 all the same: the
packing reads half the bytes per run (AlexNet's fc6, 4096 x 9216, 2 threads: 3.05 ms in gemv_f32, 1.51 in bgemm)."""
import math

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops._memo import ShapeMemo
from onnxep.ops._packed import PackedWeightMixin, gemm_b_format, gemm_b_pack_spec
from onnxep.ops._bf16 import use_bf16
from onnxep.ops._gemv import gemv_nk_of, gemv_nk_weight, tiny_n

DOMAIN = "com.onnxep"
ACTIVATIONS = ("", "Relu", "Gelu")


class FusedMatMul_1(PackedWeightMixin, OpKernel):
    domain, op_type, since = DOMAIN, "FusedMatMul", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    activation = ""
    trans_b = 0

    @classmethod
    def supports(cls, op):
        ins = op.node.inputs
        if len(ins) not in (2, 3, 4) or not ins[0] or not ins[1] or len(op.node.outputs) != 1:
            return False
        if op.node.attrs.get("activation", "") not in ACTIVATIONS:
            return False
        a = f32_shape(op.input_types[0])
        b = op.constants.get(1)
        if a is None or len(a) < 1 or b is None or b.dtype != F32 or b.ndim != 2:
            return False
        n = b.shape[0] if int(op.node.attrs.get("trans_b") or 0) else b.shape[1]
        if len(ins) >= 3 and ins[2]:
            c = op.constants.get(2)
            if c is None or c.dtype != F32 or c.shape != (n,):
                return False
        if len(ins) == 4 and ins[3]:
            r = f32_shape(op.input_types[3])
            if r is None or len(r) != max(len(a), 1):
                return False
        return True

    def prepack_format(self, input_index):
        return gemm_b_format(self, self.trans_b)

    def _gemv(self):
        """Whether B stays unpacked: fp32, stored (N, K) and A has one row by its static shape (see the module
        docstring)."""
        a = f32_shape(self.info.input_types[0]) if self.info.input_types else None
        return not use_bf16(self) and bool(self.trans_b) and a is not None and len(a) >= 1 and all(isinstance(d, int) for d in a) \
            and math.prod(a[:-1]) == 1

    def _pack_spec(self, tensor, input_index):
        if input_index != 1 or tensor.ndim != 2 or tensor.dtype != F32 or self._gemv():
            return None
        return gemm_b_pack_spec(self, tensor, self.trans_b)

    def compute(self, ctx):
        A = ctx.input(0)
        bp = self.packed(1)
        if bp is None:   # pre-packing disabled: pack per call
            B = ctx.input(1)
            K, N = B.shape[::-1] if self.trans_b else B.shape
        else:
            K, N = self._b_kn
        shapes = ShapeMemo.of(self, "_shapes")      # A shape -> (rows, Y shape); numpy calls cost when cold
        hit = shapes.get(A.shape)
        if hit is None:
            if A.ndim < 1 or A.shape[-1] != K:
                raise ValueError(f"FusedMatMul: A {A.shape} and B ({K}, {N}) have different inner dimensions")
            hit = (int(np.prod(A.shape[:-1], dtype=np.int64)), A.shape[:-1] + (N,))
            shapes.keep(A.shape, hit)
        rows, y_shape = hit
        bias = ctx.input(2)
        if bias is not None and bias.shape != (N,):
            raise ValueError(f"FusedMatMul: bias has shape {bias.shape}, expected ({N},)")
        R = ctx.input(3)
        if R is not None and R.shape != y_shape:
            self._broadcast_residual(ctx, A, bp, K, N, rows, y_shape, bias, R)
            return
        Y = ctx.output(0, y_shape, F32)
        A2, Y2 = A.reshape(rows, K), Y.reshape(rows, N)
        act = self.activation or None       # the epilogue's activation (_kernels.ACTIVATIONS)
        nt = ctx.num_threads
        if bp is not None and self.__dict__.get("_bf16"):
            _kernels.bgemm_f32(A2, bp, N, Y2, bias, None if R is None else R.reshape(rows, N), 1.0, act, False, nt)
        elif bp is not None and R is not None and not self.__dict__.get("_nk"):
            _kernels.sgemm_packed_res_f32(A2, bp, N, Y2, bias, R.reshape(rows, N), False, nt, act)
        elif bp is not None and not self.__dict__.get("_nk"):
            _kernels.sgemm_packed_f32(False, 1.0, A2, bp, N, 0.0, Y2, bias, None, False, nt, act)
        else:
            ep = act if R is None else None     # with a residual, the activation runs after it is added
            if bp is not None or (tiny_n(N) and not self._gemv()):
                # tiny N: dot products against W (N, K) (ops/_gemv.py), packed or not: the same bits
                W = gemv_nk_weight(bp, K, N) if bp is not None else gemv_nk_of(B, self.trans_b)
                _kernels.gemv_rows_f32(A2, W, bias, Y2, False, nt, ep)
            elif rows == 1:   # one row against B as stored (see the module docstring)
                _kernels.gemv_f32(A2.reshape(-1), np.ascontiguousarray(B, F32), bool(self.trans_b), bias,
                                  Y2.reshape(-1), False, nt, ep)
            else:             # B packed per call
                _kernels.sgemm_f32(False, bool(self.trans_b), 1.0, A2, B, 0.0, Y2, nt, bias, None, False, ep)
            if R is not None:
                np.add(Y, R, out=Y)
                self._activation_after(Y, nt)

    def _activation_after(self, Y, nt):
        """Y := act(Y) in place, where the residual was added after the product (the epilogue's NaN rules)."""
        if self.activation == "Relu":
            np.copyto(Y, 0.0, where=~(Y > 0))   # NaN -> 0, as the epilogue's Relu
        elif self.activation == "Gelu":
            flat = Y.reshape(-1)
            _kernels.gelu_f32(flat, flat, nt)

    def _broadcast_residual(self, ctx, A, bp, K, N, rows, y_shape, bias, R):
        """A residual whose shape differs from the product's at run time (the pass matched symbolic dims): the product
        with its bias, then the residual added with numpy's broadcasting (the Add's result shape), then the
        activation -- what the unfused MatMul, Add, Add [, Relu | Gelu] compute."""
        try:
            shape = np.broadcast_shapes(y_shape, R.shape)
        except ValueError:
            raise ValueError(f"FusedMatMul: the residual has shape {R.shape}, the product {y_shape}") from None
        P = np.empty((rows, N), F32)
        nt = ctx.num_threads
        if bp is not None and self.__dict__.get("_nk"):
            _kernels.gemv_rows_f32(A.reshape(rows, K), gemv_nk_weight(bp, K, N), bias, P, False, nt)
        elif bp is not None and self.__dict__.get("_bf16"):
            _kernels.bgemm_f32(A.reshape(rows, K), bp, N, P, bias, None, 1.0, None, False, nt)
        elif bp is not None:
            _kernels.sgemm_packed_f32(False, 1.0, A.reshape(rows, K), bp, N, 0.0, P, bias, None, False, nt)
        elif tiny_n(N):     # unpacked, tiny N: the packed path's dot form
            _kernels.gemv_rows_f32(A.reshape(rows, K), gemv_nk_of(ctx.input(1), self.trans_b), bias, P, False, nt)
        else:
            B = ctx.input(1)
            _kernels.sgemm_f32(False, bool(self.trans_b), 1.0, A.reshape(rows, K), B, 0.0, P, nt, bias, None, False)
        Y = ctx.output(0, shape, F32)
        np.add(P.reshape(y_shape), R, out=Y)
        self._activation_after(Y, nt)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry (backends/cpu/runloop.py): the packed-B path of compute (sgemm_packed_ex
        with the bias / residual / activation epilogue), or its one-row path against B as stored (gemv_f32, no
        residual: RL_GEMV)."""
        bp = self.packed(1)
        if type(self).compute is not FusedMatMul_1.compute or "compute" in self.__dict__:
            return None
        A, Y = ins[0], outs[0]
        if bp is None:
            B = ins[1]
            if B.__class__ is not np.ndarray or B.dtype != F32 or B.ndim != 2 or not B.flags.c_contiguous:
                return None
            K, N = B.shape[::-1] if self.trans_b else B.shape
        else:
            K, N = self._b_kn
        bias = ins[2] if len(ins) > 2 else None
        R = ins[3] if len(ins) > 3 else None
        if (A.dtype != F32 or Y.dtype != F32 or not A.flags.c_contiguous or A.ndim < 1 or A.shape[-1] != K
                or Y.size != A.size // max(K, 1) * N or Y.shape != A.shape[:-1] + (N,)):
            return None
        if bias is not None and (bias.dtype != F32 or bias.shape != (N,) or not bias.flags.c_contiguous):
            return None
        if R is not None and (R.dtype != F32 or R.shape != Y.shape or not R.flags.c_contiguous):
            return None
        if K == 0 or Y.size == 0:
            return None
        rows = Y.size // N
        act = _kernels.ACTIVATIONS[self.activation][0]      # the epilogue's kind (ACT_*)
        bias_arg = 2 if bias is not None else None
        if bp is None:      # compute's unpacked B: gemv_f32 for one row, else B packed per call (stays in Python)
            if rows != 1 or R is not None or (tiny_n(N) and not self._gemv()):
                return None
            return "gemv", [0, 1, bias_arg, ~0], [K, N, 1 if self.trans_b else 0, act, 1], []
        if self.__dict__.get("_nk"):        # tiny N: dot products against W (N, K) (ops/_gemv.py), no residual
            if R is not None:
                return None
            return "gemv", [0, bp, bias_arg, ~0], [K, N, 1, act, rows], []
        args = [0, bp, bias_arg, 3 if R is not None else None, ~0]
        ints = [rows, N, K, act]
        if self.__dict__.get("_bf16"):      # the bf16 GEMM (onnxep.compute_precision=bf16)
            return "bgemm", args, ints, [1.0]
        return "gemm_packed", args, ints, []
