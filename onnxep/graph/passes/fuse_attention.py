"""Attention's per-head products and softmax (ORT_ENABLE_EXTENDED): once fuse_matmul_transpose and fuse_softmax_mask
have run, an exported attention block is

    StridedMatMul(q, k; perm_a=pq, perm_b=pk, alpha) -> MaskedSoftmax(., mask) | Softmax(axis -1) ->
        StridedMatMul(., v; perm_b=pv, perm_y=py)

and becomes one com.onnxep FusedAttention(q, k, v [, mask]; perm_q=pq, perm_k=pk, perm_v=pv, perm_y=py, alpha)
(ops/onnxep/fused_attention.py): per head, the scores and probabilities stay in a cache-sized workspace instead of being
written as two (batch, heads, seq, seq) tensors. Only when the first product has no output transpose, the second
none on its first operand, the scores and probabilities are read by the pattern only (not graph outputs), and q, k,
v (and the mask) are float32 values of known rank, the three of one rank."""
from __future__ import annotations

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, internal_op, is_f32, keeps_any, only_consumer
from onnxep.graph.passes.fuse_softmax_mask import _last_axis


def _identity(perm, rank) -> bool:
    return perm is None or [int(i) for i in perm] == list(range(rank))


def fuse_attention(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"MatMul", "Softmax", "Add", "Transpose", "Mul", "Div"}):
        return graph
    f = Fusion(graph)
    producer, cons, outputs, names = f.producer, f.cons, f.outputs, f.names
    for mm2 in graph.nodes:
        if not internal_op(mm2, "StridedMatMul") or len(mm2.inputs) != 2 or f.taken((mm2,)):
            continue
        probs, v = mm2.inputs
        sm = producer.get(probs)
        if sm is None or only_consumer(cons, outputs, probs) is not mm2 or probs == v:
            continue
        if internal_op(sm, "MaskedSoftmax") and len(sm.inputs) == 2:
            scores, mask = sm.inputs
        elif default_op(sm, "Softmax") and len(sm.inputs) == 1:
            scores, mask = sm.inputs[0], None
        else:
            continue
        mm1 = producer.get(scores)
        if not internal_op(mm1, "StridedMatMul") or len(mm1.inputs) != 2 or f.taken((mm1, sm)):
            continue
        if only_consumer(cons, outputs, scores) is not sm or mask == scores:
            continue
        q, k = mm1.inputs
        if not all(is_f32(graph, x) for x in (q, k, v, scores) + ((mask,) if mask else ())):
            continue
        rank = len(graph.value_types[q].shape)
        if rank < 2 or any(len(graph.value_types[x].shape) != rank for x in (k, v, scores)):
            continue
        if mask is not None and len(graph.value_types[mask].shape) > rank:
            continue
        if sm.domain == "" and not _last_axis(sm, rank):
            continue
        if not _identity(mm1.attrs.get("perm_y"), rank) or not _identity(mm2.attrs.get("perm_a"), rank):
            continue
        if mm2.attrs.get("alpha") is not None and float(mm2.attrs["alpha"]) != 1.0:
            continue
        attrs = {"perm_q": mm1.attrs.get("perm_a"), "perm_k": mm1.attrs.get("perm_b"),
                 "perm_v": mm2.attrs.get("perm_b"), "perm_y": mm2.attrs.get("perm_y"), "alpha": mm1.attrs.get("alpha")}
        attrs = {key: val for key, val in attrs.items() if val is not None}
        node = make_node(graph, names.new(f"{mm2.name or 'attention'}_fused"), "FusedAttention",
                         [q, k, v] + ([mask] if mask else []), [mm2.outputs[0]], attrs, INTERNAL_DOMAIN)
        f.fuse((mm1, sm, mm2), mm2, node)
    return f.apply()
