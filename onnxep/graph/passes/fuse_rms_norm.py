"""RMSNorm (ORT_ENABLE_EXTENDED, as onnxruntime's SimplifiedLayerNormFusion): the decomposed root-mean-square norm
torch.onnx writes for LLaMA / Mistral / Qwen2 / Gemma RMSNorm and T5LayerNorm becomes one RMSNormalization node
(opset 23 semantics):

    [x = Cast(h, to=float)]         h float32 (an identity Cast: the node reads h, and so do the Cast's other
                                    readers -- torchscript's residual Add -- when none is a subgraph; the Cast goes)
    ms = ReduceMean(Pow(x, 2) | Mul(x, x), trailing axes, keepdims=1)
    r  = Sqrt(Add(ms, eps))
    y  = Mul(x, Div(1, r)) | Mul(x, Reciprocal(r)) | Div(x, r)
    [-> Cast(., to=float)]          (identity)
    [-> Mul(., weight)]             weight a float32 constant over the normalized dims (broadcast to them)
      ->  RMSNormalization(x, weight, axis=first reduced axis, epsilon=eps)

eps and 2 / 1 float32 single values; x a float32 tensor of known rank (dims may be symbolic). Without a weight the
scale is ones. With default-domain opset >= 23 the node is the standard RMSNormalization; below it, onnxep's
com.onnxep RMSNormalization (ops/onnxep/rms_norm.py), the same kernel. Every intermediate must be read by the
pattern only (and not be a graph output)."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import (Fusion, default_op, is_f32, keeps_any, only_consumer, other_input,
                                          scalar_const)
from onnxep.graph.passes.fuse_layernorm import _axes, _trailing_axis


def _identity_cast(node, graph, name) -> bool:
    """`node` is Cast(name, to=float) of a float32 `name`."""
    return default_op(node, "Cast") and int(node.attrs.get("to") or 0) == 1 and is_f32(graph, name)


def _scale_fits(w, shape, axis) -> bool:
    """w (float32) broadcasts to the normalized dims shape[axis:] (symbolic dims: w's dim must be 1 there)."""
    if w.dtype != np.float32 or w.ndim > len(shape) - axis:
        return False
    for wd, d in zip(w.shape[::-1], shape[::-1]):
        if wd != 1 and wd != d:
            return False
    return True


def _match(sq, graph, f):
    """(x, axis, eps, weight name or None, [pattern nodes], last) around the Pow / Mul squaring x, else None."""
    consts, cons, outputs = f.consts, f.cons, f.outputs
    if len(sq.inputs) != 2:
        return None
    x = sq.inputs[0]
    if default_op(sq, "Pow"):
        if not scalar_const(consts, sq.inputs[1], 2.0):
            return None
    elif not (default_op(sq, "Mul") and sq.inputs[1] == x):
        return None
    if x in consts or not is_f32(graph, x):
        return None
    shape = tuple(graph.value_types[x].shape)
    rm = only_consumer(cons, outputs, sq.outputs[0], "ReduceMean")
    axes = _axes(rm, consts) if rm is not None else None
    axis = _trailing_axis(axes, len(shape)) if axes else None
    if axis is None:
        return None
    add = only_consumer(cons, outputs, rm.outputs[0], "Add")
    ev = consts.get(other_input(add, rm.outputs[0])) if add is not None else None
    if ev is None or ev.dtype != np.float32 or ev.size != 1:
        return None
    sqrt = only_consumer(cons, outputs, add.outputs[0], "Sqrt")
    if sqrt is None:
        return None
    r = sqrt.outputs[0]
    user = only_consumer(cons, outputs, r)
    pattern = [sq, rm, add, sqrt]
    if default_op(user, "Div") and list(user.inputs) == [x, r]:
        pattern.append(user)
        last = user
    else:
        if default_op(user, "Reciprocal"):
            inv = user
        elif default_op(user, "Div") and user.inputs[1] == r and scalar_const(consts, user.inputs[0], 1.0):
            inv = user
        else:
            return None
        mul = only_consumer(cons, outputs, inv.outputs[0], "Mul")
        if mul is None or other_input(mul, inv.outputs[0]) != x:
            return None
        pattern += [inv, mul]
        last = mul
    # x is read by the square and the product only (nothing else may need it: it stays, but as the node's input)
    nxt = only_consumer(cons, outputs, last.outputs[0])
    if nxt is not None and _identity_cast(nxt, graph, last.outputs[0]):
        pattern.append(nxt)
        last = nxt
    weight = None
    wm = only_consumer(cons, outputs, last.outputs[0], "Mul")
    if wm is not None:
        w = other_input(wm, last.outputs[0])
        if w in consts and _scale_fits(consts[w], shape, axis):
            weight = w
            pattern.append(wm)
            last = wm
    return x, axis, float(ev.reshape(())), weight, pattern, last


# the shape-subgraph pass (run after this one) sees through the node this pass writes: its output shape follows
# from its input shapes


def fuse_rms_norm(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Pow", "ReduceMean", "Add", "Sqrt", "Div", "Reciprocal", "Mul", "Cast"}):
        return graph
    f = Fusion(graph)
    standard = graph.opsets.get("", graph.opsets.get("ai.onnx", 0)) >= 23
    for node in graph.nodes:
        if node.domain != "" or node.op_type not in ("Pow", "Mul") or f.taken((node,)):
            continue
        m = _match(node, graph, f)
        if m is None or f.taken(m[4]):
            continue
        x, axis, eps, weight, pattern, last = m
        shape = graph.value_types[x].shape
        if weight is None:
            if any(not isinstance(d, int) for d in shape[axis:]):
                continue
            weight = f.names.new(f"{last.name or 'rmsnorm'}_scale")
            graph.initializers[weight] = f.consts[weight] = np.ones(shape[axis:], np.float32)
        # an identity Cast feeding x: read its input instead (the Cast goes when the pattern was its only reader)
        src = f.producer.get(x)
        inp = x
        if (src is not None and _identity_cast(src, graph, src.inputs[0]) and x not in f.outputs
                and not f.taken((src,))):
            mine = {id(n) for n in pattern}
            others = [u for u in f.cons.get(x, []) if id(u) not in mine]
            if all(x in u.inputs and not u.subgraphs for u in others):
                inp = src.inputs[0]
                pattern = pattern + [src]
                for u in others:          # (torchscript: the residual Add reads the Cast too) the Cast is exact
                    u.inputs = tuple(inp if i == x else i for i in u.inputs)
        rms = make_node(graph, f.names.new(f"{last.name or 'rmsnorm'}_rmsnorm"), "RMSNormalization",
                        [inp, weight], [last.outputs[0]], {"axis": axis, "epsilon": eps},
                        "" if standard else INTERNAL_DOMAIN)
        f.fuse(pattern, last, rms)
    return f.apply()
