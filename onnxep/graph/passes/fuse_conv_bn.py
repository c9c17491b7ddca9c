"""Conv + BatchNormalization folding (ORT_ENABLE_BASIC): a BatchNormalization in inference mode whose input is the
only use of a Conv's output, with constant weight, bias and statistics, is folded into the Conv:

    a = scale / sqrt(var + epsilon)       W' = W * a[:, None, ...]       B' = (B - mean) * a + beta

computed in float64 and rounded once. The BatchNormalization node disappears; the Conv writes its output."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import Names, consumer_counts, drop_unused_initializers, node_proto


def bn_foldable(bn, consts) -> bool:
    """An inference-mode BatchNormalization with constant statistics."""
    a = bn.attrs
    if len(bn.inputs) != 5 or any(o for o in bn.outputs[1:]) or not all(x in consts for x in bn.inputs[1:]):
        return False
    if int(a.get("training_mode") or 0) != 0:
        return False
    if bn.opset < 7 and int(a.get("is_test") or 0) != 1:
        return False
    if bn.opset < 9 and int(a.get("spatial") if a.get("spatial") is not None else 1) != 1:
        return False
    return True


def fuse_conv_bn(graph: Graph, ctx=None) -> Graph:
    consts = graph.constants
    counts = consumer_counts(graph)
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    names = Names(graph)
    drop = set()
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.domain != "" or not bn.inputs or not bn_foldable(bn, consts):
            continue
        conv = producer.get(bn.inputs[0])
        if conv is None or conv.op_type != "Conv" or conv.domain != "" or counts.get(bn.inputs[0], 0) != 1:
            continue
        if len(conv.inputs) < 2 or conv.inputs[1] not in consts or (len(conv.inputs) > 2 and conv.inputs[2]
                                                                     and conv.inputs[2] not in consts):
            continue
        w = consts[conv.inputs[1]]
        scale, beta, mean, var = (consts[x] for x in bn.inputs[1:])
        cout = w.shape[0] if w.ndim >= 3 else -1
        if w.dtype != np.float32 or any(v.shape != (cout,) or v.dtype != np.float32 for v in (scale, beta, mean, var)):
            continue
        b = consts[conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] else np.zeros(cout, np.float32)
        if b.shape != (cout,):
            continue
        eps = float(bn.attrs.get("epsilon") if bn.attrs.get("epsilon") is not None else 1e-5)
        a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
        w2 = (w.astype(np.float64) * a.reshape((cout,) + (1,) * (w.ndim - 1))).astype(np.float32)
        b2 = ((b.astype(np.float64) - mean) * a + beta).astype(np.float32)
        wn, bname = names.new(f"{conv.inputs[1]}_bn"), names.new(f"{conv.name}_bn_bias")
        graph.initializers[wn] = w2
        graph.initializers[bname] = b2
        consts[wn], consts[bname] = w2, b2
        conv.inputs = [conv.inputs[0], wn, bname]
        conv.outputs = [bn.outputs[0]]
        conv.proto = node_proto(conv)
        drop.add(id(bn))
    if drop:
        graph.nodes = [n for n in graph.nodes if id(n) not in drop]
        drop_unused_initializers(graph)
    return graph
