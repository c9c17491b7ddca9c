"""Gelu (ORT_ENABLE_EXTENDED): the Erf form exporters write for x * 0.5 * (1 + erf(x / sqrt(2))) becomes one
com.onnxep Gelu node (ops/onnxep/gelu.py, one native loop instead of five elementwise passes):

    Div(x, sqrt(2)) | Mul(x, 1/sqrt(2))  ->  Erf  ->  Add(., 1)  ->  then one of
        Mul(x, .) -> Mul(., 0.5)          (torch.onnx's order)
        Mul(., 0.5) -> Mul(x, .)
        Mul(x, 0.5) and Mul(that, .)

Constants are float32 single values (rtol 1e-6); x must be a float32 tensor of known rank (the Gelu kernel's type);
every intermediate must be read by the pattern only (and not be a graph output). Operand order of Add / Mul is
free."""
from __future__ import annotations

import math

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import (Fusion, default_op, half_x_times, is_f32, keeps_any, only_consumer, other_input,
                                          scalar_const)

SQRT2 = math.sqrt(2.0)


def _match(node, graph, consts, producer, cons, outputs):
    """(x, [pattern nodes], last node) for an Erf node at the heart of a Gelu, else None."""
    erf = node
    d = erf.inputs[0] if erf.inputs else None
    div = producer.get(d)
    if div is None or only_consumer(cons, outputs, d) is not erf or len(div.inputs) != 2:
        return None
    if default_op(div, "Div") and scalar_const(consts, div.inputs[1], SQRT2):
        x = div.inputs[0]
    elif default_op(div, "Mul"):
        x = next((div.inputs[1 - i] for i in (0, 1) if scalar_const(consts, div.inputs[i], 1.0 / SQRT2)), None)
    else:
        return None
    if x is None or x in consts or not is_f32(graph, x):
        return None
    add = only_consumer(cons, outputs, erf.outputs[0], "Add")
    if add is None or not scalar_const(consts, other_input(add, erf.outputs[0]), 1.0):
        return None
    tail = half_x_times(consts, producer, cons, outputs, x, add.outputs[0])
    if tail is None:
        return None
    return x, [div, erf, add] + tail[0], tail[1]


def fuse_gelu(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Erf", "Div", "Mul", "Add"}):
        return graph
    f = Fusion(graph)
    consts, producer, cons, outputs, names = f.consts, f.producer, f.cons, f.outputs, f.names
    for node in graph.nodes:
        if not default_op(node, "Erf") or f.taken((node,)):
            continue
        m = _match(node, graph, consts, producer, cons, outputs)
        if m is None or f.taken(m[1]):
            continue
        x, pattern, last = m
        gelu = make_node(graph, names.new(f"{last.name or 'gelu'}_gelu"), "Gelu", [x], [last.outputs[0]], {},
                         INTERNAL_DOMAIN)
        f.fuse(pattern, last, gelu)
    return f.apply()
