"""ChannelAffine chains (after the layout pass): the per-channel Mul / Add by (C,) constants and the Relu that follow
a com.onnxep ChannelAffine (a channel-last BatchNormalization) fold into it, so a pre-activation block
(BatchNormalization -> Mul -> Add -> Relu -> Conv, as DenseNet's) reads and writes its activation once, not four
times:   a' = a * s, b' = b * s (Mul by s);   b' = b + t (Add of t);   activation = Relu.

Only through nodes whose input is the ChannelAffine's output and nothing else reads it."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import Names, absorb, consumer_counts, producers, remove_nodes
from onnxep.graph.passes._pattern import internal_op


def fuse_channel_affine(graph: Graph, ctx=None) -> Graph:
    consts = graph.constants
    counts = consumer_counts(graph)
    producer = producers(graph)
    names = Names(graph)
    drop = set()
    for node in graph.nodes:
        if node.domain != "" or node.op_type not in ("Mul", "Add", "Relu") or not node.inputs:
            continue
        x = next((i for i in node.inputs if i and i not in consts), None)
        aff = producer.get(x)
        if not internal_op(aff, "ChannelAffine") or counts.get(x, 0) != 1 \
                or aff.attrs.get("activation") or len([o for o in node.outputs if o]) != 1:
            continue
        a, b = consts[aff.inputs[1]].astype(np.float64), consts[aff.inputs[2]].astype(np.float64)
        if node.op_type == "Relu":
            aff.attrs = dict(aff.attrs, activation="Relu")
        else:
            if len(node.inputs) != 2:
                continue
            c = node.inputs[1] if node.inputs[0] == x else node.inputs[0]
            v = consts.get(c)
            if v is None or v.dtype != np.float32 or v.shape != a.shape:
                continue
            if node.op_type == "Mul":
                a, b = a * v, b * v
            else:
                b = b + v
            an, bn = names.new(f"{aff.name}_a"), names.new(f"{aff.name}_b")
            graph.initializers[an] = consts[an] = a.astype(np.float32)
            graph.initializers[bn] = consts[bn] = b.astype(np.float32)
            aff.inputs = [aff.inputs[0], an, bn]
        absorb(aff, node, producer, drop)
    remove_nodes(graph, drop)
    return graph
