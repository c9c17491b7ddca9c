"""Additive mask + Softmax (ORT_ENABLE_EXTENDED): Add(scores, mask) whose only reader is a Softmax along the last
axis becomes one com.onnxep MaskedSoftmax(scores, mask) (ops/onnxep/masked_softmax.py): the mask is added to each row while
it is in L1, no masked-scores tensor is written. `scores` is the Add input with the Add's shape (static, or with
named symbolic dims), the mask the other one, which broadcasts to it (either may be a constant). Softmax from
opset 13 with axis -1 / rank-1, or opset 1 / 11 with axis rank-1 (there the 2-D coercion at the last axis is the
same thing)."""
from __future__ import annotations

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, is_f32, keeps_any, only_consumer


def _known(graph, name):
    """The shape of `name` when every dim is an int or a named (symbolic) dim, else None."""
    vt = graph.value_types.get(name)
    if vt is None or vt.shape is None or any(not isinstance(d, (int, str)) for d in vt.shape):
        return None
    return tuple(vt.shape)


def _broadcasts(m_shape, x_shape) -> bool:
    """m_shape broadcasts to x_shape without changing it: each dim 1 or the same (int or symbolic name)."""
    if len(m_shape) > len(x_shape):
        return False
    return all(m == 1 or m == x for m, x in zip(m_shape[::-1], x_shape[::-1]))


def _last_axis(sm, rank) -> bool:
    axis = sm.attrs.get("axis")
    if sm.opset >= 13:
        axis = -1 if axis is None else int(axis)
    else:
        axis = 1 if axis is None else int(axis)
    return rank >= 1 and -rank <= axis < rank and axis % rank == rank - 1


def fuse_softmax_mask(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Add", "Softmax"}):
        return graph
    f = Fusion(graph)
    producer, cons, outputs, names = f.producer, f.cons, f.outputs, f.names
    for sm in graph.nodes:
        if not default_op(sm, "Softmax") or len(sm.inputs) != 1 or len(sm.outputs) != 1:
            continue
        add = producer.get(sm.inputs[0])
        if not default_op(add, "Add") or len(add.inputs) != 2 or only_consumer(cons, outputs, sm.inputs[0]) is not sm:
            continue
        out = _known(graph, add.outputs[0])
        if out is None or not _last_axis(sm, len(out)) or not all(is_f32(graph, i) for i in add.inputs):
            continue
        shapes = [_known(graph, i) for i in add.inputs]
        order = [i for i in (0, 1) if shapes[i] == out]
        if not order or shapes[1 - order[0]] is None or not _broadcasts(shapes[1 - order[0]], out):
            continue
        x, mask = add.inputs[order[0]], add.inputs[1 - order[0]]
        node = make_node(graph, names.new(f"{sm.name or 'softmax'}_masked"), "MaskedSoftmax", [x, mask],
                         [sm.outputs[0]], {}, INTERNAL_DOMAIN)
        f.fuse((add, sm), sm, node)
    return f.apply()
