"""DequantizeLinear(x) -> Conv(DequantizeLinear(w) [, DequantizeLinear(b)]) [-> Relu | Clip] -> QuantizeLinear -> one
QLinearConv (ONNX), as onnxruntime's QDQ selector / action transformer (core/optimizer/qdq_transformer/selectors_actions:
ConvNodeGroupSelector, QDQ::Conv -> QLinearConv) folds a QDQ model's conv: the conv then runs on the 8-bit tensors
(ops/quant/q_linear_conv.py; the layout pass turns it into com.onnxep QLinearConvNhwc, the native channel-last int8
conv of onnxep/_native/qconv.h) instead of in float32 between QuantizeDequantize nodes.

Matched (runs before constant folding, which would turn the weight's DequantizeLinear into a float32 constant):
- x's DequantizeLinear: 8-bit input, constant float32 scale and zero point of one element;
- w's DequantizeLinear: a constant 4-D int8 / uint8 weight, its float32 scale of one element or one per output
  channel (axis 0), its zero point the same shape (or none);
- b (optional): the DequantizeLinear of a constant int32 vector with zero point 0 (or none) and scale x_scale *
  w_scale (within 1e-5, as the quantizer writes it): its int32 values are QLinearConv's bias, as onnxruntime's action
  takes them;
- the Conv's one reader a QuantizeLinear to 8 bits with a constant float32 scale and zero point of one element (its
  output no graph output), or a Relu / Clip (constant bounds) read only by that QuantizeLinear when, quantized, the
  bound the activation sets is outside the output type's range (Relu with the zero point at the type's minimum:
  what onnxruntime's quantizer writes for a Conv + Relu), so the saturation alone computes it.
A DequantizeLinear nothing reads any more goes too.

MatMul: DequantizeLinear(x) -> MatMul(., DequantizeLinear(w)) -> QuantizeLinear -> one QLinearMatMul (ONNX), as
onnxruntime's MatMulNodeGroupSelector / QDQ::MatMul action folds it when both DequantizeLinear inputs and the
QuantizeLinear output are present (without the QuantizeLinear it makes MatMulIntegerToFloat: left float32 here). x's
DequantizeLinear as the conv's; w's a constant 2-D (K, N) int8 / uint8 weight (int8 when x is int8: onnxruntime's
rule), its float32 scale of one element or one per column (axis 1), its zero point the same shape (or none); the
MatMul's one reader a per-tensor 8-bit QuantizeLinear (its output no graph output). The QLinearMatMul runs on the
native int8 GEMM (ops/quant/q_linear_mat_mul.py: qgemm.h, b packed once). Gemm (onnxruntime's QGemm, with its int32
bias) is not folded. Measured (2026-11-27, loaded 2-core machine, in-process alternating rounds, medians, folded vs
disabled_optimizers=["fuse_qdq_ops"], quantize_static QDQ of the zoo's encoders, 12 linear layers each): bert.dynamo
(K, N 64 / 256) 0.974x at 1 thread, 0.914x at 2; minilm_sentence.dynamo (128 / 512) 0.649x at 1, 0.810x at 2: every
size the zoo shows gains, so MIN_MATMUL_WEIGHT is 0.

Add: DequantizeLinear(a), DequantizeLinear(b) -> Add -> QuantizeLinear -> com.onnxep QLinearAdd
(ops/onnxep/q_linear_add.py), as onnxruntime's BinaryNodeGroupSelector folds it into its com.microsoft QLinearAdd:
both DequantizeLinear per tensor with constant parameters (one operand may be a constant: a bias), the Add's one reader
a per-tensor QuantizeLinear (its output no graph output), a, b and y of one 8-bit type. QLinearAdd computes the four
nodes' float32 operations in their order, so it is bit-identical to the unfolded graph (onnxruntime's kernel forms
(a - za) * (sa / ys) + (b - zb) * (sb / ys) and can differ from both by one step). An Add whose output is 4-D is left
alone: the layout pass (layout_nhwc.py) does not know QLinearAdd, so in a channel-last region (a residual Add between
QLinearConvNhwc nodes) it would cut the region with Transposes. Off by default (FOLD_ADD): measured (2026-11-27,
in-process alternating rounds, medians, FOLD_ADD on vs off, both with the MatMul fold; outputs bit-identical)
bert.dynamo QDQ 1.039x / 1.062x at 1 thread, 1.058x at 2, minilm_sentence.dynamo 1.028x / 0.988x at 1, 1.018x at 2:
its 18 folds remove 22 steps, but on these (3, 11, 64..512) tensors a step's work is a few hundred ns and the
kernel's per-element float32 division (QuantizeLinear's x / scale, kept for bit-identity) costs what the removed
passes did. One-node graphs gain from 4096 x 64 elements (a residual Add 278 vs 410 us, a bias Add 225 vs 251 us).

Only where the int8 conv is faster than the float32 one between QuantizeDequantize nodes (the unfolded graph): a
dense conv whose products per output pixel, (C / group) * kh * kw * M, reach MIN_MACS_PER_PIXEL; depthwise convs only
with FOLD_DEPTHWISE. Measured (onnxep, 1 thread, one QDQ conv, folded vs not, medians of 40 alternating runs,
2026-11-27, loaded 2-core machine, AVX-512 VNNI): 3x3 64 -> 64 at 56x56 (36864 per pixel) 1010 vs 1146 us, 1x1 64 ->
256 (16384) 1356 vs 1957 us, 3x3 256 -> 256 at 14x14 (589824) 834 vs 1463 us, while 7x7/2 3 -> 16 (2352) took 400 vs
233 us, 1x1 16 -> 16 (256) 54 vs 31 us, 3x3 16 -> 32 (4608) 90 vs 72 us: the int8 path's per-pixel packing and
requantization cost more than its products save on small reductions. Depthwise convs after a folded 1x1 (so
channel-last, folded vs float32, whole two-conv graph): 144 channels at 28x28 288 vs 234 us, 96 at 56x56 stride 2 363
vs 371, 3x64 at 32x32 531 vs 414, 576 at 14x14 299 vs 261: none is folded by default.

Numerics: the folded conv accumulates (x - x_zp)(w - w_zp) exactly in int32 and requantizes once (float32(acc +
b) * x_scale * w_scale / y_scale, round half to even, + y_zp, saturate: MLAS's, as onnxruntime runs the QLinearConv
its own action makes), where the unfolded graph computed the conv in float32 and quantized its sum: an output can
differ by one step where the float32 sum rounds across a .5 boundary. Test oracle: onnxruntime on the QDQ graph."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, make_node
from onnxep.graph.passes._pattern import Fusion, default_op, keeps_any

_BYTES = (np.dtype(np.int8), np.dtype(np.uint8))
_RANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}
#: a dense conv folds from this many products per output pixel ((C / group) * kh * kw * M; see the docstring)
MIN_MACS_PER_PIXEL = 8192
#: whether depthwise convs fold (see the docstring)
FOLD_DEPTHWISE = False
#: a MatMul folds from this many weight elements K * N (see the docstring)
MIN_MATMUL_WEIGHT = 0
#: whether Adds fold into com.onnxep QLinearAdd (see the docstring: measured no faster, off)
FOLD_ADD = False


def per_tensor_params(node, consts):
    """(scale, zero point name or '', 8-bit dtype) of a per-tensor Quantize / DequantizeLinear with constant float32
    parameters, or None (the dtype from the zero point, uint8 without one)."""
    if len(node.inputs) < 2 or int(node.attrs.get("block_size") or 0) or node.attrs.get("output_dtype"):
        return None
    s = consts.get(node.inputs[1])
    if s is None or s.dtype != np.float32 or s.size != 1:
        return None
    zn = node.inputs[2] if len(node.inputs) > 2 else ""
    if zn:
        z = consts.get(zn)
        if z is None or z.dtype not in _BYTES or z.size != 1:
            return None
        return s, zn, z.dtype, int(z.reshape(()))
    return s, "", np.dtype(np.uint8), 0


def _weight(node, consts):
    """(w, scale, zero point name or '') of the weight's DequantizeLinear, or None."""
    if len(node.inputs) < 2 or int(node.attrs.get("block_size") or 0):
        return None
    w, s = consts.get(node.inputs[0]), consts.get(node.inputs[1])
    if w is None or w.ndim != 4 or w.dtype not in _BYTES or s is None or s.dtype != np.float32:
        return None
    zn = node.inputs[2] if len(node.inputs) > 2 else ""
    z = consts.get(zn) if zn else None
    if zn and (z is None or z.dtype != w.dtype or z.shape != s.shape):
        return None
    if s.size != 1:
        axis = int(node.attrs.get("axis", 1))
        if s.ndim != 1 or axis % 4 != 0 or s.shape[0] != w.shape[0]:
            return None
    return w, s, zn


def _bias(node, consts, xs, ws):
    """The int32 constant of the bias's DequantizeLinear when its scale is x_scale * w_scale, or None."""
    if node is None or not default_op(node, "DequantizeLinear") or len(node.inputs) < 2:
        return None
    b, s = consts.get(node.inputs[0]), consts.get(node.inputs[1])
    if b is None or b.dtype != np.int32 or b.ndim != 1 or s is None or s.dtype != np.float32:
        return None
    zn = node.inputs[2] if len(node.inputs) > 2 else ""
    if zn and (consts.get(zn) is None or np.any(consts[zn] != 0)):
        return None
    want = (xs.reshape(()) * ws).astype(np.float32).reshape(-1)
    sv = s.reshape(-1)
    if sv.size not in (1, want.size) or want.size not in (1, b.size):
        return None
    return node.inputs[0] if np.allclose(sv, want, rtol=1e-5, atol=0) else None


def _act_redundant(act, consts, ys, yz, ydt):
    """Whether Relu / Clip before the QuantizeLinear changes nothing after its saturation (see the docstring)."""
    lo_t, hi_t = _RANGES[ydt]
    if act.op_type == "Relu":
        return yz <= lo_t
    if act.op_type != "Clip":
        return False
    if "min" in act.attrs or "max" in act.attrs:       # opset < 11: bounds as attributes
        lo, hi = act.attrs.get("min"), act.attrs.get("max")
    else:
        names = list(act.inputs[1:]) + ["", ""]
        vals = []
        for n in names[:2]:
            if not n:
                vals.append(None)
                continue
            v = consts.get(n)
            if v is None or v.size != 1:
                return False
            vals.append(float(v.reshape(())))
        lo, hi = vals
    s = float(ys.reshape(()))
    qlo = -np.inf if lo is None else np.rint(np.float32(lo) / np.float32(s)) + yz
    qhi = np.inf if hi is None else np.rint(np.float32(hi) / np.float32(s)) + yz
    return qlo <= lo_t and qhi >= hi_t


def _matmul_weight(node, consts, x_dtype):
    """(w, scale, zero point name or '') of a MatMul weight's DequantizeLinear: a constant 2-D 8-bit (K, N) w (int8
    when x is int8, as onnxruntime's selector asks), its float32 scale of one element or one per column (axis 1), its
    zero point the same shape (or none); else None."""
    if len(node.inputs) < 2 or int(node.attrs.get("block_size") or 0):
        return None
    w, s = consts.get(node.inputs[0]), consts.get(node.inputs[1])
    if w is None or w.ndim != 2 or w.dtype not in _BYTES or s is None or s.dtype != np.float32:
        return None
    if x_dtype == np.int8 and w.dtype != np.int8:
        return None
    zn = node.inputs[2] if len(node.inputs) > 2 else ""
    z = consts.get(zn) if zn else None
    if zn and (z is None or z.dtype != w.dtype or z.shape != s.shape):
        return None
    if s.size != 1 and (s.ndim != 1 or int(node.attrs.get("axis", 1)) % 2 != 1 or s.shape[0] != w.shape[1]):
        return None
    return w, s, zn


def _fold_matmuls(graph, f, dqs):
    """DequantizeLinear(x) -> MatMul(., DequantizeLinear(w)) -> QuantizeLinear -> QLinearMatMul (see the docstring);
    records the folds in f and the DequantizeLinear nodes that may go in dqs."""
    consts, cons, outputs, producer, names = f.consts, f.cons, f.outputs, f.producer, f.names
    for mm in graph.nodes:
        if not default_op(mm, "MatMul") or len(mm.inputs) != 2 or len(mm.outputs) != 1 or f.taken((mm,)):
            continue
        dx, dw = producer.get(mm.inputs[0]), producer.get(mm.inputs[1])
        if not default_op(dx, "DequantizeLinear") or not default_op(dw, "DequantizeLinear") \
                or dx.inputs[0] in consts:
            continue
        px = per_tensor_params(dx, consts)
        if px is None:
            continue
        xs, xzn, xdt, _ = px
        wq = _matmul_weight(dw, consts, xdt)
        if wq is None or wq[0].shape[0] * wq[0].shape[1] < MIN_MATMUL_WEIGHT:
            continue
        w, ws, wzn = wq
        y = mm.outputs[0]
        readers = cons.get(y, ())
        if y in outputs or len(readers) != 1 or not default_op(readers[0], "QuantizeLinear"):
            continue
        q = readers[0]
        py = per_tensor_params(q, consts)
        if py is None or len(q.outputs) != 1 or f.taken((q,)):
            continue
        node = make_node(graph, names.new(f"{mm.name or 'matmul'}_qlinear"), "QLinearMatMul",
                         [dx.inputs[0], dx.inputs[1], xzn, dw.inputs[0], dw.inputs[1], wzn, q.inputs[1], py[1]],
                         q.outputs, {})
        f.fuse([mm, q], q, node)
        for d in (dx, dw):
            dqs[id(d)] = d


def _fold_adds(graph, f, dqs):
    """DequantizeLinear(a), DequantizeLinear(b) -> Add -> QuantizeLinear -> com.onnxep QLinearAdd (see the
    docstring); records the folds in f and the DequantizeLinear nodes that may go in dqs."""
    consts, cons, outputs, producer, names = f.consts, f.cons, f.outputs, f.producer, f.names
    vts = graph.value_types
    for add in graph.nodes:
        if not default_op(add, "Add") or len(add.inputs) != 2 or len(add.outputs) != 1 or f.taken((add,)):
            continue
        y = add.outputs[0]
        vt = vts.get(y)
        if vt is None or getattr(vt, "shape", None) is None or len(vt.shape) == 4:
            continue      # (a 4-D Add may sit in a channel-last region: see the docstring)
        da, db = producer.get(add.inputs[0]), producer.get(add.inputs[1])
        if not default_op(da, "DequantizeLinear") or not default_op(db, "DequantizeLinear"):
            continue
        pa, pb = per_tensor_params(da, consts), per_tensor_params(db, consts)
        if pa is None or pb is None or (da.inputs[0] in consts and db.inputs[0] in consts):
            continue
        readers = cons.get(y, ())
        if y in outputs or len(readers) != 1 or not default_op(readers[0], "QuantizeLinear"):
            continue
        q = readers[0]
        py = per_tensor_params(q, consts)
        if py is None or len(q.outputs) != 1 or f.taken((q,)) or not pa[2] == pb[2] == py[2]:
            continue
        attrs = {}
        for side, p in (("a", pa), ("b", pb), ("y", py)):
            attrs.update({f"{side}_scale": float(p[0].reshape(())), f"{side}_zero_point": int(p[3]),
                          f"{side}_signed": int(p[2] == np.int8)})
        node = make_node(graph, names.new(f"{add.name or 'add'}_qlinear"), "QLinearAdd",
                         [da.inputs[0], db.inputs[0]], q.outputs, attrs, INTERNAL_DOMAIN)
        f.fuse([add, q], q, node)
        for d in (da, db):
            dqs[id(d)] = d


def fuse_qdq_ops(graph: Graph, ctx=None) -> Graph:
    if keeps_any(ctx, {"QuantizeLinear", "DequantizeLinear", "Conv", "QLinearConv", "MatMul", "QLinearMatMul", "Add"}):
        return graph
    f = Fusion(graph)
    consts, cons, outputs, producer, names = f.consts, f.cons, f.outputs, f.producer, f.names
    dqs = {}
    for conv in graph.nodes:
        if not default_op(conv, "Conv") or len(conv.inputs) < 2 or len(conv.outputs) != 1 or f.taken((conv,)):
            continue
        dx, dw = producer.get(conv.inputs[0]), producer.get(conv.inputs[1])
        db = producer.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        if not default_op(dx, "DequantizeLinear") or not default_op(dw, "DequantizeLinear"):
            continue
        px, wq = per_tensor_params(dx, consts), _weight(dw, consts)
        if px is None or wq is None or dx.inputs[0] in consts:
            continue
        xs, xzn, xdt, _ = px
        w, ws, wzn = wq
        group = int(conv.attrs.get("group", 1) or 1)
        if group > 1 and w.shape[1] == 1:
            if not FOLD_DEPTHWISE:
                continue
        elif w.shape[1] * w.shape[2] * w.shape[3] * w.shape[0] // group < MIN_MACS_PER_PIXEL:
            continue
        y = conv.outputs[0]
        if y in outputs:
            continue
        readers = cons.get(y, ())
        act = None
        if len(readers) == 1 and readers[0] is not None and readers[0].op_type in ("Relu", "Clip") \
                and readers[0].domain == "":
            act = readers[0]
            if act.outputs[0] in outputs:
                continue
            readers = cons.get(act.outputs[0], ())
        if len(readers) != 1 or not default_op(readers[0], "QuantizeLinear"):
            continue
        q = readers[0]
        py = per_tensor_params(q, consts)
        if py is None or len(q.outputs) != 1 or f.taken((q,)) or (act is not None and f.taken((act,))):
            continue
        ys, yzn, ydt, yz = py
        if act is not None and not _act_redundant(act, consts, ys, yz, ydt):
            continue
        bias = ""
        if db is not None:
            bias = _bias(db, consts, xs, ws)
            if bias is None:
                continue
        ins = [dx.inputs[0], dx.inputs[1], xzn, dw.inputs[0], dw.inputs[1], wzn, q.inputs[1], yzn]
        if bias:
            ins.append(bias)
        attrs = {k: v for k, v in conv.attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape",
                                                               "pads", "strides")}
        node = make_node(graph, names.new(f"{conv.name or 'conv'}_qlinear"), "QLinearConv", ins, q.outputs, attrs)
        f.fuse([conv, q] + ([act] if act is not None else []), q, node)
        for d in (dx, dw, db):
            if d is not None:
                dqs[id(d)] = d
    _fold_matmuls(graph, f, dqs)
    if FOLD_ADD:
        _fold_adds(graph, f, dqs)
    for d in dqs.values():      # gone once nothing else reads them
        if all(u is not None and f.taken((u,)) for u in cons.get(d.outputs[0], ())) and d.outputs[0] not in outputs:
            f._drop.add(id(d))
    return f.apply()
