"""FusedAttention (domain com.onnxep): Y = Transpose(Softmax(alpha * Transpose(Q, perm_q) @ Transpose(K, perm_k)
[+ Mask]) @ Transpose(V, perm_v), perm_y), the softmax along the last axis, Mask (optional) broadcast to the scores
-- what graph/passes/fuse_attention.py makes of StridedMatMul -> MaskedSoftmax | Softmax -> StridedMatMul, i.e. of an
exported attention block's per-head products once their transposes and scale are folded. One native call
(_kernels.attention_f32): per head (batch item of the products) and block of query rows, both products, the mask and
the softmax run back to back on a scores block in the thread's workspace; no scores or probabilities tensor is
written. The operands are read in place through their permuted strides, as StridedMatMul reads them. Written by
passes, never by users. Attributes: perm_q, perm_k, perm_v, perm_y (ints; absent: no transpose), alpha (float,
default 1). float32, same rank >= 2 for Q, K and V.

When the second product broadcasts batch dims the scores do not have (V with more heads than the scores), the
scores are materialized and the two products and the softmax run one after another (sgemm_batched_f32)."""
import numpy as np

from onnxep import _kernels
from onnxep.ops._base import F32, OpKernel, f32_shape
from onnxep.ops.onnxep.masked_softmax import mask_rows
from onnxep.ops.onnxep.strided_mat_mul import strided_plan

DOMAIN = "com.onnxep"


class FusedAttention_1(OpKernel):
    domain, op_type, since = DOMAIN, "FusedAttention", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the types
    perm_q = None
    perm_k = None
    perm_v = None
    perm_y = None
    alpha = 1.0

    @classmethod
    def supports(cls, op):
        ins = op.node.inputs
        if len(ins) not in (3, 4) or not all(ins[:3]) or len(op.node.outputs) != 1:
            return False
        shapes = [f32_shape(op.input_types[i]) for i in range(len(ins)) if ins[i]]
        if any(s is None for s in shapes) or len({len(s) for s in shapes[:3]}) != 1 or len(shapes[0]) < 2:
            return False
        if len(shapes) == 4 and len(shapes[3]) > len(shapes[0]):
            return False
        for name in ("perm_q", "perm_k", "perm_v", "perm_y"):
            p = op.node.attrs.get(name)
            if p is not None and sorted(int(i) for i in p) != list(range(len(shapes[0]))):
                return False
        return True

    def _plan(self, q_shape, k_shape, v_shape, m_shape):
        """Per input shapes: (fused, the first product's StridedPlan, the second's, mask rows), cached."""
        cache = self.__dict__.setdefault("_plans", {})
        key = (q_shape, k_shape, v_shape, m_shape)
        plan = cache.get(key)
        if plan is not None:
            return plan
        if not (len(q_shape) == len(k_shape) == len(v_shape) >= 2):
            raise ValueError(f"FusedAttention: Q {q_shape}, K {k_shape} and V {v_shape} must have the same rank >= 2")
        p1 = strided_plan(q_shape, k_shape, self.perm_q, self.perm_k, None, "FusedAttention")
        s_shape = p1.y_shape
        p2 = strided_plan(s_shape, v_shape, None, self.perm_v, self.perm_y, "FusedAttention")
        rows = None
        if m_shape is not None:
            rows = mask_rows(s_shape, m_shape)
            if rows is None:
                raise ValueError(f"FusedAttention: the mask of shape {m_shape} does not broadcast to the scores "
                                 f"{s_shape}")
        # fused: the second product's items are the scores' items, in the same order (scores contiguous)
        plan = (np.array_equal(p2.a_off, p1.c_off), p1, p2, rows)
        if len(cache) > 16:
            cache.clear()
        cache[key] = plan
        return plan

    def compute(self, ctx):
        q, k, v, mask = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
        fused, p1, p2, rows = self._plan(q.shape, k.shape, v.shape, None if mask is None else mask.shape)
        y = ctx.output(0, p2.y_shape, F32)
        if y.size == 0:
            return
        if p1.N == 0:    # no keys: the probabilities are empty, their product with V (0 x D) is zeros
            y.fill(0.0)
            return
        flat_mask = None if mask is None else mask.reshape(-1)
        m_off, m_cs = rows if rows is not None else (None, 0)
        nt = ctx.num_threads
        if fused:
            _kernels.attention_f32(q.reshape(-1), k.reshape(-1), v.reshape(-1), flat_mask, y.reshape(-1),
                                   p1.a_off, p1.b_off, p2.b_off, p2.c_off, m_off, m_cs, p1.M, p1.N, p1.K, p2.N,
                                   p1.rsa, p1.csa, p1.rsb, p1.csb, p2.rsb, p2.csb, p2.rsc, p2.csc,
                                   float(self.alpha), nt)
            return
        s = np.empty(p1.y_shape, F32)    # the unfused order: scores, softmax in place, then the second product
        _kernels.sgemm_batched_f32(q.reshape(-1), k.reshape(-1), s.reshape(-1), p1.a_off, p1.b_off, p1.c_off,
                                   p1.M, p1.N, p1.K, p1.rsa, p1.csa, p1.rsb, p1.csb, p1.rsc, p1.csc,
                                   float(self.alpha), nt)
        s2 = s.reshape(-1, p1.N)
        if mask is None:
            _kernels.softmax_lastaxis_f32(s2, s2, False, nt)
        else:
            _kernels.softmax_mask_lastaxis_f32(s2, s2, flat_mask, m_off, m_cs, False, nt)
        _kernels.sgemm_batched_f32(s.reshape(-1), v.reshape(-1), y.reshape(-1), p2.a_off, p2.b_off, p2.c_off,
                                   p2.M, p2.N, p2.K, p2.rsa, p2.csa, p2.rsb, p2.csb, p2.rsc, p2.csc, 1.0, nt)
