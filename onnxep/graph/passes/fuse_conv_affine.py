"""Conv + per-channel Mul / Add folding (ORT_ENABLE_BASIC), after Conv + BatchNormalization folding: a Mul or Add of
a Conv's only output by a constant that is one value per output channel (shape (C, 1, 1), (1, C, 1, 1), ...) or a
single value folds into the Conv's weight and bias -- the BatchNormalization that some exporters write as Mul + Add:

    Mul by s:  W' = W * s[:, None, ...], B' = B * s          Add of t:  B' = B + t

computed in float64 and rounded once."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import Names, consumer_counts, drop_unused_initializers, node_proto


def per_channel(value: np.ndarray, channels: int, rank: int):
    """`value` as one float64 per channel (length `channels`) when it broadcasts along axis 1 of a rank-`rank`
    NC... tensor only (or is a single value), else None."""
    if value.dtype != np.float32 or value.ndim > rank:
        return None
    if value.size == 1:
        return np.full(channels, float(value.reshape(())), np.float64)
    shape = (1,) * (rank - value.ndim) + value.shape
    if shape[1] != channels or any(d != 1 for i, d in enumerate(shape) if i != 1):
        return None
    return value.reshape(channels).astype(np.float64)


def fuse_conv_affine(graph: Graph, ctx=None) -> Graph:
    consts = graph.constants
    counts = consumer_counts(graph)
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    names = Names(graph)
    drop = set()
    for node in graph.nodes:
        if node.domain != "" or node.op_type not in ("Mul", "Add") or len(node.inputs) != 2 or not all(node.inputs):
            continue
        x, c = node.inputs if node.inputs[1] in consts else node.inputs[::-1]
        conv = producer.get(x)
        if c not in consts or conv is None or conv.op_type != "Conv" or conv.domain != "" or counts.get(x, 0) != 1 \
                or id(conv) in drop:
            continue
        if len(conv.inputs) < 2 or conv.inputs[1] not in consts or (len(conv.inputs) > 2 and conv.inputs[2]
                                                                     and conv.inputs[2] not in consts):
            continue
        w = consts[conv.inputs[1]]
        if w.dtype != np.float32 or w.ndim < 3:
            continue
        cout = w.shape[0]
        v = per_channel(consts[c], cout, w.ndim)
        b = consts[conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] else np.zeros(cout, np.float32)
        if v is None or b.shape != (cout,):
            continue
        if node.op_type == "Mul":
            w2 = (w.astype(np.float64) * v.reshape((cout,) + (1,) * (w.ndim - 1))).astype(np.float32)
            b2 = (b.astype(np.float64) * v).astype(np.float32)
            wn = names.new(f"{conv.inputs[1]}_mul")
            graph.initializers[wn] = consts[wn] = w2
        else:
            wn = conv.inputs[1]
            b2 = (b.astype(np.float64) + v).astype(np.float32)
        bn = names.new(f"{conv.name}_bias_{node.op_type.lower()}")
        graph.initializers[bn] = consts[bn] = b2
        conv.inputs = [conv.inputs[0], wn, bn]
        conv.outputs = [node.outputs[0]]
        conv.proto = node_proto(conv)
        producer[node.outputs[0]] = conv
        drop.add(id(node))
    if drop:
        graph.nodes = [n for n in graph.nodes if id(n) not in drop]
        drop_unused_initializers(graph)
    return graph
