"""MatMul + bias [+ activation] (ORT_ENABLE_EXTENDED): a MatMul by a constant 2-D float32 weight (K, N) -- or a
Gemm of a 2-D A by a constant weight (transA 0, alpha 1, transB either, C absent or a row-vector bias) -- whose
output only feeds an Add of a constant bias with N values along the last axis (shape (N,), (1, N), ...: one that
does not change the product's shape), optionally followed by an Add of a computed tensor of the product's (static
or symbolic; a symbolic dim may stand for any value: checked at run time) shape -- a residual -- and then optionally
by Relu or a Gelu (com.onnxep's, which fuse_gelu writes and which runs first, or the ONNX Gelu of opset 20 with
approximate "none", which torch.onnx writes at opset 20), becomes one com.onnxep FusedMatMul
(ops/onnxep/fused_mat_mul.py): the bias, the residual and Relu go into the packed SGEMM's epilogue, Gelu runs over
the product in place right after it -- one node and one output buffer instead of up to three elementwise passes over
it. The MatMul's A must be a float32 tensor of known rank >= 1. A Gemm is rewritten only when a residual or an
activation joins it, or when it has one row and a big B stored (N, K) (LONE_GEMV)."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, internal_op, is_f32, keeps_any, only_consumer, other_input


def _bias_vector(v, n, out_rank):
    """`v` as a flat (N,) float32 vector when adding it to a rank-`out_rank` (..., N) product broadcasts along the
    last axis only and leaves the shape unchanged, else None."""
    if v is None or v.dtype != np.float32 or v.ndim > out_rank or v.ndim == 0 or v.shape[-1] != n:
        return None
    if any(d != 1 for d in v.shape[:-1]):
        return None
    return np.ascontiguousarray(v.reshape(n))


def _erf_gelu(node):
    """The ONNX Gelu (opset 20) in its exact form, approximate "none": what torch.onnx writes for nn.GELU() at
    opset 20, the same function as com.onnxep Gelu."""
    return default_op(node, "Gelu") and node.attrs.get("approximate", "none") == "none"


def _known(graph, name):
    """The shape of `name` when every dim is an int or a named (symbolic) dim, else None: two such shapes that are
    equal are equal at run time (shape inference gives a dim one name throughout)."""
    vt = graph.value_types.get(name)
    if vt is None or vt.shape is None or any(not isinstance(d, (int, str)) for d in vt.shape):
        return None
    return tuple(vt.shape)


def _may_match(rs, ys):
    """Whether a residual of shape rs may have the product's shape ys: both known, of one rank, every dim pair equal
    or one of them symbolic (a TorchScript export's Reshape with run-time shapes names the product's dims afresh:
    (unk__20, unk__21, 64) against the residual's (batch, 50, 64)). FusedMatMul checks at run time and adds a
    residual of another shape with numpy's broadcasting, as the Add did."""
    return rs is not None and ys is not None and len(rs) == len(ys) and all(
        a == b or isinstance(a, str) or isinstance(b, str) for a, b in zip(rs, ys))


# A lone batch-1 Gemm with B stored (N, K) of at least LONE_GEMV_BYTES -- a classifier head with no activation after
# it (AlexNet's, VGG's, ResNet-50's last layer) -- becomes a FusedMatMul too, whose GEMV reads the weight as stored,
# as the Gemm + Relu layers before it do, instead of the packed SGEMM's one-row path, which gains little from a second
# thread there: light AlexNet's 1000 x 4096 head 493 -> 418 us at 1 thread, 287 -> 213 at 2; ResNet-50's 1000 x 2048
# 297 -> 247, 321 -> 193. The GEMV reads short rows worse: ShuffleNet's 1000 x 544 head (2.2 MB) went 54-58 -> 68-74
# us at 1 thread (the run 1.02-1.08x) while the GEMV was a Python step of the run loop; as a compiled step (RL_GEMV)
# the whole run still took 1.017x the process CPU with the bar at 0 (in-process A/B, 1 thread; Inception-v1
# and DenseNet-121's 1000 x 1024 heads 0.999 / 1.005), so smaller weights stay Gemms; 4 MiB is twice the largest
# per-core L2 of the machines onnxep targets (Sapphire Rapids, 2 MiB). LONE_GEMV: a switch for in-process A/B
# measurements and tests.
LONE_GEMV = True
LONE_GEMV_BYTES = 4 << 20


def _one_row(graph, a):
    """Whether `a` has one row by its static shape (all dims ints, their product over all but the last 1)."""
    s = _known(graph, a)
    return s is not None and len(s) >= 1 and all(isinstance(d, int) for d in s) and int(np.prod(s[:-1])) == 1


def _gemm_as_matmul(graph, gemm, consts):
    """(A, W, trans_b, bias (N,) or None) when a Gemm is a MatMul of a 2-D float32 A by a constant weight plus a
    row-vector bias: transA 0, alpha 1, C absent, or a constant that beta * C broadcasts along the rows only."""
    at = gemm.attrs
    if int(at.get("transA") or 0) != 0 or float(at.get("alpha") if at.get("alpha") is not None else 1.0) != 1.0:
        return None
    a, w = gemm.inputs[0], gemm.inputs[1]
    wv = consts.get(w)
    if wv is None or wv.dtype != np.float32 or wv.ndim != 2 or a in consts or not is_f32(graph, a) \
            or len(graph.value_types[a].shape) != 2:
        return None
    trans_b = int(at.get("transB") or 0)
    n = wv.shape[0] if trans_b else wv.shape[1]
    beta = float(at.get("beta") if at.get("beta") is not None else 1.0)
    c = gemm.inputs[2] if len(gemm.inputs) == 3 and gemm.inputs[2] else None
    if c is None or beta == 0.0:
        return a, w, trans_b, None
    cv = consts.get(c)
    if cv is None or cv.dtype != np.float32:
        return None
    if cv.size == 1:
        bias = np.full(n, cv.reshape(()), np.float32)
    elif cv.ndim >= 1 and cv.shape[-1] == n and all(d == 1 for d in cv.shape[:-1]) and cv.ndim <= 2:
        bias = np.ascontiguousarray(cv.reshape(n))
    else:
        return None
    return a, w, trans_b, bias if beta == 1.0 else (bias * np.float32(beta)).astype(np.float32)


def fuse_matmul_bias(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"MatMul", "Gemm", "Add", "Relu"}):
        return graph
    f = Fusion(graph)
    consts, cons, outputs, names = f.consts, f.cons, f.outputs, f.names
    for mm in graph.nodes:
        if f.taken((mm,)):
            continue
        if default_op(mm, "MatMul") and len(mm.inputs) == 2:
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
            trans_b, pattern, last = 0, [mm, add], add
        elif default_op(mm, "Gemm") and len(mm.inputs) in (2, 3) and len(mm.outputs) == 1:
            g = _gemm_as_matmul(graph, mm, consts)
            if g is None:
                continue
            a, w, trans_b, bias = g
            b = mm.inputs[2] if len(mm.inputs) == 3 else ""
            pattern, last = [mm], mm
        else:
            continue
        act, residual = "", None
        nxt = only_consumer(cons, outputs, last.outputs[0])
        r = other_input(nxt, last.outputs[0]) if default_op(nxt, "Add") else None
        if r is not None and r not in consts and is_f32(graph, r) \
                and _may_match(_known(graph, r), _known(graph, last.outputs[0])):
            residual = r
            pattern.append(nxt)
            last = nxt
            nxt = only_consumer(cons, outputs, nxt.outputs[0])
        if nxt is not None and len(nxt.inputs) == 1 and len(nxt.outputs) == 1 and (
                default_op(nxt, "Relu") or internal_op(nxt, "Gelu") or _erf_gelu(nxt)):
            pattern.append(nxt)
            last, act = nxt, nxt.op_type
        if (len(pattern) == 1 and not (LONE_GEMV and trans_b and consts[w].nbytes >= LONE_GEMV_BYTES
                                       and _one_row(graph, a))) or f.taken(pattern[1:]):
            # a lone Gemm: nothing to fuse, unless FusedMatMul's GEMV takes it (see LONE_GEMV); or a node after it
            # went to an earlier match (Add(Gemm_a, Gemm_b): Gemm_a took the Add with Gemm_b's output as its
            # residual, so Gemm_b stays a Gemm)
            continue
        bname = b
        if bias is not None and (b not in consts or consts[b].shape != bias.shape
                                 or not np.array_equal(consts[b], bias)):
            bname = names.new(f"{mm.name or 'matmul'}_bias")
            graph.initializers[bname] = consts[bname] = bias
        attrs = {"activation": act} if act else {}
        if trans_b:
            attrs["trans_b"] = 1
        ins = [a, w] + ([bname] if bias is not None else [""]) + ([residual] if residual else [])
        while ins and not ins[-1]:
            ins.pop()
        fused = make_node(graph, names.new(f"{mm.name or 'matmul'}_fused"), "FusedMatMul", ins, [last.outputs[0]],
                          attrs, INTERNAL_DOMAIN)
        f.fuse(pattern, last, fused)
    return f.apply()
