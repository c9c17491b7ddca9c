"""GroupNorm (ORT_ENABLE_EXTENDED, as onnxruntime's GroupNorm fusion): the chain both torch exporters write for
torch.nn.GroupNorm becomes one com.onnxep GroupNorm node (ops/onnxep/group_norm.py),

    Reshape(x, (N | 0, G, -1)) -> InstanceNormalization(., s, b) -> Reshape(., Shape(x) | x's shape)
    [-> Mul(., gamma)] [-> Add(., beta)] [-> Sigmoid -> Mul(y, .) | com.onnxep Silu]
      ->  GroupNorm(x, gamma', beta', groups=G, epsilon, activation="" | "Silu")

with gamma'[c] = s[g] * gamma[c], beta'[c] = b[g] * gamma[c] + beta[c] (g = c // (C / G)): x float32 (N, C, ...) of
rank >= 3 with a known channel count C, s / b constant (G,), gamma / beta constants with one value per channel (or a
single value). Every intermediate (the Shape included) read by the pattern only, and not a graph output. A trailing
SiLU is x * Sigmoid(x) on the affine result, read by those two nodes only (fuse_silu leaves 4-D conv features alone,
so the exporters' form is what is found there).

On a conv net the layout pass leaves the GroupNorm NCHW between Transposes; fuse_group_norm_nhwc (level 3, after
it) folds them in: the GroupNorm writes channel-last for the next conv, and reads channel-last when its input
Transpose has no other reader."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph, ValueType
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, internal_op, is_f32, keeps_any, only_consumer, \
    other_input
from onnxep.graph.passes.fuse_conv_affine import per_channel


def _split_reshape(node, consts, shape, groups_hint=None):
    """G when `node` reshapes a tensor of `shape` (N, C, ...) to (N, G, C / G * S), else None."""
    if not default_op(node, "Reshape") or len(node.inputs) < 2 or int(node.attrs.get("allowzero") or 0):
        return None
    t = consts.get(node.inputs[1])
    if t is None or t.ndim != 1 or t.size != 3 or not np.issubdtype(t.dtype, np.integer):
        return None
    n0, g, k = (int(v) for v in t)
    C = shape[1]
    if g <= 0 or C % g:
        return None
    sp = shape[2:]
    S = int(np.prod(sp)) if all(isinstance(d, int) for d in sp) else None
    if k == -1:
        return g if n0 == 0 or (isinstance(shape[0], int) and n0 == shape[0]) else None
    if S is not None and k == C // g * S and (n0 in (0, -1) or (isinstance(shape[0], int) and n0 == shape[0])):
        return g
    return None


def _match(inn, graph, f):
    """(x, groups, epsilon, gamma (C,), beta (C,) float64, silu, pattern nodes, last) around an
    InstanceNormalization, else None."""
    consts, producer, cons, outputs = f.consts, f.producer, f.cons, f.outputs
    if len(inn.inputs) != 3 or len(inn.outputs) != 1:
        return None
    r1 = producer.get(inn.inputs[0])
    if r1 is None or only_consumer(cons, outputs, r1.outputs[0]) is not inn:
        return None
    x = r1.inputs[0]
    vt = graph.value_types.get(x)
    if not is_f32(graph, x) or len(vt.shape) < 3 or not isinstance(vt.shape[1], int) or x in consts:
        return None
    shape, C = tuple(vt.shape), vt.shape[1]
    G = _split_reshape(r1, consts, shape)
    if G is None:
        return None
    s, b = consts.get(inn.inputs[1]), consts.get(inn.inputs[2])
    if s is None or b is None or s.shape != (G,) or b.shape != (G,) or s.dtype != np.float32 \
            or b.dtype != np.float32:
        return None
    eps = float(inn.attrs.get("epsilon", 1e-5) if inn.attrs.get("epsilon") is not None else 1e-5)
    r2 = only_consumer(cons, outputs, inn.outputs[0], "Reshape")
    if r2 is None or len(r2.inputs) < 2 or int(r2.attrs.get("allowzero") or 0):
        return None
    pattern = [r1, inn, r2]
    sh = producer.get(r2.inputs[1])
    if r2.inputs[1] in consts:
        t = consts[r2.inputs[1]]
        if not all(isinstance(d, int) for d in shape) or t.ndim != 1 or [int(v) for v in t] != list(shape):
            return None
    elif default_op(sh, "Shape") and sh.inputs[0] == x and sh.attrs.get("start") in (None, 0) \
            and sh.attrs.get("end") is None:
        if only_consumer(cons, outputs, sh.outputs[0]) is r2:
            pattern.insert(0, sh)
    else:
        return None
    rank = len(shape)
    gidx = np.arange(C) // (C // G)
    gamma = s.astype(np.float64)[gidx]
    beta = b.astype(np.float64)[gidx]
    last, cur = r2, r2.outputs[0]
    mul = only_consumer(cons, outputs, cur, "Mul")
    if mul is not None and other_input(mul, cur) in consts:
        gm = per_channel(consts[other_input(mul, cur)], C, rank)
        if gm is not None:
            gamma, beta = gamma * gm, beta * gm
            pattern.append(mul)
            last, cur = mul, mul.outputs[0]
    add = only_consumer(cons, outputs, cur, "Add")
    if add is not None and other_input(add, cur) in consts:
        bt = per_channel(consts[other_input(add, cur)], C, rank)
        if bt is not None:
            beta = beta + bt
            pattern.append(add)
            last, cur = add, add.outputs[0]
    silu = False
    users = cons.get(cur, [])
    if cur not in outputs and len(users) == 1 and internal_op(users[0], "Silu") and len(users[0].inputs) == 1 \
            and float(users[0].attrs.get("alpha", 1.0)) == 1.0:
        pattern.append(users[0])
        last, silu = users[0], True
    elif cur not in outputs and len(users) == 2:
        sig = next((u for u in users if default_op(u, "Sigmoid")), None)
        m = next((u for u in users if default_op(u, "Mul") and sorted(u.inputs) == sorted([cur, sig.outputs[0]])),
                 None) if sig is not None else None
        if m is not None and only_consumer(cons, outputs, sig.outputs[0]) is m:
            pattern += [sig, m]
            last, silu = m, True
    return x, G, eps, gamma, beta, silu, pattern, last


def _const(graph, f, base, value):
    name = f.names.new(base)
    graph.initializers[name] = f.consts[name] = value
    graph.value_types[name] = ValueType.of_array(value)
    return name


def fuse_group_norm(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"InstanceNormalization", "Reshape", "Mul", "Add", "Sigmoid", "Shape"}):
        return graph
    f = Fusion(graph)
    for node in graph.nodes:
        if not default_op(node, "InstanceNormalization") or f.taken((node,)):
            continue
        m = _match(node, graph, f)
        if m is None or f.taken(m[6]):
            continue
        x, G, eps, gamma, beta, silu, pattern, last = m
        base = node.name or "group_norm"
        gn = make_node(graph, f.names.new(f"{base}_group_norm"), "GroupNorm",
                       [x, _const(graph, f, f"{base}_gamma", gamma.astype(np.float32)),
                        _const(graph, f, f"{base}_beta", beta.astype(np.float32))],
                       [last.outputs[0]], {"groups": G, "epsilon": eps, "activation": "Silu" if silu else ""},
                       INTERNAL_DOMAIN)
        f.fuse(pattern, last, gn)
        graph.value_types[last.outputs[0]] = graph.value_types[x]    # (shape inference may not see through Shape)
    return f.apply()


TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def _transpose(node, perm) -> bool:
    return default_op(node, "Transpose") and list(node.attrs.get("perm") or ()) == perm


def fuse_group_norm_nhwc(graph: Graph, ctx=None) -> Graph:
    """After the layout pass: a 4-D GroupNorm whose result only a Transpose to channel-last reads writes channel-last
    itself (output_channels_last 1: the Transpose goes); when its input is also a Transpose from channel-last read
    by it alone, it reads the channel-last value (channels_last 1: both Transposes go)."""
    if keeps_any(ctx, {"Transpose"}):
        return graph
    f = Fusion(graph)
    for node in graph.nodes:
        if not internal_op(node, "GroupNorm") or int(node.attrs.get("channels_last", 0) or 0) \
                or node.attrs.get("output_channels_last") is not None:
            continue
        vt = graph.value_types.get(node.inputs[0])
        if vt is None or vt.shape is None or len(vt.shape) != 4:
            continue
        out_t = only_consumer(f.cons, f.outputs, node.outputs[0], "Transpose")
        if out_t is None or not _transpose(out_t, TO_NHWC) or f.taken((out_t,)):
            continue
        in_t = f.producer.get(node.inputs[0])
        attrs = dict(node.attrs)
        x, drop = node.inputs[0], [node, out_t]
        if _transpose(in_t, TO_NCHW) and only_consumer(f.cons, f.outputs, node.inputs[0]) is node \
                and not f.taken((in_t,)):
            x = in_t.inputs[0]
            attrs["channels_last"] = 1
            drop.append(in_t)
        else:
            attrs["output_channels_last"] = 1
        gn = make_node(graph, node.name, "GroupNorm", [x, *node.inputs[1:]], [out_t.outputs[0]], attrs,
                       INTERNAL_DOMAIN)
        f.fuse(drop, out_t, gn)
    return f.apply()
