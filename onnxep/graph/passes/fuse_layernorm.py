"""LayerNormalization (ORT_ENABLE_EXTENDED): the decomposed form older exporters write becomes one node,

    mean = ReduceMean(x, axes)        d = Sub(x, mean)       v = ReduceMean(Pow(d, 2) | Mul(d, d), axes)
    y = Div(d, Sqrt(Add(v, eps)))  [-> Mul(., scale)]  [-> Add(., bias)]
      ->  LayerNormalization(x, scale, bias, axis=axes[0], epsilon=eps)

where `axes` are the trailing dims of x (axis .. rank-1, as the spec's normalized_axes; as an attribute, or a
constant input from opset 18), both ReduceMeans keep dims, eps / 2 are float32 single values, scale / bias float32
constants that broadcast to x (the spec: "Scale and B should be unidirectional broadcastable to tensor X"). With
default-domain opset >= 17 the node is the standard LayerNormalization (the saved optimized model stays standard
ONNX); below it, onnxep's com.onnxep LayerNormalization (ops/nn/layer_normalization.py), the same kernel. Every
intermediate must be read by the pattern only."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, is_f32, keeps_any, only_consumer, other_input, scalar_const


def _axes(node, consts):
    """ReduceMean's axes (attribute, or constant input 1 from opset 18), or None."""
    if int(node.attrs.get("keepdims", 1) if node.attrs.get("keepdims") is not None else 1) != 1:
        return None
    if node.opset >= 18:
        if int(node.attrs.get("noop_with_empty_axes") or 0) or len(node.inputs) < 2 or node.inputs[1] not in consts:
            return None
        return [int(a) for a in consts[node.inputs[1]].reshape(-1)]
    axes = node.attrs.get("axes")
    return [int(a) for a in axes] if axes else None


def _trailing_axis(axes, rank):
    """The first axis when `axes` are exactly the trailing dims axis..rank-1, else None."""
    norm = sorted(a % rank for a in axes) if axes and all(-rank <= a < rank for a in axes) else None
    if not norm or norm != list(range(norm[0], rank)):
        return None
    return norm[0]


def _broadcasts_to(v, shape) -> bool:
    try:
        return v.dtype == np.float32 and np.broadcast_shapes(v.shape, shape) == tuple(shape)
    except ValueError:
        return False


def _match(sub, graph, consts, producer, cons, outputs):
    """(x, axis, eps, scale name or None, bias name or None, [pattern nodes], last) around a Sub, else None."""
    if len(sub.inputs) != 2:
        return None
    x, mean = sub.inputs
    rm1 = producer.get(mean)
    if not default_op(rm1, "ReduceMean") or rm1.inputs[0] != x or only_consumer(cons, outputs, mean) is not sub:
        return None
    if x in consts or not is_f32(graph, x) or any(not isinstance(s, int) for s in graph.value_types[x].shape):
        return None
    shape = tuple(graph.value_types[x].shape)
    axes = _axes(rm1, consts)
    axis = _trailing_axis(axes, len(shape)) if axes else None
    if axis is None:
        return None
    d = sub.outputs[0]
    users = list({id(u): u for u in cons.get(d, [])}.values())   # Mul(d, d) reads d twice
    if len(users) != 2 or d in outputs:
        return None
    sq = next((u for u in users if (default_op(u, "Pow") and u.inputs[0] == d and scalar_const(consts, u.inputs[1], 2.0))
               or (default_op(u, "Mul") and list(u.inputs) == [d, d])), None)
    div = next((u for u in users if default_op(u, "Div") and len(u.inputs) == 2 and u.inputs[0] == d), None)
    if sq is None or div is None or sq is div:
        return None
    rm2 = only_consumer(cons, outputs, sq.outputs[0], "ReduceMean")
    if rm2 is None or _axes(rm2, consts) is None or _trailing_axis(_axes(rm2, consts), len(shape)) != axis:
        return None
    add = only_consumer(cons, outputs, rm2.outputs[0], "Add")
    eps_name = other_input(add, rm2.outputs[0]) if add is not None else None
    ev = consts.get(eps_name)
    if ev is None or ev.dtype != np.float32 or ev.size != 1:
        return None
    sqrt = only_consumer(cons, outputs, add.outputs[0], "Sqrt")
    if sqrt is None or only_consumer(cons, outputs, sqrt.outputs[0]) is not div or div.inputs[1] != sqrt.outputs[0]:
        return None
    pattern = [rm1, sub, sq, rm2, add, sqrt, div]
    last, scale, bias = div, None, None
    mul = only_consumer(cons, outputs, div.outputs[0], "Mul")
    if mul is not None:
        s = other_input(mul, div.outputs[0])
        if s in consts and _broadcasts_to(consts[s], shape):
            scale, last = s, mul
            pattern.append(mul)
    shift = only_consumer(cons, outputs, last.outputs[0], "Add")
    if shift is not None:
        b = other_input(shift, last.outputs[0])
        if b in consts and _broadcasts_to(consts[b], shape):
            bias, last = b, shift
            pattern.append(shift)
    return x, axis, float(ev.reshape(())), scale, bias, pattern, last


def fuse_layernorm(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"ReduceMean", "Sub", "Pow", "Add", "Sqrt", "Div", "Mul"}):
        return graph
    f = Fusion(graph)
    consts, producer, cons, outputs, names = f.consts, f.producer, f.cons, f.outputs, f.names
    standard = graph.opsets.get("", graph.opsets.get("ai.onnx", 0)) >= 17
    for node in graph.nodes:
        if not default_op(node, "Sub") or f.taken((node,)):
            continue
        m = _match(node, graph, consts, producer, cons, outputs)
        if m is None or f.taken(m[5]):
            continue
        x, axis, eps, scale, bias, pattern, last = m
        shape = graph.value_types[x].shape
        if scale is None:   # LayerNormalization's Scale is required: ones over the normalized dims
            scale = names.new(f"{last.name or 'layernorm'}_scale")
            graph.initializers[scale] = consts[scale] = np.ones(shape[axis:], np.float32)
        ins = [x, scale] + ([bias] if bias is not None else [])
        ln = make_node(graph, names.new(f"{last.name or 'layernorm'}_layernorm"), "LayerNormalization", ins,
                       [last.outputs[0]], {"axis": axis, "epsilon": eps}, "" if standard else INTERNAL_DOMAIN)
        f.fuse(pattern, last, ln)
    return f.apply()
