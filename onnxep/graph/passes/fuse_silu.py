"""SiLU / QuickGelu (ORT_ENABLE_EXTENDED, as onnxruntime's QuickGeluFusion): x * Sigmoid(alpha * x) becomes one
com.onnxep Silu node (ops/onnxep/silu.py):

    Sigmoid(x) -> Mul(x, .)                                  alpha 1 (SiLU / Swish)
    Mul(x, alpha) -> Sigmoid -> Mul(x, .)                    alpha a float32 single value (QuickGelu: 1.702)
    [-> Mul(., gate)]                                        a gated MLP's act(gate_proj) * up_proj, when gate has
                                                             the product's shape (then Silu's input 1)

x (and gate) float32 tensors of known rank (4-D feature maps of a conv net too: the NHWC layout pass runs a Silu
on their channel-last twins, as the elementwise ops); every intermediate read by the pattern only (and not a graph
output). Operand order of Mul is free."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, is_f32, keeps_any, only_consumer, other_input


def _same_shape(graph, a, b) -> bool:
    sa, sb = graph.value_types.get(a), graph.value_types.get(b)
    if sa is None or sb is None or sa.shape is None or sb.shape is None:
        return False
    return (len(sa.shape) == len(sb.shape)
            and all(isinstance(p, (int, str)) and p == q for p, q in zip(sa.shape, sb.shape)))


def _match(sig, graph, f):
    """(x, alpha, gate or None, [pattern nodes], last) around a Sigmoid, else None."""
    consts, producer, cons, outputs = f.consts, f.producer, f.cons, f.outputs
    s_in, s_out = sig.inputs[0], sig.outputs[0]
    mul = only_consumer(cons, outputs, s_out, "Mul")
    if mul is None:
        return None
    x = other_input(mul, s_out)
    pattern, alpha = [sig, mul], 1.0
    if x != s_in:                                        # QuickGelu: Sigmoid(Mul(x, alpha))
        pre = producer.get(s_in)
        if not default_op(pre, "Mul") or only_consumer(cons, outputs, s_in) is not sig or x not in pre.inputs:
            return None
        a = consts.get(other_input(pre, x))
        if a is None or a.dtype != np.float32 or a.size != 1:
            return None
        alpha = float(a.reshape(()))
        pattern.insert(0, pre)
    if x is None or x in consts or not is_f32(graph, x) or not _same_shape(graph, x, mul.outputs[0]):
        return None
    last, gate = mul, None
    g = only_consumer(cons, outputs, mul.outputs[0], "Mul")
    if g is not None:
        other = other_input(g, mul.outputs[0])
        if (other is not None and other not in consts and is_f32(graph, other)
                and _same_shape(graph, other, mul.outputs[0]) and _same_shape(graph, other, g.outputs[0])):
            last, gate = g, other
            pattern.append(g)
    return x, alpha, gate, pattern, last


# the shape-subgraph pass (run after this one) sees through the node this pass writes: its output shape follows
# from its input shapes


def fuse_silu(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Sigmoid", "Mul"}):
        return graph
    f = Fusion(graph)
    for node in graph.nodes:
        if not default_op(node, "Sigmoid") or f.taken((node,)):
            continue
        m = _match(node, graph, f)
        if m is None or f.taken(m[3]):
            continue
        x, alpha, gate, pattern, last = m
        attrs = {} if alpha == 1.0 else {"alpha": alpha}
        silu = make_node(graph, f.names.new(f"{last.name or 'silu'}_silu"), "Silu",
                         [x] + ([gate] if gate is not None else []), [last.outputs[0]], attrs, INTERNAL_DOMAIN)
        f.fuse(pattern, last, silu)
    return f.apply()
