"""QuantizeLinear -> DequantizeLinear (per tensor, float32 -> int8 / uint8 -> float32, the same constant scale and zero
point) -> com.onnxep QuantizeDequantize (ops/onnxep/quantize_dequantize.py): the pair a QDQ model (onnxruntime's
quantize_static, QuantFormat.QDQ) puts between two float ops, in one pass over the tensor and without the 8-bit
tensor, bit-identical to the two nodes. onnxep runs a QDQ model's convs, matmuls and the ops between in float32 (the
quantized values are exact in float32), so the pair is all that is left of the quantization.

Matched: a DequantizeLinear (no block_size, output float32) reading a QuantizeLinear's output, both with a constant
float32 scale of one element of the same value and a constant int8 / uint8 zero point of one element of the same
value (a missing one: uint8 zero); the QuantizeLinear's input float32 and its output no graph output. Every such
DequantizeLinear becomes a fused node reading the QuantizeLinear's input; the QuantizeLinear goes once nothing else
reads its output."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, is_f32, keeps_any
from onnxep.graph.passes.fuse_qdq_ops import per_tensor_params

def _params(node, consts):
    """(scale, zero point, signed) of a per-tensor 8-bit Quantize / DequantizeLinear with constant parameters, or
    None (fuse_qdq_ops.per_tensor_params, read as this pass needs it)."""
    p = per_tensor_params(node, consts)
    if p is None:
        return None
    s, _, dtype, zv = p
    return float(s.reshape(())), zv, dtype == np.int8


def fuse_qdq_pair(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"QuantizeLinear", "DequantizeLinear"}):
        return graph
    f = Fusion(graph)
    consts, cons, outputs, names, producer = f.consts, f.cons, f.outputs, f.names, f.producer
    qs = {}
    for dq in graph.nodes:
        if not default_op(dq, "DequantizeLinear") or len(dq.outputs) != 1 or f.taken((dq,)):
            continue
        if int(dq.attrs.get("output_dtype") or 1) != 1:
            continue
        q = producer.get(dq.inputs[0]) if dq.inputs else None
        if not default_op(q, "QuantizeLinear") or len(q.outputs) != 1 or q.outputs[0] in outputs:
            continue
        if not q.inputs or not is_f32(graph, q.inputs[0]):
            continue
        if q.attrs.get("output_dtype") and len(q.inputs) < 3:
            continue      # the type from output_dtype: left alone
        pq, pd = _params(q, consts), _params(dq, consts)
        if pq is None or pq != pd:
            continue
        scale, zp, signed = pq
        fused = make_node(graph, names.new(f"{dq.name or 'qdq'}_qdq"), "QuantizeDequantize", [q.inputs[0]],
                          [dq.outputs[0]], {"scale": scale, "zero_point": zp, "signed": int(signed)}, INTERNAL_DOMAIN)
        f.fuse([dq], dq, fused)
        qs[id(q)] = q
    for q in qs.values():     # gone once every reader of its output is a fused node
        if all(f.taken((u,)) for u in cons.get(q.outputs[0], ())):
            f._drop.add(id(q))
    return f.apply()
