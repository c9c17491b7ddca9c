"""DynamicQuantizeLinear -> MatMulInteger -> Cast(float) -> Mul(scale_a * scale_b) [-> Add(bias)] -> com.onnxep
DynamicQuantizeMatMul (ops/onnxep/dynamic_quantize_mat_mul.py), what onnxruntime's DynamicQuantizeMatMulFusion and
MatMulIntegerToFloatFusion make of quantize_dynamic's output (ORT_ENABLE_EXTENDED).

Matched: a MatMulInteger whose A and a_zero_point are outputs 0 and 2 of one DynamicQuantizeLinear of x, whose B is a
constant 2-D int8 / uint8 (K, N) weight with a constant b_zero_point of 1 or N values (or none), whose int32 output
only feeds a Cast to float, which only feeds a Mul by a value computed as Mul(DynamicQuantizeLinear's scale, a
constant float32 b_scale of 1 or N values) in either operand order; then, optionally, an Add of a constant float32
bias of N values along the last axis. The fused node reads x itself and quantizes it as DynamicQuantizeLinear does
(one quantization per consumer: a DynamicQuantizeLinear feeding several MatMulIntegers, as Q / K / V, is computed per
fused node -- a pass over A, small beside the GEMM). The DynamicQuantizeLinear and the scales' Mul go once nothing else
reads them."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, keeps_any, only_consumer, other_input

INT8S = (np.dtype(np.int8), np.dtype(np.uint8))


def _per_col(v, n):
    return v is not None and v.ndim <= 1 and v.size in (1, n)


def _bias(v, n):
    if v is None or v.dtype != np.float32 or v.ndim == 0 or v.shape[-1] != n or any(d != 1 for d in v.shape[:-1]):
        return None
    return np.ascontiguousarray(v.reshape(n))


def fuse_dynamic_quantize_matmul(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"DynamicQuantizeLinear", "MatMulInteger", "Cast", "Mul", "Add"}):
        return graph
    f = Fusion(graph)
    consts, cons, outputs, names, producer = f.consts, f.cons, f.outputs, f.names, f.producer
    dqls = {}
    for mmi in graph.nodes:
        if not default_op(mmi, "MatMulInteger") or len(mmi.inputs) < 2 or len(mmi.outputs) != 1 or f.taken((mmi,)):
            continue
        q, w = mmi.inputs[0], mmi.inputs[1]
        dql = producer.get(q)
        if not default_op(dql, "DynamicQuantizeLinear") or len(dql.outputs) != 3 or dql.outputs[0] != q:
            continue
        za = mmi.inputs[2] if len(mmi.inputs) > 2 else ""
        if za != dql.outputs[2]:
            continue
        wv = consts.get(w)
        if wv is None or wv.dtype not in INT8S or wv.ndim != 2:
            continue
        n = wv.shape[1]
        zb = mmi.inputs[3] if len(mmi.inputs) > 3 else ""
        if zb and (consts.get(zb) is None or consts[zb].dtype != wv.dtype or not _per_col(consts[zb], n)):
            continue
        cast = only_consumer(cons, outputs, mmi.outputs[0], "Cast")
        if cast is None or int(cast.attrs.get("to") or 0) != 1:
            continue
        mul = only_consumer(cons, outputs, cast.outputs[0], "Mul")
        s = other_input(mul, cast.outputs[0]) if mul is not None else None
        smul = producer.get(s) if s is not None else None
        if not default_op(smul, "Mul") or len(smul.inputs) != 2:
            continue
        bs = other_input(smul, dql.outputs[1])
        bsv = consts.get(bs) if bs is not None else None
        if bsv is None or bsv.dtype != np.float32 or not _per_col(bsv, n) or s in outputs:
            continue
        pattern, last, bias = [mmi, cast, mul], mul, ""
        add = only_consumer(cons, outputs, mul.outputs[0], "Add")
        b = other_input(add, mul.outputs[0]) if add is not None else None
        bv = _bias(consts.get(b), n) if b is not None else None
        if bv is not None:
            pattern.append(add)
            last = add
            if consts[b].shape == bv.shape:
                bias = b
            else:
                bias = names.new(f"{mmi.name or 'matmul'}_bias")
                graph.initializers[bias] = consts[bias] = bv
        if f.taken(pattern):
            continue
        if len(cons.get(s, ())) == 1:
            pattern.append(smul)
        bname = bs
        if bsv.ndim != 1 or bsv.size != 1 and bsv.shape != (n,):
            bname = names.new(f"{mmi.name or 'matmul'}_b_scale")
            graph.initializers[bname] = consts[bname] = np.ascontiguousarray(bsv.reshape(-1))
        ins = [dql.inputs[0], w, bname, zb, bias]
        while not ins[-1]:
            ins.pop()
        fused = make_node(graph, names.new(f"{mmi.name or 'matmul'}_dq"), "DynamicQuantizeMatMul", ins,
                          [last.outputs[0]], {}, INTERNAL_DOMAIN)
        f.fuse(pattern, last, fused)
        dqls[id(dql)] = dql
    for dql in dqls.values():   # gone once every reader of its outputs went into a fused node
        if not any(o in outputs for o in dql.outputs) and all(
                f.taken((u,)) for o in dql.outputs for u in cons.get(o, ())):
            f._drop.add(id(dql))
    return f.apply()
