"""Pointwise then depthwise (after fuse_nhwc_conv): an NhwcConv 1x1 whose one reader is a depthwise NhwcConv becomes
one com.onnxep NhwcPwDw (ops/onnxep/nhwc_pw_dw.py), which computes the pointwise output band by band into a buffer
that stays in the L2 instead of writing it whole and reading it back (an inverted-residual block's expansion:
MobileNetV2's 112x112 16 -> 96, 4.8 MB).

Taken only where that output is larger than this core's L2 (_kernels.pwdw_intermediate_bytes_min) per image, its
height, width and channels static (the batch may be symbolic):
a smaller one stays in cache between the two convs, and the bands' extra calls then cost more than they save (kernel
alone, 2 threads, MobileNetV2's 28x28 32 -> 192 -> depthwise 3x3, 602 KB: 1.22x the time of the two convs). The
pointwise conv: 1x1, stride 1, no padding, group 1, no residual, any activation; the depthwise one: one output channel
per input channel (group = channels), no residual, its activation as fuse_nhwc_conv gave it; both weights constant."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels
from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, consumer_counts, make_node, producers
from onnxep.graph.passes.fuse_nhwc_conv import _depthwise

#: the depthwise conv's attributes NhwcPwDw takes over (ops/onnxep/nhwc_pw_dw.py reads the same)
DW_ATTRS = ("auto_pad", "group", "kernel_shape", "strides", "dilations", "pads", "activation", "activation_params")


def _conv(node) -> bool:
    return node is not None and node.domain == INTERNAL_DOMAIN and node.op_type == "NhwcConv" \
        and 2 <= len(node.inputs) <= 3 and len(node.outputs) == 1


def _pointwise(node, consts) -> bool:
    a = node.attrs
    w = consts.get(node.inputs[1])
    return (w is not None and w.ndim == 4 and w.shape[2:] == (1, 1) and int(a.get("group", 1) or 1) == 1
            and all(s == 1 for s in (a.get("strides") or (1, 1))) and all(d == 1 for d in (a.get("dilations") or (1, 1)))
            and not any(a.get("pads") or ()) and (a.get("auto_pad") or "NOTSET") in ("NOTSET", "VALID"))


def _one_per_channel(node, consts, channels) -> bool:
    """A depthwise conv (fuse_nhwc_conv._depthwise) with one output channel per input channel, of `channels`."""
    return (_depthwise(node, consts) and consts[node.inputs[1]].shape[0] == channels
            and int(node.attrs.get("group", 1) or 1) == channels)


def fuse_pw_dw(graph: Graph, ctx=None) -> Graph:
    counts = consumer_counts(graph)
    consts = graph.constants
    vt = graph.value_types
    producer = producers(graph)
    min_bytes = _kernels.pwdw_intermediate_bytes_min()
    fused = set()       # ids of the pointwise convs an NhwcPwDw took in
    out = []
    for node in graph.nodes:
        pw = producer.get(node.inputs[0]) if _conv(node) else None
        mid = node.inputs[0] if pw is not None else None
        if pw is None or not _conv(pw) or counts.get(mid, 0) != 1 or not _pointwise(pw, consts):
            out.append(node)
            continue
        w1 = consts[pw.inputs[1]]
        t = vt.get(mid)
        shape = t.shape if t is not None else None
        if (not _one_per_channel(node, consts, w1.shape[0]) or shape is None or len(shape) != 4
                or not all(isinstance(d, int) for d in shape[1:]) or 4 * int(np.prod(shape[1:])) <= min_bytes):
            out.append(node)
            continue
        attrs = {k: node.attrs[k] for k in DW_ATTRS if node.attrs.get(k) is not None}
        if pw.attrs.get("activation"):
            attrs["pw_activation"] = pw.attrs["activation"]
            if pw.attrs.get("activation_params"):
                attrs["pw_activation_params"] = list(pw.attrs["activation_params"])
        b1 = pw.inputs[2] if len(pw.inputs) > 2 else ""
        b2 = node.inputs[2] if len(node.inputs) > 2 else ""
        f = make_node(graph, node.name + "_pw_dw", "NhwcPwDw", (pw.inputs[0], pw.inputs[1], b1, node.inputs[1], b2),
                      node.outputs, attrs, INTERNAL_DOMAIN)
        fused.add(id(pw))
        out.append(f)
    if fused:
        graph.nodes = [n for n in out if id(n) not in fused]
    return graph
