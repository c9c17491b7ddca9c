"""Layout edges into convs (after the layout pass and the fusions): where a channel-last region starts or ends at a
dense NhwcConv, the conv reads the NCHW input itself (input_nchw) or writes its output NCHW (output_nchw), and the
Transpose there disappears. A conv reads NCHW as fast as NHWC (its A operand is packed from x either way), so a lone
Conv between NCHW ops costs no layout change at all.

- input: a Transpose to NHWC all of whose readers are dense NhwcConvs reading it as X;
- output: a dense NhwcConv without residual input whose only reader is a Transpose back to NCHW."""
from __future__ import annotations

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, consumer_counts, node_proto
from onnxep.graph.passes.layout_nhwc import TO_NCHW, TO_NHWC


def _dense_conv(node, consts) -> bool:
    if node.domain != INTERNAL_DOMAIN or node.op_type != "NhwcConv":
        return False
    w = consts.get(node.inputs[1])
    wshape = w.shape if w is not None else None
    return not (int(node.attrs.get("group", 1) or 1) > 1 and (wshape is None or wshape[1] == 1))


def _transpose(node, perm) -> bool:
    return node.domain == "" and node.op_type == "Transpose" and list(node.attrs.get("perm") or ()) == perm


def fold_layout_edges(graph: Graph, ctx=None) -> Graph:
    consts = graph.constants
    counts = consumer_counts(graph)
    readers: dict = {}
    for node in graph.nodes:
        for i, x in enumerate(node.inputs):
            if x:
                readers.setdefault(x, []).append((node, i))
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    drop = set()
    for node in graph.nodes:
        if _transpose(node, TO_NHWC):
            t = node.outputs[0]
            rs = readers.get(t, [])
            if rs and len(rs) == counts.get(t, 0) and all(i == 0 and _dense_conv(n, consts) for n, i in rs):
                for conv, _ in rs:
                    conv.inputs = [node.inputs[0]] + conv.inputs[1:]
                    conv.attrs = dict(conv.attrs, input_nchw=1)
                    conv.proto = node_proto(conv)
                drop.add(id(node))
        elif _transpose(node, TO_NCHW):
            conv = producer.get(node.inputs[0])
            if conv is not None and _dense_conv(conv, consts) and counts.get(node.inputs[0], 0) == 1 \
                    and not (len(conv.inputs) > 3 and conv.inputs[3]):
                conv.outputs = [node.outputs[0]]
                conv.attrs = dict(conv.attrs, output_nchw=1)
                conv.proto = node_proto(conv)
                drop.add(id(node))
    graph.nodes = [n for n in graph.nodes if id(n) not in drop]
    return graph
