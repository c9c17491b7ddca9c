"""A per-output-channel constant scale after a FusedMatMul, folded into its weight (ORT_ENABLE_ALL, after the layout
pass): FusedMatMul(A, B, bias) without activation or residual whose output only feeds a Mul by a float32 constant
s, a scalar or N values along the last axis (shape (N,), (1, N), ...: one that does not change the product's shape) --
a layer scale, as ConvNeXt's and CaiT's blocks write it, MatMul -> Add(bias) -> Mul(gamma) -- becomes one
FusedMatMul by B * s (each column n of B times s[n]) with bias * s, and an Add of a residual after the Mul then
joins it (the residual of fuse_matmul_bias). It runs after layout_nhwc, which takes away the Transposes torch.onnx
writes between the Mul and the residual Add of a channel-first model.

Rounding: the product is sum_k a_k fl(b_kn s_n) + fl(bias_n s_n) instead of fl(fl(sum_k a_k b_kn + bias_n) s_n):
one rounding of each scaled weight (2^-24 relative) in place of one of the result, the same class as the GEMM's
own error (K roundings); exact when s is a power of two. A bf16 session rounds B * s to bf16 instead of B: one
bf16 rounding either way."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, internal_op, is_f32, keeps_any, only_consumer, other_input
from onnxep.graph.passes.fuse_matmul_bias import _bias_vector, _known, _may_match


def _scale_vector(v, n, out_rank):
    """The constant `v` as N per-channel float32 factors when multiplying a rank-`out_rank` (..., N) product by it
    scales each output channel and leaves the shape unchanged (a scalar, or N values along the last axis), else
    None."""
    if v is not None and v.dtype == np.float32 and v.size == 1 and v.ndim <= out_rank:
        return np.full(n, v.reshape(()), np.float32)
    return _bias_vector(v, n, out_rank)


def fuse_matmul_scale(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"Mul", "Add"}):
        return graph
    f = Fusion(graph)
    consts, cons, outputs, names = f.consts, f.cons, f.outputs, f.names
    for fm in graph.nodes:
        if not internal_op(fm, "FusedMatMul") or fm.attrs.get("activation") or len(fm.inputs) > 3 \
                or f.taken((fm,)):
            continue
        a, w = fm.inputs[0], fm.inputs[1]
        b = fm.inputs[2] if len(fm.inputs) == 3 and fm.inputs[2] else None
        wv, bv = consts.get(w), consts.get(b) if b else None
        vt = graph.value_types.get(a)
        if wv is None or wv.dtype != np.float32 or wv.ndim != 2 or (b and bv is None) or vt is None \
                or vt.shape is None:
            continue
        trans_b = int(fm.attrs.get("trans_b") or 0)
        n = wv.shape[0] if trans_b else wv.shape[1]
        y = fm.outputs[0]
        mul = only_consumer(cons, outputs, y, "Mul")
        s = _scale_vector(consts.get(other_input(mul, y)), n, len(vt.shape)) if mul is not None else None
        if s is None:
            continue
        pattern, last, residual = [fm, mul], mul, None
        add = only_consumer(cons, outputs, mul.outputs[0], "Add")
        r = other_input(add, mul.outputs[0]) if add is not None else None
        if r is not None and r not in consts and is_f32(graph, r) \
                and _may_match(_known(graph, r), _known(graph, mul.outputs[0])):
            residual = r
            pattern.append(add)
            last = add
        if f.taken(pattern[1:]):
            continue
        base = fm.name or "matmul"
        wname = names.new(f"{base}_scaled_w")
        graph.initializers[wname] = consts[wname] = np.ascontiguousarray(
            (wv * (s[:, None] if trans_b else s[None, :])).astype(np.float32))
        bname = ""
        if bv is not None:
            bname = names.new(f"{base}_scaled_bias")
            graph.initializers[bname] = consts[bname] = (bv.reshape(n) * s).astype(np.float32)
        ins = [a, wname, bname] + ([residual] if residual else [])
        while ins and not ins[-1]:
            ins.pop()
        fused = make_node(graph, names.new(f"{base}_scaled"), "FusedMatMul", ins, [last.outputs[0]], dict(fm.attrs),
                          INTERNAL_DOMAIN)
        f.fuse(pattern, last, fused)
    return f.apply()
