"""StridedMatMul (domain com.onnxep): Y = Transpose(alpha * MatMul(Transpose(A, perm_a), Transpose(B, perm_b)),
perm_y) -- what graph/passes/fuse_matmul_transpose.py makes of the Transposes (and a scalar Mul / Div) around an
attention MatMul (the per-head split Transpose of Q, K, V and the merge Transpose of the context). No transpose is
copied: each operand is read in place through its permuted strides and the product written through Y's, by the
batched SGEMM (_kernels.sgemm_batched_f32: per-item offsets, arbitrary row / column strides). The transposed
operands have the same rank >= 2; their batch dims broadcast (numpy.matmul). Written by passes, never by users.
Attributes: perm_a, perm_b, perm_y (ints; absent: no transpose), alpha (float, default 1)."""
from typing import NamedTuple

import numpy as np

from onnxep import _kernels
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops._memo import ShapeMemo

DOMAIN = "com.onnxep"


def _c_strides(shape):
    """Element strides of a C-contiguous array of `shape`."""
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= max(int(d), 1)
    return tuple(reversed(out))


def _offsets(shape, strides, batch):
    """Element offsets of every batch item of an operand with these batch dims / strides, broadcast to `batch`
    (a dim of size 1 repeats: stride 0)."""
    nb = len(batch)
    off = np.zeros(batch, np.int64)
    for d in range(nb):
        if shape[d] != 1:
            dims = [1] * nb
            dims[d] = batch[d]
            off = off + (np.arange(batch[d], dtype=np.int64) * strides[d]).reshape(dims)
    return np.ascontiguousarray(off.reshape(-1))


class StridedPlan(NamedTuple):
    """sgemm_batched_f32's arguments for one product: Y's shape, M, N, K, the A / B / Y element offsets of every
    batch item, and A's, B's and the product's (in Y) row / column strides."""
    y_shape: tuple
    M: int
    N: int
    K: int
    a_off: np.ndarray
    b_off: np.ndarray
    c_off: np.ndarray
    rsa: int
    csa: int
    rsb: int
    csb: int
    rsc: int
    csc: int


def strided_plan(a_shape, b_shape, perm_a=None, perm_b=None, perm_y=None, op="StridedMatMul",
                 b_strides=None) -> StridedPlan:
    """How sgemm_batched_f32 computes Transpose(MatMul(Transpose(A, perm_a), Transpose(B, perm_b)), perm_y) for
    C-contiguous A, B and Y (or B read through its element strides `b_strides`). Absent perms: no transpose; `op`
    names the caller in errors."""
    r = len(a_shape)
    ident = tuple(range(r))
    pa, pb, py = (tuple(int(i) for i in p) if p is not None else ident for p in (perm_a, perm_b, perm_y))
    a_str, b_str = _c_strides(a_shape), b_strides or _c_strides(b_shape)
    at_shape, at_str = [a_shape[p] for p in pa], [a_str[p] for p in pa]      # the transposed operands
    bt_shape, bt_str = [b_shape[p] for p in pb], [b_str[p] for p in pb]
    M, K = at_shape[-2:]
    Kb, N = bt_shape[-2:]
    if K != Kb:
        raise ValueError(f"{op}: transposed A {tuple(at_shape)} and B {tuple(bt_shape)} have different inner "
                         f"dimensions")
    batch = tuple(np.broadcast_shapes(tuple(at_shape[:-2]), tuple(bt_shape[:-2])))
    z_shape = batch + (M, N)                                                  # the product, before perm_y
    y_shape = tuple(z_shape[i] for i in py)
    y_str = _c_strides(y_shape)
    z_str = [0] * r
    for j, i in enumerate(py):                                                # Z dim py[j] is Y dim j
        z_str[i] = y_str[j]
    return StridedPlan(y_shape, M, N, K, _offsets(at_shape, at_str, batch), _offsets(bt_shape, bt_str, batch),
                       _offsets(z_shape, z_str, batch), at_str[-2], at_str[-1], bt_str[-2], bt_str[-1], z_str[-2],
                       z_str[-1])


class StridedMatMul_1(OpKernel):
    domain, op_type, since = DOMAIN, "StridedMatMul", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    perm_a = None
    perm_b = None
    perm_y = None
    alpha = 1.0

    @classmethod
    def supports(cls, op):
        if len(op.node.inputs) != 2 or not all(op.node.inputs) or len(op.node.outputs) != 1:
            return False
        a, b = f32_shape(op.input_types[0]), f32_shape(op.input_types[1])
        if a is None or b is None or len(a) != len(b) or len(a) < 2:
            return False
        for name in ("perm_a", "perm_b", "perm_y"):
            p = op.node.attrs.get(name)
            if p is not None and sorted(int(i) for i in p) != list(range(len(a))):
                return False
        return True

    def _plan(self, a_shape, b_shape):
        """Per input shapes: strided_plan's result, cached."""
        cache = ShapeMemo.of(self, "_plans")
        plan = cache.get((a_shape, b_shape))
        if plan is None:
            plan = strided_plan(a_shape, b_shape, self.perm_a, self.perm_b, self.perm_y)
            cache.keep((a_shape, b_shape), plan)
        return plan

    def compute(self, ctx):
        A, B = ctx.input(0), ctx.input(1)
        if A.ndim != B.ndim or A.ndim < 2:
            raise ValueError(f"StridedMatMul: A {A.shape} and B {B.shape} must have the same rank >= 2")
        y_shape, M, N, K, a_off, b_off, c_off, rsa, csa, rsb, csb, rsc, csc = self._plan(A.shape, B.shape)
        Y = ctx.output(0, y_shape, F32)
        _kernels.sgemm_batched_f32(A.reshape(-1), B.reshape(-1), Y.reshape(-1), a_off, b_off, c_off, M, N, K,
                                   rsa, csa, rsb, csb, rsc, csc, float(self.alpha), ctx.num_threads)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry: RL_GEMM_BATCHED with the plan compute uses (offsets kept by the program)."""
        A, B, Y = ins[0], ins[1], outs[0]
        if type(self).compute is not StridedMatMul_1.compute or not all(
                v.__class__ is np.ndarray and v.dtype == F32 and v.flags.c_contiguous for v in (A, B, Y)):
            return None
        if A.ndim != B.ndim or A.ndim < 2 or np.may_share_memory(A, Y) or np.may_share_memory(B, Y):
            return None
        y_shape, M, N, K, a_off, b_off, c_off, rsa, csa, rsb, csb, rsc, csc = self._plan(A.shape, B.shape)
        if Y.shape != tuple(y_shape) or 0 in (M, N, K) or not all(
                o.dtype == np.int64 and o.flags.c_contiguous and len(o) == len(a_off) for o in (a_off, b_off, c_off)):
            return None
        return ("gemm_batched", [0, 1, ~0, a_off, b_off, c_off], [len(a_off), M, N, K, rsa, csa, rsb, csb, rsc, csc],
                [float(self.alpha)])

