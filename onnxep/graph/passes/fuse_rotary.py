"""Rotary embedding, rotate_half form (ORT_ENABLE_EXTENDED, as onnxruntime's RotaryEmbedding fusion): what torch.onnx
writes for HF's apply_rotary_pos_emb,

    x1 = Slice(x, 0, A, axes=[-1])     x2 = Slice(x, B, big, axes=[-1])     (steps absent or 1)
    y  = Add(Mul(x, cos), Mul(Concat(Neg(x2), x1, axis=-1), sin))
      ->  com.onnxep RotaryHalf(x, cos, sin, A, B)          (ops/onnxep/rotary_half.py)

A and B are int64 one-element tensors, constants or values computed in the graph (the half of the head size, from
the shape): the kernel takes them as inputs and slices as Slice does, so nothing about them need be known here; `big`
a constant >= 2^31 - 1 (to the end). x, cos and sin float32 tensors of known rank; Add / Mul operand order free;
every intermediate read by the pattern only (x itself may have other readers)."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes.fold_shape_subgraphs import SHAPE_ARGS
from onnxep.graph.passes._pattern import Fusion, default_op, is_f32, keeps_any, only_consumer, other_input

BIG = 2 ** 31 - 1


def _const_ints(consts, name):
    v = consts.get(name)
    if v is None or v.dtype.kind not in "iu":
        return None
    return [int(a) for a in v.reshape(-1)]


def _is_int64_1(graph, consts, name) -> bool:
    if name in consts:
        v = consts[name]
        return v.dtype == np.int64 and v.size == 1
    vt = graph.value_types.get(name)
    return (vt is not None and vt.kind == "tensor" and vt.type_str == "tensor(int64)" and vt.shape is not None
            and len(vt.shape) <= 1 and all(d == 1 for d in vt.shape))


def _last_axis_slice(sl, consts, rank):
    """(starts, ends) names of an opset >= 10 Slice over the last axis only with step 1, else None."""
    if sl.opset < 10 or len(sl.inputs) < 4:
        return None
    axes = _const_ints(consts, sl.inputs[3])
    if axes is None or len(axes) != 1 or axes[0] % rank != rank - 1 or not -rank <= axes[0] < rank:
        return None
    if len(sl.inputs) > 4 and sl.inputs[4]:
        steps = _const_ints(consts, sl.inputs[4])
        if steps != [1]:
            return None
    return sl.inputs[1], sl.inputs[2]


def _match(cat, graph, f):
    """(x, cos, sin, A, B, [pattern nodes], last) around the Concat of a rotate_half, else None."""
    consts, producer, cons, outputs = f.consts, f.producer, f.cons, f.outputs
    if len(cat.inputs) != 2:
        return None
    neg, x1n = producer.get(cat.inputs[0]), cat.inputs[1]
    sl1 = producer.get(x1n)
    if not default_op(neg, "Neg") or not default_op(sl1, "Slice"):
        return None
    sl2 = producer.get(neg.inputs[0])
    if not default_op(sl2, "Slice") or sl1.inputs[0] != sl2.inputs[0]:
        return None
    x = sl1.inputs[0]
    if x in consts or not is_f32(graph, x):
        return None
    rank = len(graph.value_types[x].shape)
    axis = int(cat.attrs.get("axis", 0) or 0)
    if rank == 0 or axis % rank != rank - 1 or not -rank <= axis < rank:
        return None
    for n, v in ((sl1, x1n), (neg, neg.outputs[0]), (sl2, neg.inputs[0])):
        if only_consumer(cons, outputs, v) is None:
            return None
    r1, r2 = _last_axis_slice(sl1, consts, rank), _last_axis_slice(sl2, consts, rank)
    if r1 is None or r2 is None:
        return None
    (st1, a), (b, en2) = r1, r2
    if _const_ints(consts, st1) != [0] or not _is_int64_1(graph, consts, a) or not _is_int64_1(graph, consts, b):
        return None
    end = _const_ints(consts, en2)
    if end is None or len(end) != 1 or end[0] < BIG:
        return None
    msin = only_consumer(cons, outputs, cat.outputs[0], "Mul")
    if msin is None:
        return None
    sin = other_input(msin, cat.outputs[0])
    add = only_consumer(cons, outputs, msin.outputs[0], "Add")
    if sin is None or add is None or not is_f32(graph, sin):
        return None
    mc = other_input(add, msin.outputs[0])
    mcos = producer.get(mc)
    if not default_op(mcos, "Mul") or only_consumer(cons, outputs, mc) is not add:
        return None
    cos = other_input(mcos, x)
    if cos is None or not is_f32(graph, cos):
        return None
    return x, cos, sin, a, b, [sl1, sl2, neg, cat, msin, mcos, add], add


# the shape-subgraph pass (run after this one) sees through the node this pass writes: its output shape follows
# from its input shapes
SHAPE_ARGS[(INTERNAL_DOMAIN, "RotaryHalf")] = (3, 4)  # the split points decide the shape


def fuse_rotary(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Slice", "Neg", "Concat", "Mul", "Add"}):
        return graph
    f = Fusion(graph)
    for node in graph.nodes:
        if not default_op(node, "Concat") or f.taken((node,)):
            continue
        m = _match(node, graph, f)
        if m is None or f.taken(m[5]):
            continue
        x, cos, sin, a, b, pattern, last = m
        rot = make_node(graph, f.names.new(f"{last.name or 'rotary'}_rotary"), "RotaryHalf", [x, cos, sin, a, b],
                        [last.outputs[0]], {}, INTERNAL_DOMAIN)
        f.fuse(pattern, last, rot)
    return f.apply()
