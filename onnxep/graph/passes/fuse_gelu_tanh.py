"""FastGelu (ORT_ENABLE_EXTENDED, as onnxruntime's FastGeluFusion): the tanh approximation of Gelu that exporters write
for gelu_new / gelu_pytorch_tanh (GPT-2, GPT-Neo, Phi ...),
0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))), becomes one com.onnxep FastGelu node
(ops/onnxep/fast_gelu.py, one native loop instead of eight elementwise passes):

    Pow(x, 3) | Mul(Mul(x, x), x) | Mul(x, Mul(x, x))  ->  Mul(., 0.044715)  ->  Add(x, .)  ->  Mul(., sqrt(2/pi))
        ->  Tanh  ->  Add(., 1)  ->  then one of
        Mul(x, .) -> Mul(., 0.5)
        Mul(., 0.5) -> Mul(x, .)
        Mul(x, 0.5) and Mul(that, .)          (torch.onnx's order, both exporters)

Matched on structure and the constants' values (float32 single values, rtol 1e-5), never on names; x must be a
float32 tensor of known rank (the FastGelu kernel's type); every intermediate must be read by the pattern only (and
not be a graph output). Operand order of Add / Mul is free."""
from __future__ import annotations

import math


from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import (Fusion, default_op, half_x_times, is_f32, keeps_any, only_consumer, other_input,
                                          scalar_const)

SQRT_2_PI = math.sqrt(2.0 / math.pi)
RTOL = 1e-5


def _scaled(node, consts, value):
    """The non-constant operand of a Mul(a, value) / Mul(value, a), else None."""
    if not default_op(node, "Mul") or len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if scalar_const(consts, b, value, RTOL):
        return a
    if scalar_const(consts, a, value, RTOL):
        return b
    return None


def _cube_of(node, f):
    """(x, [nodes]) when `node` computes x^3 (Pow(x, 3) or two Muls), else None."""
    consts, producer, cons, outputs = f.consts, f.producer, f.cons, f.outputs
    if default_op(node, "Pow") and len(node.inputs) == 2:
        e = consts.get(node.inputs[1])
        if e is not None and e.size == 1 and e.dtype.kind in "fi" and float(e.reshape(())) == 3.0:
            return node.inputs[0], [node]
        return None
    if not default_op(node, "Mul") or len(node.inputs) != 2:
        return None
    for i in (0, 1):
        sq, x = node.inputs[i], node.inputs[1 - i]
        m = producer.get(sq)
        if (default_op(m, "Mul") and list(m.inputs) == [x, x] and only_consumer(cons, outputs, sq) is node):
            return x, [m, node]
    return None


def _match(tanh, graph, f):
    """(x, [pattern nodes], last) around a Tanh at the heart of the tanh-form Gelu, else None."""
    consts, producer, cons, outputs = f.consts, f.producer, f.cons, f.outputs
    u = tanh.inputs[0] if tanh.inputs else None
    scale = producer.get(u)
    if scale is None or only_consumer(cons, outputs, u) is not tanh:
        return None
    s = _scaled(scale, consts, SQRT_2_PI)
    add = producer.get(s)
    if s is None or not default_op(add, "Add") or len(add.inputs) != 2 or only_consumer(cons, outputs, s) is not scale:
        return None
    for i in (0, 1):
        x, t = add.inputs[i], add.inputs[1 - i]
        mul = producer.get(t)
        if mul is None or only_consumer(cons, outputs, t) is not add:
            continue
        c = _scaled(mul, consts, 0.044715)
        cube = producer.get(c) if c is not None else None
        if cube is None or only_consumer(cons, outputs, c) is not mul:
            continue
        cx = _cube_of(cube, f)
        if cx is not None and cx[0] == x:
            front = cx[1] + [mul, add, scale, tanh]
            break
    else:
        return None
    if x in consts or not is_f32(graph, x):
        return None
    one = only_consumer(cons, outputs, tanh.outputs[0], "Add")
    if one is None or not scalar_const(consts, other_input(one, tanh.outputs[0]), 1.0, RTOL):
        return None
    tail = half_x_times(consts, producer, cons, outputs, x, one.outputs[0], RTOL)
    if tail is None:
        return None
    return x, front + [one] + tail[0], tail[1]


def fuse_gelu_tanh(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Tanh", "Pow", "Mul", "Add"}):
        return graph
    f = Fusion(graph)
    for node in graph.nodes:
        if not default_op(node, "Tanh") or f.taken((node,)):
            continue
        m = _match(node, graph, f)
        if m is None or f.taken(m[1]):
            continue
        x, pattern, last = m
        gelu = make_node(graph, f.names.new(f"{last.name or 'gelu'}_fast_gelu"), "FastGelu", [x], [last.outputs[0]],
                         {}, INTERNAL_DOMAIN)
        f.fuse(pattern, last, gelu)
    return f.apply()
