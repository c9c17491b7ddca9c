"""Per-channel affine ops fold into the Conv before them (ORT_ENABLE_BASIC): a BatchNormalization in inference mode,
or a Mul / Add by a constant with one value per output channel (shape (C, 1, 1), (1, C, 1, 1), ... or a single
value; some exporters write BatchNormalization that way), whose input is the only use of a Conv's output with a
constant weight (and bias), becomes part of that Conv:

    BatchNormalization:  a = scale / sqrt(var + epsilon)   W' = W * a[:, None, ...]   B' = (B - mean) * a + beta
    Mul by s:            W' = W * s[:, None, ...]          B' = B * s
    Add of t:            B' = B + t

computed in float64 and rounded once. The folded node disappears; the Conv writes its output. Chains (Conv -> BN ->
Mul -> Add) fold one after another."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import Names, absorb, consumer_counts, producers, remove_nodes


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


def bn_affine(bn, consts, channels):
    """(a, b) float64 per channel with BatchNormalization(x) = x * a + b, or None when the shapes do not fit."""
    scale, beta, mean, var = (consts[x] for x in bn.inputs[1:])
    if any(v.shape != (channels,) or v.dtype != np.float32 for v in (scale, beta, mean, var)):
        return None
    eps = float(bn.attrs.get("epsilon") if bn.attrs.get("epsilon") is not None else 1e-5)
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    return a, beta.astype(np.float64) - mean * a


def _affine(node, consts, cout, rank):
    """(a, b) per output channel with node(y) = y * a + b, for the node kinds this pass folds; else None."""
    if node.domain != "" or not node.inputs or not node.inputs[0]:
        return None
    if node.op_type == "BatchNormalization":
        return bn_affine(node, consts, cout) if bn_foldable(node, consts) else None
    if node.op_type not in ("Mul", "Add") or len(node.inputs) != 2 or not all(node.inputs):
        return None
    c = node.inputs[1] if node.inputs[1] in consts else node.inputs[0]
    v = per_channel(consts[c], cout, rank) if c in consts else None
    if v is None:
        return None
    return (v, np.zeros(cout)) if node.op_type == "Mul" else (np.ones(cout), v)


def fuse_conv_affine(graph: Graph, ctx=None) -> Graph:
    consts = graph.constants
    counts = consumer_counts(graph)
    producer = producers(graph)
    names = Names(graph)
    drop = set()
    made = set()                  # initializers this pass created (read by their Conv only)
    for node in graph.nodes:
        if node.op_type not in ("BatchNormalization", "Mul", "Add") or node.domain != "" or not node.inputs:
            continue
        x = next((i for i in node.inputs if i and i not in consts), None)
        conv = producer.get(x)
        if conv is None or conv.op_type != "Conv" or conv.domain != "" or counts.get(x, 0) != 1 \
                or (node.op_type == "BatchNormalization" and node.inputs[0] != x):
            continue
        if len(conv.inputs) < 2 or conv.inputs[1] not in consts or (len(conv.inputs) > 2 and conv.inputs[2]
                                                                     and conv.inputs[2] not in consts):
            continue
        w = consts[conv.inputs[1]]
        if w.dtype != np.float32 or w.ndim < 3:
            continue
        cout = w.shape[0]
        b = consts[conv.inputs[2]] if len(conv.inputs) > 2 and conv.inputs[2] else np.zeros(cout, np.float32)
        ab = _affine(node, consts, cout, w.ndim)
        if ab is None or b.shape != (cout,):
            continue
        a, shift = ab
        wn = conv.inputs[1]
        if not np.all(a == 1):
            wn = names.new(f"{conv.inputs[1]}_{node.op_type.lower()}")
            graph.initializers[wn] = consts[wn] = (w.astype(np.float64)
                                                   * a.reshape((cout,) + (1,) * (w.ndim - 1))).astype(np.float32)
        bname = names.new(f"{conv.name}_bias_{node.op_type.lower()}")
        graph.initializers[bname] = consts[bname] = (b.astype(np.float64) * a + shift).astype(np.float32)
        old = conv.inputs[1:3]
        conv.inputs = (conv.inputs[0], wn, bname)
        absorb(conv, node, producer, drop)
        # the replaced weight and bias go now when this Conv was their only reader (or this pass made them, in a
        # chain): the graph does not hold every weight twice until partitioning drops the unused ones
        for x in old:
            if x and x not in conv.inputs and (counts.get(x, 0) == 1 or x in made):
                graph.initializers.pop(x, None)
                consts.pop(x, None)
        made.update((wn, bname))
    remove_nodes(graph, drop)
    return graph
