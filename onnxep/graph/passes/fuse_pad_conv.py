"""A zero Pad of the spatial dims before a Conv becomes the Conv's own padding (ORT_ENABLE_BASIC; onnxruntime's
PadFusion). What exporters write for TensorFlow-style "same" padding (transformers' MobileNetV2 / V3 and EfficientNet
pad each strided or depthwise conv with an explicit Pad): without the fusion the Pad is a copy of the whole feature
map per conv, and an NCHW Pad between two channel-last convs keeps Transposes around it.

Folded when: the Pad is constant mode (the default) with no value or a zero value, its pads (attribute before opset
11, a constant input after; the opset-18 axes input constant or absent) are non-negative and zero on the batch and
channel dims, its output is read by that Conv alone (and is no graph output), and the Conv has explicit pads
(auto_pad NOTSET or absent) or none (auto_pad VALID: torch's exports of transformers' EfficientNet pad that way,
asymmetrically, before each strided conv). The Conv's pads grow by the Pad's (auto_pad becomes NOTSET); the Conv reads
the Pad's input."""
from __future__ import annotations

import dataclasses

from onnxep.graph.ir import Graph
from onnxep.graph.passes._pattern import Fusion, default_op, keeps_any, only_consumer


def _spatial_pads(pad, consts, rank):
    """(begin pads, end pads) of the spatial dims of a rank-`rank` tensor when `pad` zero-pads only those, else None."""
    mode = pad.attrs.get("mode") or "constant"
    if mode != "constant":
        return None
    if pad.opset < 11:
        pads = pad.attrs.get("pads")
        if pads is None or float(pad.attrs.get("value") or 0.0) != 0.0:
            return None
        pads = [int(p) for p in pads]
        axes = list(range(rank))
    else:
        ins = list(pad.inputs) + [""] * (4 - len(pad.inputs))
        if ins[1] not in consts:
            return None
        if ins[2]:
            value = consts.get(ins[2])
            if value is None or value.size > 1 or (value.size == 1 and float(value.reshape(-1)[0]) != 0.0):
                return None
        if ins[3]:
            a = consts.get(ins[3])
            if a is None:
                return None
            axes = [int(x) + rank if int(x) < 0 else int(x) for x in a.reshape(-1)]
        else:
            axes = list(range(rank))
        pads = [int(p) for p in consts[ins[1]].reshape(-1)]
    n = len(axes)
    if len(pads) != 2 * n or len(set(axes)) != n or any(not 0 <= a < rank for a in axes) or min(pads, default=0) < 0:
        return None
    begin, end = [0] * rank, [0] * rank
    for i, a in enumerate(axes):
        begin[a], end[a] = pads[i], pads[n + i]
    if begin[0] or begin[1] or end[0] or end[1]:
        return None
    return begin[2:], end[2:]


def fuse_pad_conv(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Pad", "Conv"}):
        return graph
    f = Fusion(graph)
    consts = f.consts
    for pad in graph.nodes:
        if not default_op(pad, "Pad") or not pad.inputs or not pad.inputs[0] or f.taken((pad,)):
            continue
        conv = only_consumer(f.cons, f.outputs, pad.outputs[0], "Conv")
        if conv is None or conv.inputs[0] != pad.outputs[0] or f.taken((conv,)) or len(conv.inputs) < 2:
            continue
        auto_pad = conv.attrs.get("auto_pad") or "NOTSET"
        if auto_pad not in ("NOTSET", "VALID"):
            continue
        w = consts.get(conv.inputs[1])
        vt = graph.value_types.get(conv.inputs[1])
        rank = w.ndim if w is not None else (len(vt.shape) if vt is not None and vt.shape is not None else None)
        if rank is None or rank < 3:
            continue
        sp = _spatial_pads(pad, consts, rank)
        if sp is None:
            continue
        begin, end = sp
        r = rank - 2
        old = [0] * (2 * r) if auto_pad == "VALID" else [int(p) for p in (conv.attrs.get("pads") or [0] * (2 * r))]
        if len(old) != 2 * r:
            continue
        attrs = dict(conv.attrs, auto_pad="NOTSET")
        attrs["pads"] = [old[i] + begin[i] for i in range(r)] + [old[r + i] + end[i] for i in range(r)]
        fused = dataclasses.replace(conv, inputs=(pad.inputs[0],) + tuple(conv.inputs[1:]), attrs=attrs)
        f.fuse([pad, conv], conv, fused)
    return f.apply()


def _slice_drops(sl, consts, rank, out_shape):
    """{spatial axis: outputs dropped at its end} of a Slice that keeps a prefix of some spatial dims of a
    rank-`rank` tensor of shape out_shape (starts 0, steps 1, constant inputs; a positive end needs that dim static),
    and nothing else; else None."""
    if sl.opset < 10 or len(sl.inputs) < 3:
        return None
    ins = list(sl.inputs) + [""] * (5 - len(sl.inputs))
    vals = [consts.get(x) if x else None for x in ins[1:5]]
    starts, ends = vals[0], vals[1]
    if starts is None or ends is None or (ins[3] and vals[2] is None) or (ins[4] and vals[3] is None):
        return None
    starts, ends = [int(v) for v in starts.reshape(-1)], [int(v) for v in ends.reshape(-1)]
    axes = [int(v) for v in vals[2].reshape(-1)] if ins[3] else list(range(len(starts)))
    steps = [int(v) for v in vals[3].reshape(-1)] if ins[4] else [1] * len(starts)
    if not (len(starts) == len(ends) == len(axes) == len(steps)) or any(s != 1 for s in steps):
        return None
    dropped = {}
    for st, en, ax in zip(starts, ends, axes):
        ax = ax + rank if ax < 0 else ax
        if not 2 <= ax < rank or ax in dropped or st != 0:
            return None
        dim = out_shape[ax]
        if en < 0 and en >= -(1 << 31):    # "all but the last -en": known whatever the dim (an audio length)
            dropped[ax] = -en
        elif isinstance(dim, int) and 0 < en < dim:
            dropped[ax] = dim - en
        elif isinstance(dim, int) and en >= dim:
            dropped[ax] = 0
        else:
            return None
    return dropped


def fuse_conv_slice(graph: Graph, ctx=None) -> Graph:
    """A Conv whose output only a Slice reads, keeping a prefix of spatial dims (starts 0, steps 1) -- the trailing
    output dropped after a "same"-padded conv with an even kernel (wav2vec2's positional conv, Conv1d with padding
    k/2 then [..., :-1]) -- computes that prefix itself: each dim's end pad shrinks by (dropped outputs) * stride,
    when it has that much (the output of a conv is a function of its own window only, so the kept outputs do not
    change). The Conv writes the Slice's output; the copy goes. Explicit pads (auto_pad NOTSET) only; a negative end
    ("all but the last d", what torch writes) needs no static shape. (One case differs: an input so short that the
    conv has exactly d outputs -- the Slice would give an empty tensor, the smaller conv refuses the input.)"""
    if keeps_any(ctx, {"Slice", "Conv"}):
        return graph
    f = Fusion(graph)
    consts = f.consts
    for conv in graph.nodes:
        if not default_op(conv, "Conv") or len(conv.outputs) != 1 or f.taken((conv,)):
            continue
        if (conv.attrs.get("auto_pad") or "NOTSET") != "NOTSET":
            continue
        sl = only_consumer(f.cons, f.outputs, conv.outputs[0], "Slice")
        vt = graph.value_types.get(conv.outputs[0])
        if sl is None or sl.inputs[0] != conv.outputs[0] or f.taken((sl,)) or vt is None or vt.shape is None:
            continue
        shape, rank = tuple(vt.shape), len(vt.shape)
        if rank < 3:
            continue
        drops = _slice_drops(sl, consts, rank, shape)
        r = rank - 2
        pads = [int(p) for p in (conv.attrs.get("pads") or [0] * (2 * r))]
        strides = [int(s) for s in (conv.attrs.get("strides") or [1] * r)]
        if drops is None or not drops or len(pads) != 2 * r or len(strides) != r:
            continue
        new = list(pads)
        for ax, d in drops.items():
            new[r + ax - 2] -= d * strides[ax - 2]
            if isinstance(shape[ax], int) and shape[ax] - d < 1:
                new[r + ax - 2] = -1     # nothing kept: leave the Slice (an empty result)
        if min(new) < 0:
            continue
        fused = dataclasses.replace(conv, outputs=(sl.outputs[0],), attrs=dict(conv.attrs, pads=new))
        f.fuse([conv, sl], sl, fused)
    return f.apply()
