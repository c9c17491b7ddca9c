"""Identity and inference Dropout removal (level 1, as onnxruntime's EliminateIdentity / EliminateDropout), and of a
Concat of one input (the torchscript exporter's copy of each past key of a decoder): such a node passes its input
through, so its readers read the input instead and the node goes. A Dropout goes only when it
cannot drop anything (opset 7 and up, where inference ignores the ratio; from opset 12 the training_mode input absent
or a constant false) and nothing reads its mask.

Kept: a node whose output is a graph output (the output keeps its name), whose output a subgraph reads by its outer
name, or whose input is not a tensor computed or fed in this graph (an Identity of a sequence or optional is left
to its kernel)."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.model import graph_outer_names
from onnxep.graph.passes._edit import remove_nodes


def _dropout_is_identity(node, consts, read) -> bool:
    if node.opset < 7:
        return False                    # Dropout-6 and older: is_test decides
    if len(node.outputs) > 1 and node.outputs[1] and node.outputs[1] in read:
        return False                    # the mask is used
    if len(node.inputs) > 2 and node.inputs[2]:
        t = consts.get(node.inputs[2])
        if t is None or np.asarray(t).size != 1 or bool(np.asarray(t).reshape(-1)[0]):
            return False                # training_mode computed, fed, or true
    return True


def remove_identity(graph: Graph, ctx=None) -> Graph:
    keep_ops = ctx.keep_ops if ctx is not None else frozenset()
    candidates = [node for node in graph.nodes
                  if node.domain == "" and node.op_type not in keep_ops and node.inputs and node.inputs[0]
                  and node.outputs and node.outputs[0]
                  and (node.op_type in ("Identity", "Dropout") or (node.op_type == "Concat" and len(node.inputs) == 1))]
    if not candidates:      # (most models: no maps of the whole graph built for nothing)
        return graph
    consts = graph.constants
    outputs = {n for n, _ in graph.outputs}
    read = {}                            # value -> the nodes reading it as an input
    in_subgraph = set()                  # values some subgraph reads by outer name
    for node in graph.nodes:
        for x in node.inputs:
            if x:
                read.setdefault(x, []).append(node)
        for g in node.subgraphs:
            in_subgraph |= graph_outer_names(g)
    drop = set()
    rename = {}                          # removed output -> the value it passes through
    for node in candidates:
        x, y = node.inputs[0], node.outputs[0]
        vt = graph.value_types.get(x)
        if y in outputs or y in in_subgraph or vt is None or vt.kind != "tensor":
            continue
        if node.op_type == "Dropout" and not _dropout_is_identity(node, consts, read):
            continue
        rename[y] = rename.get(x, x)
        drop.add(id(node))
    if not drop:
        return graph
    for node in graph.nodes:
        if id(node) in drop:
            continue
        if any(x in rename for x in node.inputs):
            node.inputs = tuple(rename.get(x, x) for x in node.inputs)
    remove_nodes(graph, drop)
    return graph
