"""Transposes around a MatMul of two computed operands (ORT_ENABLE_EXTENDED): attention's head split (Reshape ->
Transpose(0, 2, 1, 3) of Q and V, Transpose(0, 2, 3, 1) of K), the scale after Q @ K^T (Mul / Div by a single
float32 constant) and the merge Transpose(0, 2, 1, 3) of the context become attributes of one com.onnxep
StridedMatMul (ops/onnxep/strided_mat_mul.py), which reads the operands in place through permuted strides and writes the
product through the output's: no transposed copy is made.

    MatMul(Transpose(a, pa) | a, Transpose(b, pb) | b) [-> Mul(., s) | Div(., s)] [-> Transpose(., py)]
      ->  StridedMatMul(a, b, perm_a=pa, perm_b=pb, alpha=s | 1/s, perm_y=py)

Only when both operands are float32 tensors of the same known rank >= 2 and neither is a constant (a constant 2-D
weight is pre-packed by MatMul instead), something besides the MatMul itself is absorbed, and each absorbed node's
input is read by the pattern only."""
from __future__ import annotations

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, is_f32, keeps_any, only_consumer, other_input


def _perm(node, rank):
    p = node.attrs.get("perm")
    return [int(i) for i in p] if p else list(range(rank))[::-1]


def fuse_matmul_transpose(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"MatMul", "Transpose", "Mul", "Div"}):
        return graph
    f = Fusion(graph)
    consts, producer, cons, outputs, names = f.consts, f.producer, f.cons, f.outputs, f.names
    for mm in graph.nodes:
        if not default_op(mm, "MatMul") or len(mm.inputs) != 2 or f.taken((mm,)):
            continue
        if any(x in consts or not is_f32(graph, x) for x in mm.inputs):
            continue
        rank = len(graph.value_types[mm.inputs[0]].shape)
        if rank < 2 or len(graph.value_types[mm.inputs[1]].shape) != rank:
            continue
        ins, attrs, pattern = [], {}, [mm]
        for x, key in zip(mm.inputs, ("perm_a", "perm_b")):
            t = producer.get(x)
            if (default_op(t, "Transpose") and not f.taken((t,)) and only_consumer(cons, outputs, x) is mm
                    and is_f32(graph, t.inputs[0]) and t.inputs[0] not in consts):
                attrs[key] = _perm(t, rank)
                ins.append(t.inputs[0])
                pattern.append(t)
            else:
                ins.append(x)
        if mm.inputs[0] == mm.inputs[1] and len(pattern) > 1:   # one Transpose feeding both sides: keep it simple
            continue
        last = mm
        scale = only_consumer(cons, outputs, mm.outputs[0])
        if scale is not None and (default_op(scale, "Mul") or default_op(scale, "Div")):
            s = other_input(scale, mm.outputs[0])
            v = consts.get(s)
            if v is not None and v.dtype.name == "float32" and v.size == 1 and (
                    scale.op_type == "Mul" or scale.inputs[1] == s) and float(v.reshape(())) != 0.0:
                alpha = float(v.reshape(()))
                attrs["alpha"] = alpha if scale.op_type == "Mul" else 1.0 / alpha
                pattern.append(scale)
                last = scale
        t = only_consumer(cons, outputs, last.outputs[0], "Transpose")
        if t is not None:
            attrs["perm_y"] = _perm(t, rank)
            pattern.append(t)
            last = t
        if len(pattern) == 1:
            continue
        node = make_node(graph, names.new(f"{mm.name or 'matmul'}_strided"), "StridedMatMul", ins,
                         [last.outputs[0]], attrs, INTERNAL_DOMAIN)
        f.fuse(pattern, last, node)
    return f.apply()
