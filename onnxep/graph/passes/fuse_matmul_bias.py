"""MatMul + bias [+ activation] (ORT_ENABLE_EXTENDED): a MatMul by a constant 2-D float32 weight (K, N) whose
output only feeds an Add of a constant bias with N values along the last axis (shape (N,), (1, N), ...: one that
does not change the product's shape), optionally followed by an Add of a computed tensor of the product's (static)
(static or symbolic) shape -- a residual -- and then optionally by Relu or a com.onnxep Gelu (fuse_gelu runs first), becomes one
com.onnxep FusedMatMul (ops/fused_mat_mul.py): the bias, the residual and Relu go into the packed SGEMM's epilogue,
Gelu runs over the product in place right after it -- one node and one output buffer instead of up to three
elementwise passes over it. The MatMul's A must be a float32 tensor of known rank >= 1."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, Names, make_node
from onnxep.graph.passes._pattern import consumers, default_op, is_f32, only_consumer, other_input, replace_nodes


def _bias_vector(v, n, out_rank):
    """`v` as a flat (N,) float32 vector when adding it to a rank-`out_rank` (..., N) product broadcasts along the
    last axis only and leaves the shape unchanged, else None."""
    if v is None or v.dtype != np.float32 or v.ndim > out_rank or v.ndim == 0 or v.shape[-1] != n:
        return None
    if any(d != 1 for d in v.shape[:-1]):
        return None
    return np.ascontiguousarray(v.reshape(n))


def _known(graph, name):
    """The shape of `name` when every dim is an int or a named (symbolic) dim, else None: two such shapes that are
    equal are equal at run time (shape inference gives a dim one name throughout)."""
    vt = graph.value_types.get(name)
    if vt is None or vt.shape is None or any(not isinstance(d, (int, str)) for d in vt.shape):
        return None
    return tuple(vt.shape)


def fuse_matmul_bias(graph: Graph, ctx=None) -> Graph:
    keep = ctx.keep_ops if ctx is not None else frozenset()
    if keep & {"MatMul", "Add", "Relu"}:
        return graph
    consts = graph.constants
    cons = consumers(graph)
    outputs = {n for n, _ in graph.outputs}
    names = Names(graph)
    drop, replace = set(), {}
    for mm in graph.nodes:
        if not default_op(mm, "MatMul") or len(mm.inputs) != 2 or id(mm) in drop:
            continue
        a, w = mm.inputs
        wv = consts.get(w)
        if wv is None or wv.dtype != np.float32 or wv.ndim != 2 or a in consts or not is_f32(graph, a):
            continue
        rank = len(graph.value_types[a].shape)
        if rank < 1:
            continue
        add = only_consumer(cons, outputs, mm.outputs[0], "Add")
        b = other_input(add, mm.outputs[0]) if add is not None else None
        bias = _bias_vector(consts.get(b), wv.shape[1], rank)   # the product has A's rank
        if bias is None:
            continue
        pattern, last, act, residual = [mm, add], add, "", None
        nxt = only_consumer(cons, outputs, add.outputs[0])
        r = other_input(nxt, add.outputs[0]) if default_op(nxt, "Add") else None
        if r is not None and r not in consts and is_f32(graph, r) and _known(graph, r) is not None \
                and _known(graph, r) == _known(graph, add.outputs[0]):
            residual = r
            pattern.append(nxt)
            last = nxt
            nxt = only_consumer(cons, outputs, nxt.outputs[0])
        if nxt is not None and len(nxt.inputs) == 1 and len(nxt.outputs) == 1 and (
                default_op(nxt, "Relu") or (nxt.domain == INTERNAL_DOMAIN and nxt.op_type == "Gelu")):
            pattern.append(nxt)
            last, act = nxt, nxt.op_type
        bname = b
        if consts[b].shape != bias.shape:
            bname = names.new(f"{mm.name or 'matmul'}_bias")
            graph.initializers[bname] = consts[bname] = bias
        attrs = {"activation": act} if act else {}
        fused = make_node(graph, names.new(f"{mm.name or 'matmul'}_fused"), "FusedMatMul",
                          [a, w, bname] + ([residual] if residual else []), [last.outputs[0]], attrs, INTERNAL_DOMAIN)
        for n in pattern:
            drop.add(id(n))
        replace[id(last)] = fused
    if replace:
        replace_nodes(graph, drop, replace)
    return graph
