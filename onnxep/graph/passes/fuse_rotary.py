"""Rotary embedding, rotate_half form (ORT_ENABLE_EXTENDED, as onnxruntime's RotaryEmbedding fusion): what torch.onnx
writes for HF's apply_rotary_pos_emb,

    x1 = Slice(x, 0, A, axes=[-1])     x2 = Slice(x, B, big, axes=[-1])     (steps absent or 1)
    y  = Add(Mul(x, cos), Mul(Concat(Neg(x2), x1, axis=-1), sin))
      ->  com.onnxep RotaryHalf(x, cos, sin, A, B)          (ops/onnxep/rotary_half.py)

and the interleaved form (GPT-J's rotate_every_two),

    x1 = Slice(x, 0, big, axes=[-1], steps=[2])      x2 = Slice(x, 1, big, axes=[-1], steps=[2])
    r  = Reshape(Concat(Unsqueeze(Neg(x2), -1), Unsqueeze(x1, -1), axis=-1), shape)
    y  = Add(Mul(x, cos), Mul(r, sin))
      ->  com.onnxep RotaryInterleaved(x, cos, sin, shape, allowzero)    (ops/onnxep/rotary_interleaved.py)

A and B are int64 one-element tensors, constants or values computed in the graph (the half of the head size, from
the shape): the kernel takes them as inputs and slices as Slice does, so nothing about them need be known here; `big`
a constant >= 2^31 - 1 (to the end). x, cos and sin float32 tensors of known rank; Add / Mul operand order free;
every intermediate read by the pattern only (x itself may have other readers)."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
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


def _last_axis_slice(sl, consts, rank, step=1):
    """(starts, ends) names of an opset >= 10 Slice over the last axis only with step `step`, else None."""
    if sl.opset < 10 or len(sl.inputs) < 4:
        return None
    axes = _const_ints(consts, sl.inputs[3])
    if axes is None or len(axes) != 1 or axes[0] % rank != rank - 1 or not -rank <= axes[0] < rank:
        return None
    if len(sl.inputs) > 4 and sl.inputs[4]:
        if _const_ints(consts, sl.inputs[4]) != [step]:
            return None
    elif step != 1:
        return None
    return sl.inputs[1], sl.inputs[2]


def _cos_sin(rot, x, graph, f):
    """(cos, sin, Mul(rot, sin), Mul(x, cos), Add) of y = Add(Mul(x, cos), Mul(rot, sin)), else None."""
    producer, cons, outputs = f.producer, f.cons, f.outputs
    msin = only_consumer(cons, outputs, rot, "Mul")
    if msin is None:
        return None
    sin = other_input(msin, rot)
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
    return cos, sin, msin, mcos, add


def _unsqueezed_last(node, consts, rank):
    """The input of an Unsqueeze adding one trailing axis to a rank-`rank` tensor, else None."""
    if not default_op(node, "Unsqueeze"):
        return None
    axes = _const_ints(consts, node.inputs[1]) if node.opset >= 13 and len(node.inputs) > 1 else node.attrs.get("axes")
    if axes is None or len(axes) != 1 or int(axes[0]) not in (-1, rank):
        return None
    return node.inputs[0]


def _match_interleaved(cat, graph, f):
    """(x, cos, sin, shape, allowzero, [pattern nodes], last) around the Concat of a rotate_every_two, else None:
    Concat(Unsqueeze(Neg(Slice(x, 1, big, -1, 2)), -1), Unsqueeze(Slice(x, 0, big, -1, 2), -1), axis=-1) ->
    Reshape(., shape) -> Mul(., sin) + Mul(x, cos)."""
    consts, producer, cons, outputs = f.consts, f.producer, f.cons, f.outputs
    if len(cat.inputs) != 2:
        return None
    u1, u2 = producer.get(cat.inputs[0]), producer.get(cat.inputs[1])
    if not default_op(u1, "Unsqueeze") or not default_op(u2, "Unsqueeze"):
        return None
    neg = producer.get(u1.inputs[0])
    sl2 = producer.get(neg.inputs[0]) if default_op(neg, "Neg") else None
    sl1 = producer.get(u2.inputs[0])
    if not default_op(sl2, "Slice") or not default_op(sl1, "Slice") or sl1.inputs[0] != sl2.inputs[0]:
        return None
    x = sl1.inputs[0]
    if x in consts or not is_f32(graph, x):
        return None
    rank = len(graph.value_types[x].shape)
    if rank == 0 or _unsqueezed_last(u1, consts, rank) is None or _unsqueezed_last(u2, consts, rank) is None:
        return None
    axis = int(cat.attrs.get("axis", 0) or 0)
    if axis not in (-1, rank):
        return None
    r1, r2 = _last_axis_slice(sl1, consts, rank, 2), _last_axis_slice(sl2, consts, rank, 2)
    if r1 is None or r2 is None or _const_ints(consts, r1[0]) != [0] or _const_ints(consts, r2[0]) != [1]:
        return None
    for end in (r1[1], r2[1]):
        e = _const_ints(consts, end)
        if e is None or len(e) != 1 or e[0] < BIG:
            return None
    for v in (cat.inputs[0], cat.inputs[1], u1.inputs[0], neg.inputs[0], u2.inputs[0]):
        if only_consumer(cons, outputs, v) is None:
            return None
    rs = only_consumer(cons, outputs, cat.outputs[0], "Reshape")
    if rs is None or len(rs.inputs) != 2 or rs.opset < 5:
        return None
    shape = rs.inputs[1]
    vt = graph.value_types.get(shape)
    if shape not in consts and (vt is None or vt.type_str != "tensor(int64)"):
        return None
    cs = _cos_sin(rs.outputs[0], x, graph, f)
    if cs is None:
        return None
    cos, sin, msin, mcos, add = cs
    allowzero = int(rs.attrs.get("allowzero", 0) or 0)
    return x, cos, sin, shape, allowzero, [sl1, sl2, neg, u1, u2, cat, rs, msin, mcos, add], add


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
    cs = _cos_sin(cat.outputs[0], x, graph, f)
    if cs is None:
        return None
    cos, sin, msin, mcos, add = cs
    return x, cos, sin, a, b, [sl1, sl2, neg, cat, msin, mcos, add], add


# the shape-subgraph pass (run after this one) sees through the node this pass writes: its output shape follows
# from its input shapes


def fuse_rotary(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Slice", "Neg", "Concat", "Mul", "Add"}):
        return graph
    f = Fusion(graph)
    for node in graph.nodes:
        if not default_op(node, "Concat") or f.taken((node,)):
            continue
        m = _match(node, graph, f)
        if m is not None and not f.taken(m[5]):
            x, cos, sin, a, b, pattern, last = m
            rot = make_node(graph, f.names.new(f"{last.name or 'rotary'}_rotary"), "RotaryHalf",
                            [x, cos, sin, a, b], [last.outputs[0]], {}, INTERNAL_DOMAIN)
            f.fuse(pattern, last, rot)
            continue
        m = _match_interleaved(node, graph, f)
        if m is not None and not f.taken(m[5]):
            x, cos, sin, shape, allowzero, pattern, last = m
            rot = make_node(graph, f.names.new(f"{last.name or 'rotary'}_rotary"), "RotaryInterleaved",
                            [x, cos, sin, shape], [last.outputs[0]], {"allowzero": allowzero}, INTERNAL_DOMAIN)
            f.fuse(pattern, last, rot)
    return f.apply()
