"""Attention as torch.onnx writes it (ORT_ENABLE_EXTENDED; both the TorchScript and the dynamo exporter, symbolic
dims): runs before fuse_matmul_transpose, on the raw ops, and turns

    MatMul(Q', K') [-> Mul | Div by a scalar constant] [-> Add(., mask) | Where(cond, ., fill)]* -> Softmax(last axis)
        [-> Where(IsNaN(p), 0, p)] -> MatMul(., V') [-> Transpose]

into one com.onnxep FusedAttention (ops/onnxep/fused_attention.py), where Q' / K' are Q / K under any order of one
Transpose, float32 -> float32 Casts (also one after the softmax) and scalar-constant Mul / Div (the scale as one
factor on the scores, or its square root on each side, as scaled_dot_product_attention is exported), K transposed
by a Transpose (or already laid out as (.., D, N)), V' is V [under a Transpose], and each of K and V may be a
grouped-query repeat Reshape(Expand(Unsqueeze(kv, axis)), ..) of a tensor with fewer heads: the fused node reads
the shared head through that node's inputs (kv_expand: the Unsqueeze axis, the Expand shape and the Reshape shape
become inputs, checked at run time); and K (V) may be transposed the dynamo way, Reshape(Transpose(Reshape(x, s1),
(0, 2, 1)), s2) through a 3-D view (k_view: s1 and s2 become inputs, checked at run time). Masks: every Add of a
float value and every Where(bool condition, scores, scalar constant fill <= -1e30: -inf or float32's lowest, what
the exporters write) between the product and the softmax, in order (mask_kinds 0 / 1, mask_fills); past key /
value Concats are ordinary K / V producers. The NaN guard the exporters put after the softmax (fully masked rows ->
0) is the nan_zero flag.

Every absorbed intermediate value is read by the pattern only (not a graph output). Shapes are not required to be
known: the kernel checks them at run time and computes anything its native path cannot take through numpy with the
graph's exact semantics."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, is_f32, keeps_any, only_consumer
from onnxep.graph.passes.fuse_softmax_mask import _last_axis


_FILL_MAX = -1e30


def _rank(graph, name):
    vt = graph.value_types.get(name)
    if vt is None or vt.kind != "tensor" or vt.shape is None:
        return None
    return len(vt.shape)


def _type(graph, name):
    vt = graph.value_types.get(name)
    return None if vt is None or vt.kind != "tensor" else vt.type_str


def _scalar(consts, name):
    v = consts.get(name)
    if v is None or v.dtype != np.float32 or v.size != 1:
        return None
    return float(v.reshape(()))


class _Matcher:
    def __init__(self, graph, f):
        self.g, self.f = graph, f

    def single(self, name, node):
        """`name` is read by `node` only and is not a graph output."""
        return only_consumer(self.f.cons, self.f.outputs, name) is node

    def scale_of(self, node, x):
        """alpha when `node` is Mul(x, c) / Mul(c, x) / Div(x, c) by a scalar float32 constant, else None."""
        if len(node.inputs) != 2:
            return None
        if default_op(node, "Mul"):
            other = node.inputs[1] if node.inputs[0] == x else node.inputs[0] if node.inputs[1] == x else None
            c = None if other is None or other == x else _scalar(self.f.consts, other)
            return c
        if default_op(node, "Div") and node.inputs[0] == x and node.inputs[1] != x:
            c = _scalar(self.f.consts, node.inputs[1])
            return None if c is None or c == 0.0 else 1.0 / c
        return None

    def operand(self, name, user, rank, allow_expand):
        """Peel a Transpose and scalar Mul / Div (any order) [and a grouped-query repeat] off one product operand:
        (source, perm or None, alpha, nodes, expand) or None."""
        nodes, perm, alpha, x, consumer = [], None, 1.0, name, user
        while True:
            p = self.f.producer.get(x)
            if p is None or self.f.taken((p,)) or not self.single(x, consumer):
                break
            if default_op(p, "Transpose") and perm is None and len(p.inputs) == 1:
                pp = p.attrs.get("perm")
                pp = [int(i) for i in pp] if pp else list(range(rank))[::-1]
                # Transpose(T(src, perm)) then scale: the scale commutes; compose as the perm of the source
                perm = pp
                nodes.append(p)
                x, consumer = p.inputs[0], p
                continue
            if _noop_cast(self.g, p):
                nodes.append(p)
                x, consumer = p.inputs[0], p
                continue
            if default_op(p, "Mul") or default_op(p, "Div"):
                src = p.inputs[0] if default_op(p, "Div") or p.inputs[1] in self.f.consts else p.inputs[1]
                c = self.scale_of(p, src)
                if c is not None and src not in self.f.consts:
                    alpha *= c
                    nodes.append(p)
                    x, consumer = src, p
                    continue
            break
        if x in self.f.consts or not is_f32(self.g, x) or _rank(self.g, x) != rank:
            return None
        view = None
        if allow_expand:
            view = self.view_transpose(x, consumer, rank)
            if view is not None:
                nodes.extend(view[0])
                x, consumer, view = view[1], view[0][-1], view[2]
        expand = None
        if allow_expand:
            expand = self.repeat(x, consumer, rank)
            if expand is not None:
                nodes.extend(expand[0])
                x, expand = expand[1], expand[2]
        return x, perm, alpha, nodes, expand, view

    def view_transpose(self, x, consumer, rank):
        """Reshape(Transpose(Reshape(src, s1), (0, 2, 1)), s2): the dynamo exporter's transpose of the last two
        dims of a rank-4 operand through a 3-D view (the kernel checks per call that s1 merges the leading dims
        and s2 splits them back): (nodes in consumer order, src, (s1, s2, allowzero1, allowzero2))."""
        r2 = self.f.producer.get(x)
        if not default_op(r2, "Reshape") or len(r2.inputs) != 2 or not self.single(x, consumer):
            return None
        t = self.f.producer.get(r2.inputs[0])
        if not default_op(t, "Transpose") or not self.single(r2.inputs[0], r2):
            return None
        pt = t.attrs.get("perm")
        if _rank(self.g, t.inputs[0]) != 3 or (pt is not None and [int(i) for i in pt] != [0, 2, 1]):
            return None
        r1 = self.f.producer.get(t.inputs[0])
        if not default_op(r1, "Reshape") or len(r1.inputs) != 2 or not self.single(t.inputs[0], t):
            return None
        src = r1.inputs[0]
        if (src in self.f.consts or not is_f32(self.g, src) or _rank(self.g, src) != rank
                or self.f.taken((r1, t, r2))):
            return None
        if _type(self.g, r1.inputs[1]) != "tensor(int64)" or _type(self.g, r2.inputs[1]) != "tensor(int64)":
            return None
        az = [int(n.attrs.get("allowzero", 0) or 0) for n in (r1, r2)]
        return [r2, t, r1], src, (r1.inputs[1], r2.inputs[1], az)

    def repeat(self, x, consumer, rank):
        """Reshape(Expand(Unsqueeze(kv, axis), shape), rshape) feeding the operand: (nodes, kv, (axis, shape, rshape,
        allowzero)). When Shape / Size nodes read the repeated tensor too (the dynamo exporter takes its shape for
        the 3-D view of K's transpose), the three nodes stay for them (nodes empty) and fold_shape_subgraphs runs
        them on stand-ins: the attention reads kv, nothing makes the repeated copy."""
        r = self.f.producer.get(x)
        if not default_op(r, "Reshape") or len(r.inputs) != 2 or self.f.taken((r,)):
            return None
        shared = not self.single(x, consumer)
        if shared and (x in self.f.outputs or not all(
                c is consumer or (c.domain == "" and c.op_type in ("Shape", "Size") and c.inputs[0] == x)
                for c in self.f.cons.get(x, ()))):
            return None
        e = self.f.producer.get(r.inputs[0])
        if not default_op(e, "Expand") or not self.single(r.inputs[0], r) or self.f.taken((e,)):
            return None
        u = self.f.producer.get(e.inputs[0])
        if not default_op(u, "Unsqueeze") or not self.single(e.inputs[0], e) or self.f.taken((u,)):
            return None
        kv = u.inputs[0]
        if u.opset >= 13:
            if len(u.inputs) != 2 or u.inputs[1] not in self.f.consts:
                return None
            axes = [int(a) for a in np.asarray(self.f.consts[u.inputs[1]]).reshape(-1)]
        else:
            axes = [int(a) for a in (u.attrs.get("axes") or [])]
        if len(axes) != 1 or not is_f32(self.g, kv) or _rank(self.g, kv) != rank:
            return None
        axis = axes[0] % (rank + 1)
        if not (1 <= axis <= rank - 2):
            return None
        if _type(self.g, e.inputs[1]) != "tensor(int64)" or _type(self.g, r.inputs[1]) != "tensor(int64)":
            return None
        return [] if shared else [u, e, r], kv, (axis, e.inputs[1], r.inputs[1], int(r.attrs.get("allowzero", 0) or 0))


def fuse_exporter_attention(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"MatMul", "Softmax", "Add", "Transpose", "Mul", "Div", "Where", "IsNaN", "Reshape", "Expand",
                       "Unsqueeze"}):
        return graph
    f = Fusion(graph)
    m = _Matcher(graph, f)
    producer, cons, outputs, consts = f.producer, f.cons, f.outputs, f.consts
    for sm in graph.nodes:
        if not default_op(sm, "Softmax") or len(sm.inputs) != 1 or len(sm.outputs) != 1 or f.taken((sm,)):
            continue
        rank = _rank(graph, sm.inputs[0])
        if rank is None or rank < 3 or not _last_axis(sm, rank) or not is_f32(graph, sm.inputs[0]):
            continue
        # masks, walking back from the softmax to the first product
        pattern, masks, x, consumer = [sm], [], sm.inputs[0], sm
        alpha, mm1 = 1.0, None
        ok = True
        while ok:
            p = producer.get(x)
            if p is None or f.taken((p,)) or not m.single(x, consumer):
                ok = False
                break
            if default_op(p, "MatMul") and len(p.inputs) == 2:
                mm1 = p
                break
            if default_op(p, "Add") and len(p.inputs) == 2:
                a, b = p.inputs
                pick = [i for i, s in enumerate((a, b)) if _leads_to_matmul(producer, s)]
                if len(pick) != 1 or a == b:
                    ok = False
                    break
                s, mk = p.inputs[pick[0]], p.inputs[1 - pick[0]]
                r = _rank(graph, mk)
                if _type(graph, mk) != "tensor(float)" or r is None or r > rank:
                    ok = False
                    break
                masks.append((0, mk, 0.0))
                pattern.append(p)
                x, consumer = s, p
                continue
            if default_op(p, "Where") and len(p.inputs) == 3:
                c, s, fill = p.inputs
                fv = _scalar(consts, fill)
                r = _rank(graph, c)
                # the kernel adds the fill: exact (s + fill rounds to fill) only for -inf or a fill of float32's
                # lowest magnitudes, what the exporters write
                if (fv is None or fv > _FILL_MAX or _type(graph, c) != "tensor(bool)" or r is None or r > rank or s == c
                        or not _leads_to_matmul(producer, s)):
                    ok = False
                    break
                masks.append((1, c, fv))
                pattern.append(p)
                x, consumer = s, p
                continue
            if default_op(p, "Mul") or default_op(p, "Div"):
                # the scale on the scores: right after the product (a scale after a mask would scale the mask)
                src = p.inputs[0] if default_op(p, "Div") or p.inputs[1] in consts else p.inputs[1]
                c = m.scale_of(p, src)
                if c is not None and default_op(producer.get(src), "MatMul"):
                    alpha *= c
                    pattern.append(p)
                    x, consumer = src, p
                    continue
            ok = False
        if not ok or mm1 is None or _rank(graph, mm1.outputs[0]) != rank:
            continue
        qa = m.operand(mm1.inputs[0], mm1, rank, False)
        ka = m.operand(mm1.inputs[1], mm1, rank, True)
        if qa is None or ka is None or mm1.inputs[0] == mm1.inputs[1]:
            continue
        # after the softmax: the NaN guard, then the second product
        probs = sm.outputs[0]
        nan_zero = 0
        users = cons.get(probs, [])
        if probs in outputs:
            continue
        if len(users) == 1 and _noop_cast(graph, users[0]) and users[0].outputs[0] not in outputs:
            pattern.append(users[0])
            probs = users[0].outputs[0]
            users = cons.get(probs, [])
        if len(users) == 2:
            isn = next((u for u in users if default_op(u, "IsNaN")), None)
            wh = next((u for u in users if default_op(u, "Where")), None)
            if (isn is None or wh is None or only_consumer(cons, outputs, isn.outputs[0]) is not wh
                    or len(wh.inputs) != 3 or wh.inputs[0] != isn.outputs[0] or wh.inputs[2] != probs
                    or _scalar(consts, wh.inputs[1]) != 0.0 or wh.outputs[0] in outputs):
                continue
            pattern += [isn, wh]
            probs, nan_zero = wh.outputs[0], 1
            users = cons.get(probs, [])
        if len(users) != 1:
            continue
        mm2 = users[0]
        if not default_op(mm2, "MatMul") or len(mm2.inputs) != 2 or mm2.inputs[0] != probs or mm2.inputs[1] == probs:
            continue
        if f.taken([mm1, mm2] + pattern):
            continue
        va = m.operand(mm2.inputs[1], mm2, rank, True)
        if va is None or va[2] != 1.0 or _rank(graph, mm2.outputs[0]) != rank:
            continue
        last, perm_y = mm2, None
        t = only_consumer(cons, outputs, mm2.outputs[0], "Transpose")
        if t is not None and not f.taken((t,)) and _rank(graph, t.outputs[0]) == rank:
            p = t.attrs.get("perm")
            perm_y = [int(i) for i in p] if p else list(range(rank))[::-1]
            last = t
        nodes = pattern + [mm1, mm2] + qa[3] + ka[3] + va[3] + ([t] if last is t else [])
        if len({id(n) for n in nodes}) != len(nodes):
            continue
        attrs = {"alpha": alpha * qa[2] * ka[2]}
        for key, val in (("perm_q", qa[1]), ("perm_k", ka[1]), ("perm_v", va[1]), ("perm_y", perm_y)):
            if val is not None and val != list(range(rank)):
                attrs[key] = val
        inputs = [qa[0], ka[0], va[0]]
        if masks:
            attrs["mask_kinds"] = [k for k, _, _ in reversed(masks)]
            attrs["mask_fills"] = [fv for _, _, fv in reversed(masks)]
            inputs += [mk for _, mk, _ in reversed(masks)]
        if nan_zero:
            attrs["nan_zero"] = 1
        for key, ex in (("k_expand", ka[4]), ("v_expand", va[4])):
            if ex is not None:
                attrs[key] = ex[0]
                attrs[key + "_at"] = len(inputs)
                if ex[3]:
                    attrs[key + "_allowzero"] = 1
                inputs += [ex[1], ex[2]]
        for key, vw in (("k_view", ka[5]), ("v_view", va[5])):
            if vw is not None:
                attrs[key + "_at"] = len(inputs)
                attrs[key + "_allowzero"] = vw[2]
                inputs += [vw[0], vw[1]]
        node = make_node(graph, f.names.new(f"{mm2.name or 'attention'}_fused"), "FusedAttention", inputs,
                         [last.outputs[0]], attrs, INTERNAL_DOMAIN)
        f.fuse(nodes, last, node)
    return f.apply()


def _noop_cast(graph, node) -> bool:
    """Cast of a float32 value to float32 (the exporters' upcast of already-float32 attention operands)."""
    return (default_op(node, "Cast") and len(node.inputs) == 1 and int(node.attrs.get("to", 0) or 0) == 1
            and is_f32(graph, node.inputs[0]))


def _leads_to_matmul(producer, name, depth=6) -> bool:
    """`name` is computed from a MatMul through Add / Where / Mul / Div only (the scores side of a mask op)."""
    while depth > 0:
        p = producer.get(name)
        if p is None:
            return False
        if default_op(p, "MatMul"):
            return True
        if default_op(p, "Where") and len(p.inputs) == 3:
            name = p.inputs[1]
        elif (default_op(p, "Add") or default_op(p, "Mul") or default_op(p, "Div")) and len(p.inputs) == 2:
            a, b = p.inputs
            if _leads_to_matmul(producer, a, depth - 1):
                return True
            name = b
        else:
            return False
        depth -= 1
    return False
