"""Channel-last layout (ORT_ENABLE_LAYOUT and up): 2-D Conv, pooling and LRN nodes the cpu backend runs become their
com.onnxep NHWC twins, and activations stay NHWC between them. The layout changes only where an NCHW value meets an
NHWC op or the other way round (Transpose nodes), never per op:

- a value keeps at most one NHWC twin (one Transpose in, however many NHWC readers it has);
- elementwise ops whose data inputs are all NHWC twins (same 4-D shape; unary ops, Add/Sum/Mul/..., com.onnxep Silu,
  per-tensor QuantizeLinear / DequantizeLinear and com.onnxep QuantizeDequantize: a QDQ model's chain stays NHWC),
  4-D operands that broadcast to the output (a squeeze-excite's (N, C, 1, 1) scale), or one twin and a constant with
  one value per channel (re-laid out as a (C,) vector), Concat on the channel axis, and
  BatchNormalization in inference mode (as a ChannelAffine) run on the twins and produce twins, so residual and dense
  blocks stay NHWC end to end;
- a value is transposed back to NCHW once, just before the first node that needs it in NCHW (or as a graph output);
- a region starts only at a dense Conv with a constant weight, whose NHWC kernel gains more than the Transpose in
  costs: pools and depthwise convs go channel-last only when their input already is, so an isolated one stays NCHW
  instead of paying two Transposes. (A conv reading NCHW / writing NCHW itself at a region's edge, instead of the
  Transposes, was tried: slower on 3x3 and 7x7 convs, where packing A from NCHW and writing C through a strided
  scratch tile cost more than the transposes. Tried again 2026-11 on the direct path, which reads A in place with
  any channel stride: bit-identical, but at one thread equal to Transpose + conv on a 3x3 64->64 conv at 56x56, 5%
  slower on the 7x7/2 RGB conv, 2-5% on 3x3 128-channel and 11x11/4 RGB ones, 38% on a 1x1 256->64 conv: channel-last
  A keeps a tile's reads in a few lines per pixel.)

Nodes whose op type the session forces onto the reference backend ('onnxep.fallback_op_types') are left alone."""
from __future__ import annotations

import numpy as np
import onnx

from onnxep.backends.cpu import CPU_DEVICE
from onnxep.graph.ir import Graph, Node, OpInfo, ValueType
from onnxep.graph.partition import op_info
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, Names, make_node, reads, tensor_type
from onnxep.graph.passes.fuse_conv_affine import bn_affine, bn_foldable, per_channel
from onnxep.ops import _registry

TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]
#: ONNX op -> its NHWC twin in the com.onnxep domain (same attributes, NHWC data input and output).
NHWC_TWINS = {"Conv": "NhwcConv", "MaxPool": "NhwcMaxPool", "AveragePool": "NhwcAveragePool",
              "GlobalAveragePool": "NhwcGlobalAveragePool", "GlobalMaxPool": "NhwcGlobalMaxPool", "LRN": "NhwcLRN",
              "QLinearConv": "QLinearConvNhwc"}
#: elementwise ops that do not care about the layout when every data input has the same shape
UNARY = {"Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "Abs", "Neg", "Exp", "Sqrt", "Identity", "Dropout",
         "HardSigmoid", "Elu", "Selu", "Softplus", "Erf", "HardSwish", "Softsign", "Celu", "ThresholdedRelu", "Mish",
         "Gelu", "Reciprocal"}
#: per-tensor quantization (scale and zero point one value each, checked as Clip's bounds are): elementwise too, so a
#: QDQ model's Q / DQ pairs between convs stay channel-last
QDQ = {"QuantizeLinear", "DequantizeLinear"}
BINARY = {"Add", "Sum", "Mul", "Sub", "Div", "Max", "Min", "Mean"}
#: com.onnxep elementwise ops whose inputs all have the output's shape (Silu: x [, gate]; QuantizeDequantize: x)
INTERNAL_ELEMENTWISE = {"Silu", "QuantizeDequantize"}
#: every op type elementwise_inputs may take
ELEMENTWISE = frozenset(UNARY | QDQ | BINARY | INTERNAL_ELEMENTWISE)


def _shape4(vt):
    return tuple(vt.shape) if vt is not None and vt.kind == "tensor" and vt.shape is not None \
        and len(vt.shape) == 4 else None


class _Layout:
    def __init__(self, graph: Graph, keep_ops):
        self.g = graph
        self.vt = graph.value_types
        self.consts = graph.constants
        self.keep_ops = keep_ops
        self.names = Names(graph)
        self.nhwc = {}                                   # NCHW value -> its NHWC twin
        self.nchw = {n for n, _ in graph.inputs} | set(graph.initializers)   # values present in NCHW
        self.out = []
        self._types = {}                                 # (NCHW ValueType, its 4-D shape) -> the NHWC type

    def nhwc_type(self, vt, s):
        """tensor_type of vt with the NHWC permutation of its 4-D shape s (None: rank 4, dims unknown), made once per
        pass: has_twin asks it of every conv's input and output, then the twins are made with the same types."""
        key = (vt, s)
        t = self._types.get(key)
        if t is None:
            t = self._types[key] = tensor_type(vt, None if s is None else (s[0], s[2], s[3], s[1]))
        return t

    # -- the two conversions
    def twin(self, x):
        """The NHWC twin of x (a Transpose is emitted the first time; a Reshape, a view, when x is 1x1)."""
        if x not in self.nhwc:
            t = self.names.new(f"{x}_nhwc")
            s = _shape4(self.vt.get(x))
            self.out.append(self._relayout(x, t, TO_NHWC, [0, 1, 1, -1], s))
            self.vt[t] = self.nhwc_type(self.vt.get(x), s)
            self.nhwc[x] = t
        return self.nhwc[x]

    def need_nchw(self, x):
        if x and x not in self.nchw and x in self.nhwc:
            self.out.append(self._relayout(self.nhwc[x], x, TO_NCHW, [0, -1, 1, 1], _shape4(self.vt.get(x))))
            self.nchw.add(x)

    def _relayout(self, src, dst, perm, flat_shape, nchw_shape):
        """The node writing dst := src transposed by perm; when the NCHW shape is (N, C, 1, 1) both layouts hold the
        same bytes, and a Reshape to flat_shape (0 keeps N) is a view instead of a copy."""
        kind = "to_nhwc" if perm == TO_NHWC else "to_nchw"
        if nchw_shape is not None and nchw_shape[2] == 1 and nchw_shape[3] == 1 and "Reshape" not in self.keep_ops:
            shape = self._new_const(f"{dst}_shape", np.array(flat_shape, np.int64))
            return make_node(self.g, self.names.new(f"{src}_{kind}"), "Reshape", [src, shape], [dst], {})
        return make_node(self.g, self.names.new(f"{src}_{kind}"), "Transpose", [src], [dst], {"perm": perm})

    def new_twin_output(self, y):
        s = _shape4(self.vt.get(y))
        t = self.names.new(f"{y}_nhwc")
        self.vt[t] = self.nhwc_type(self.vt.get(y), s)
        self.nhwc[y] = t
        return t

    # -- which nodes move
    def _cpu_runs(self, node, op=None):
        return node.op_type not in self.keep_ops and CPU_DEVICE.supports_op(
            op or op_info(node, self.vt, self.consts))

    def has_twin(self, node) -> bool:
        twin = NHWC_TWINS.get(node.op_type)
        if twin is None or node.domain != "" or not node.inputs or _shape4(self.vt.get(node.inputs[0])) is None \
                or _shape4(self.vt.get(node.outputs[0])) is None:
            return False
        cls = _registry.lookup(INTERNAL_DOMAIN, twin, 1)
        if cls is None or len(node.outputs) != 1:
            return False
        if node.inputs[0] not in self.nhwc and not self._dense_conv(node):
            return False      # only a dense conv starts a channel-last region (see the module docstring)
        op = op_info(node, self.vt, self.consts)
        if not self._cpu_runs(node, op):
            return False
        # what the twin would see: the data input and the output as NHWC types, the rest as they are
        perm = [self.nhwc_type(vt, _shape4(vt)) for vt in (op.input_types[0], op.output_types[0])]
        # (a bare Node: importing the com.onnxep opset waits for a twin that is used)
        tw = Node(node.name, twin, INTERNAL_DOMAIN, node.inputs, node.outputs, dict(node.attrs), 1)
        try:
            return bool(cls.supports(OpInfo(tw, [perm[0]] + op.input_types[1:], [perm[1]], op.constants)))
        except Exception:
            return False

    def _dense_conv(self, node) -> bool:
        wi = {"Conv": 1, "QLinearConv": 3}.get(node.op_type)      # the weight's input
        w = self.consts.get(node.inputs[wi]) if wi is not None and len(node.inputs) > wi else None
        return w is not None and w.ndim == 4 and not (int(node.attrs.get("group", 1) or 1) > 1 and w.shape[1] == 1)

    def elementwise_inputs(self, node):
        """The data inputs of a layout-free elementwise node that can run on NHWC twins, or None."""
        if len([o for o in node.outputs if o]) != 1 or node.outputs[0] == "":
            return None
        if node.domain == INTERNAL_DOMAIN and node.op_type in INTERNAL_ELEMENTWISE:
            data = [x for x in node.inputs if x]
            if len(data) != len(node.inputs) or any(x in self.consts for x in data):
                return None
        elif node.domain != "":
            return None
        elif node.op_type in UNARY or node.op_type in QDQ and not node.attrs.get("block_size"):
            data = [node.inputs[0]] if node.inputs and node.inputs[0] else []
            rest = node.inputs[1:]
            if any(x and (x not in self.consts or self.consts[x].size != 1) for x in rest):
                return None          # e.g. Clip's min / max must be scalars
        elif node.op_type in BINARY:
            data = [x for x in node.inputs if x and x not in self.consts]
            if any(x and x in self.consts and self._channel_vector(x, node.outputs[0]) is None for x in node.inputs):
                return None
        else:
            return None
        if not data or not any(map(self.nhwc.__contains__, data)):
            return None
        # every operand and the output 4-D: then the same permutation of every operand broadcasts the same way (a
        # squeeze-excite scale (N, C, 1, 1) times the (N, C, H, W) map), whatever the dims are -- also when the
        # exporter's symbolic dims do not show two of them equal (a residual Add of two convs' outputs)
        if _shape4(self.vt.get(node.outputs[0])) is None or any(_shape4(self.vt.get(x)) is None for x in data):
            return None
        if any(x in self.consts for x in data) or node.op_type in self.keep_ops:
            return None
        return data      # (whichever backend runs it: elementwise results do not depend on the layout)

    def run(self):
        readers = {}
        for node in self.g.nodes:
            for x in reads(node):
                readers.setdefault(x, []).append(node)
        for name, _ in self.g.outputs:
            readers.setdefault(name, []).append(None)
        self.readers = readers
        self.skip = set()
        self.deferred = {}       # id(node) -> what to emit in its place
        for node in self.g.nodes:
            if id(node) in self.skip:
                continue
            if id(node) in self.deferred:
                self.deferred.pop(id(node))()
                continue
            # each rewrite below acts on its op types alone: it is asked only of those (no call per node and rewrite)
            op = node.op_type
            if op == "Reshape" and (self.channel_shuffle(node) or self.conv_tokens(node)):
                continue
            if op == "Transpose" and (self.model_transpose(node) or self.sequence_conv(node)):
                continue
            if op == "ReduceMean" and self.spatial_mean(node):
                continue
            if op in NHWC_TWINS and self.has_twin(node):
                for x in node.inputs[1:]:
                    self.need_nchw(x)
                x = self.twin(node.inputs[0])
                y = self.new_twin_output(node.outputs[0])
                self.out.append(make_node(self.g, node.name, NHWC_TWINS[node.op_type], (x, *node.inputs[1:]), (y,),
                                          node.attrs, INTERNAL_DOMAIN))
                continue
            if op == "BatchNormalization" and self.batchnorm(node):
                continue
            data = self.elementwise_inputs(node) if op in ELEMENTWISE else None
            if data is not None:
                ins = [self.twin(x) if x in data
                       else self.channel_const(x, node.outputs[0]) if x in self.consts and node.op_type in BINARY
                       else x for x in node.inputs]
                y = self.new_twin_output(node.outputs[0])
                self.out.append(make_node(self.g, node.name, node.op_type, ins, [y], node.attrs, node.domain))
                continue
            if op == "Concat" and self.concat_on_channels(node):
                continue
            for x in reads(node):
                self.need_nchw(x)
            self.out.append(node)
            self.nchw.update(o for o in node.outputs if o)
        for name, _ in self.g.outputs:
            self.need_nchw(name)
        self.g.nodes = self.out
        return self.g

    def _channel_vector(self, name, like):
        """The constant `name` as one value per channel of the 4-D value `like` (see per_channel), or None."""
        s = _shape4(self.vt.get(like))
        if s is None or not isinstance(s[1], int):
            return None
        return per_channel(self.consts[name], s[1], 4)

    def channel_const(self, name, like):
        """An initializer holding constant `name` as a (C,) vector (C: channels of `like`), which broadcasts along
        NHWC's last axis."""
        return self._new_const(f"{name}_nhwc", self._channel_vector(name, like).astype(np.float32))

    def _new_const(self, base, value):
        c = self.names.new(base)
        self.g.initializers[c] = self.consts[c] = value
        self.vt[c] = ValueType.of_array(value)
        return c

    def batchnorm(self, node) -> bool:
        """BatchNormalization (inference, constant statistics) of a twin: y = x * a + b per channel, as a com.onnxep
        ChannelAffine over the last axis."""
        if node.op_type != "BatchNormalization" or node.domain != "" or not node.inputs \
                or node.inputs[0] not in self.nhwc or not bn_foldable(node, self.consts) \
                or node.op_type in self.keep_ops:
            return False
        s = _shape4(self.vt.get(node.inputs[0]))
        ab = bn_affine(node, self.consts, s[1]) if s is not None and isinstance(s[1], int) else None
        if ab is None:
            return False
        a, b = ab
        ca = self._new_const(f"{node.name}_scale_nhwc", a.astype(np.float32))
        cb = self._new_const(f"{node.name}_shift_nhwc", b.astype(np.float32))
        y = self.new_twin_output(node.outputs[0])
        self.out.append(make_node(self.g, node.name, "ChannelAffine", [self.nhwc[node.inputs[0]], ca, cb], [y], {},
                                  INTERNAL_DOMAIN))
        return True

    def model_transpose(self, node) -> bool:
        """The model's own Transposes between the two layouts (ConvNeXt permutes to channel-last around its
        LayerNorm / Linear and back):
        - perm (0, 2, 3, 1) of a value that has a twin is that twin (an Identity, a view: no copy);
        - perm (0, 3, 1, 2) makes a value whose twin is its input: nothing runs unless a reader needs it in NCHW (then
          the Transpose is emitted there, as the model wrote it)."""
        if node.op_type != "Transpose" or node.domain != "" or len(node.outputs) != 1 or not node.inputs \
                or not node.inputs[0] or "Transpose" in self.keep_ops:
            return False
        x, y = node.inputs[0], node.outputs[0]
        perm = [int(p) for p in node.attrs.get("perm") or ()]
        sx, sy = _shape4(self.vt.get(x)), _shape4(self.vt.get(y))
        if sx is None or sy is None or y in self.nhwc:
            return False
        if perm == TO_NHWC and x in self.nhwc:
            if "Identity" in self.keep_ops:
                return False
            self.out.append(make_node(self.g, node.name, "Identity", [self.nhwc[x]], [y], {}))
            self.nchw.add(y)
            return True
        if perm == TO_NCHW and (x in self.nchw or x not in self.nhwc):     # (x is there as it is)
            self.nhwc[y] = x
            self.nchw.discard(y)
            return True
        return False

    def spatial_mean(self, node) -> bool:
        """ReduceMean of a float32 twin over H and W (what torch exports for a squeeze-excite's or a head's
        adaptive_avg_pool2d(1) / mean((2, 3))) is the channel-last global average pool: keepdims gives its (N, C, 1,
        1) twin, keepdims=0 the (N, C) value, a Reshape (a view) of that twin."""
        if node.op_type != "ReduceMean" or node.domain != "" or len(node.outputs) != 1 or not node.inputs \
                or node.inputs[0] not in self.nhwc or "ReduceMean" in self.keep_ops:
            return False
        x, y = node.inputs[0], node.outputs[0]
        vx = self.vt.get(x)
        if vx is None or vx.elem_type != onnx.TensorProto.FLOAT:
            return False
        if node.opset >= 18:
            axes = self.consts.get(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
        else:
            axes = node.attrs.get("axes")
        if axes is None or sorted(int(a) % 4 for a in np.asarray(axes).reshape(-1)) != [2, 3]:
            return False
        keep = int(node.attrs.get("keepdims", 1) if node.attrs.get("keepdims") is not None else 1)
        s = _shape4(vx)
        if any(isinstance(d, int) and d == 0 for d in s[2:]):
            return False          # an empty mean: as the ONNX op computes it (NaN), not the pool
        gap = Node(node.name, "GlobalAveragePool", "", (x,), (y if keep else self.names.new(f"{y}_pooled"),), {}, 1)
        if not keep:
            self.vt[gap.outputs[0]] = tensor_type(vx, (s[0], s[1], 1, 1))
        if not self.has_twin(gap):
            return False
        t = self.new_twin_output(gap.outputs[0])
        self.out.append(make_node(self.g, node.name, "NhwcGlobalAveragePool", (self.nhwc[x],), (t,), {},
                                  INTERNAL_DOMAIN))
        if not keep:
            shape = self._new_const(f"{y}_shape", np.array([0, -1], np.int64))
            self.out.append(make_node(self.g, self.names.new(f"{y}_flat"), "Reshape", [t, shape], [y], {}))
            self.nchw.add(y)
        return True

    def sequence_conv(self, node) -> bool:
        """A conv between token sequences (SegFormer's Mix-FFN depthwise 3x3): X (N, L, C) -> Transpose (0, 2, 1) ->
        Reshape (N, C, H, W) -> Conv -> Reshape (N, C', L') -> Transpose (0, 2, 1) -> (N, L', C'). X viewed as
        (N, H, W, C) is the conv's NHWC input and its NHWC output viewed as (N, L', C') the result: two Reshapes
        (views) and the channel-last conv instead of two Transposes and the NCHW one. One reader each (Shape nodes
        may also read the conv's output: they read the twin's shape, gathered back to NCHW). Static shapes (but N)
        give constant shapes; otherwise the model's own shape tensors are permuted (their 0 entries, "copy this dim
        of the input", first replaced by the dims they copy)."""
        if node.op_type != "Transpose" or node.domain != "" or len(node.outputs) != 1 or not node.inputs \
                or [int(p) for p in node.attrs.get("perm") or ()] != [0, 2, 1] or node.inputs[0] in self.nhwc:
            return False
        r1 = self._only_reader(node.outputs[0], "Reshape")
        conv = self._only_reader(r1.outputs[0], "Conv") if r1 is not None else None
        shapes_of_y, r2 = [], None
        if conv is not None and conv.inputs[0] == r1.outputs[0] and len(conv.outputs) == 1:
            rs = self.readers.get(conv.outputs[0], [])
            shapes_of_y = [r for r in rs if r is not None and r.op_type == "Shape" and r.domain == ""
                           and not r.attrs.get("start") and r.attrs.get("end") is None]
            rest = [r for r in rs if all(r is not q for q in shapes_of_y)]
            r2 = rest[0] if len(rest) == 1 and rest[0] is not None and rest[0].op_type == "Reshape" \
                and rest[0].domain == "" else None
        t2 = self._only_reader(r2.outputs[0], "Transpose") if r2 is not None else None
        if t2 is None or [int(p) for p in t2.attrs.get("perm") or ()] != [0, 2, 1] \
                or any(op in self.keep_ops for op in ("Reshape", "Transpose", "Shape", "Gather", "Equal", "Where",
                                                       "Concat")) \
                or not self._zero_free(r1) or not self._zero_free(r2):
            return False
        vt = [self.vt.get(v) for v in (node.inputs[0], r1.outputs[0], conv.outputs[0], t2.outputs[0])]
        shapes = [tuple(v.shape) if v is not None and v.kind == "tensor" and v.shape is not None else None for v in vt]
        if any(sh is None or len(sh) != k for sh, k in zip(shapes, (3, 4, 4, 3))):
            return False
        (n, l, c), (n1, c1, h, w), (n2, c2, h2, w2), out = shapes
        if not (isinstance(c, int) and c > 0 and isinstance(c2, int) and c2 > 0):
            return False
        static = all(isinstance(d, int) and d > 0 for sh in shapes for d in sh[1:]) and n is not None \
            and n == n1 == n2 == out[0]
        if static and (c1 != c or h * w != l or out[1:] != (h2 * w2, c2)):
            return False
        if any(x and x not in self.consts for x in conv.inputs[1:]):
            return False
        xh = self.names.new(f"{node.inputs[0]}_nhwc")
        self.vt[xh] = tensor_type(vt[0], (n1, h, w, c))
        self.nhwc[r1.outputs[0]] = xh
        if not self.has_twin(conv):
            del self.nhwc[r1.outputs[0]]
            return False
        y = self.new_twin_output(conv.outputs[0])
        self.deferred[id(r1)] = lambda: self._sequence_conv_head(node, r1, conv, shapes_of_y, static, xh, y, h, w, c)
        self.deferred[id(t2)] = lambda: self._sequence_conv_tail(r2, t2, static, y, out)
        self.skip.update((id(conv), id(r2)))
        return True

    def conv_tokens(self, node) -> bool:
        """A channel-last conv's map flattened to tokens (a vision transformer's patch embedding): Y (N, C, H, W) ->
        Reshape (N, C, H * W) -> Transpose (0, 2, 1) -> (N, H * W, C) is the NHWC twin viewed as (N, H * W, C): one
        Reshape (a view) instead of the Transpose back to NCHW and the model's Transpose. The Reshape's shape constant
        and every dim but N static; the Reshape the Transpose's only input and the Transpose its only reader. Other
        readers of Y still get it in NCHW."""
        x = node.inputs[0] if node.domain == "" and len(node.inputs) == 2 and len(node.outputs) == 1 else None
        if x not in self.nhwc or node.inputs[1] not in self.consts or not self._zero_free(node) \
                or any(op in self.keep_ops for op in ("Reshape", "Transpose")):
            return False
        t2 = self._only_reader(node.outputs[0], "Transpose")
        if t2 is None or [int(p) for p in t2.attrs.get("perm") or ()] != [0, 2, 1]:
            return False
        vt = [self.vt.get(v) for v in (x, node.outputs[0], t2.outputs[0])]
        shapes = [tuple(v.shape) if v is not None and v.kind == "tensor" and v.shape is not None else None for v in vt]
        if any(sh is None or len(sh) != k for sh, k in zip(shapes, (4, 3, 3))):
            return False
        (n, c, h, w), (n1, c1, l1), (n2, l2, c2) = shapes
        if not all(isinstance(d, int) and d > 0 for d in (c, h, w)) or (c1, l1) != (c, h * w) \
                or (l2, c2) != (h * w, c) or not (n == n1 == n2):
            return False
        shape = self._new_const(f"{t2.outputs[0]}_shape", np.array([0, h * w, c], np.int64))
        self.out.append(make_node(self.g, t2.name, "Reshape", [self.twin(x), shape], [t2.outputs[0]], {}))
        self.nchw.add(t2.outputs[0])
        self.skip.add(id(t2))
        return True

    def _zero_free(self, reshape) -> bool:
        """Whether the Reshape's 0 entries, if any, mean "copy this dim": allowzero=0, or allowzero=1 with a
        constant shape holding no 0 (torch.onnx's dynamo export sets allowzero=1 on its constant (-1, C, H, W)
        shapes; then both readings agree)."""
        if not reshape.attrs.get("allowzero"):
            return True
        s = self.consts.get(reshape.inputs[1]) if len(reshape.inputs) > 1 else None
        return s is not None and np.asarray(s).ndim == 1 and bool(np.all(np.asarray(s) != 0))

    def _sequence_conv_head(self, node, r1, conv, shapes_of_y, static, xh, y, h, w, c):
        """In r1's place (its shape is computed by then): X's NHWC view, the conv, the Shape readers of its output."""
        if static:
            s1h = self._new_const(f"{xh}_shape", np.array([0, h, w, c], np.int64))
        else:     # s1 with its 0s replaced by T's dims (T = X transposed (0, 2, 1)), permuted (0, 2, 3, 1)
            sx = self._shape_op("Shape", [node.inputs[0]], 3)
            st = self._shape_op("Concat", [self._shape_op("Gather", [sx, self._perm([0, 2, 1])], 3),
                                           self._perm([0])], 4, axis=0)
            s1h = self._shape_op("Gather", [self._unzero(r1.inputs[1], st), self._perm([0, 2, 3, 1])], 4)
        self.out.append(make_node(self.g, node.name, "Reshape", [node.inputs[0], s1h], [xh], {}))
        for x in conv.inputs[1:]:
            self.need_nchw(x)
        self.out.append(make_node(self.g, conv.name, NHWC_TWINS["Conv"], (xh, *conv.inputs[1:]), (y,), conv.attrs,
                                  INTERNAL_DOMAIN))
        for sh in shapes_of_y:            # the NCHW shape: the twin's, gathered (0, 3, 1, 2)
            self.out.append(make_node(self.g, sh.name, "Gather", [self._shape_op("Shape", [y], 4),
                                                                 self._perm(TO_NCHW)], [sh.outputs[0]], {"axis": 0}))
            self.skip.add(id(sh))

    def _sequence_conv_tail(self, r2, t2, static, y, out):
        """In t2's place (r2's shape may be computed from the conv output's shape): the result, a view of the twin."""
        if static:
            s2h = self._new_const(f"{t2.outputs[0]}_shape", np.array([0, *out[1:]], np.int64))
        else:     # s2 with its 0s replaced by the NCHW conv output's dims, permuted (0, 2, 1)
            sy3 = self._shape_op("Gather", [self._shape_op("Shape", [y], 4), self._perm([0, 3, 1])], 3)
            s2h = self._shape_op("Gather", [self._unzero(r2.inputs[1], sy3), self._perm([0, 2, 1])], 3)
        self.out.append(make_node(self.g, t2.name, "Reshape", [y, s2h], [t2.outputs[0]], {}))
        self.nchw.add(t2.outputs[0])

    def _perm(self, idx):
        return self._new_const("perm", np.array(idx, np.int64))

    def _shape_op(self, op, ins, size, **attrs):
        """A node op(ins) writing a fresh int64 vector of `size` values (shape logic); its name."""
        y = self.names.new(f"{op.lower()}_nhwc")
        self.vt[y] = ValueType.of_array(np.zeros(size, np.int64))
        self.out.append(make_node(self.g, self.names.new(f"{y}_node"), op, ins, [y], attrs))
        return y

    def _unzero(self, shape, dims):
        """shape (a Reshape's, allowzero=0) with each 0 replaced by the input dim it copies (dims)."""
        k = len(self.vt[dims].shape) if self.vt.get(dims) is not None else None
        zero = self._new_const("zero", np.array(0, np.int64))
        eq = self.names.new("is_zero_nhwc")
        self.vt[eq] = ValueType.of_array(np.zeros(k, np.bool_))
        self.out.append(make_node(self.g, self.names.new(f"{eq}_node"), "Equal", [shape, zero], [eq], {}))
        return self._shape_op("Where", [eq, dims, shape], k)

    def _only_reader(self, value, op_type):
        rs = self.readers.get(value, [])
        return rs[0] if len(rs) == 1 and rs[0] is not None and rs[0].op_type == op_type and rs[0].domain == "" \
            else None

    def channel_shuffle(self, node) -> bool:
        """ShuffleNet's channel shuffle of a twin, Reshape (N, g, C/g, H, W) -> Transpose (0, 2, 1, 3, 4) ->
        Reshape (N, C, H, W), done channel-last as one com.onnxep ChannelShuffle node (the twin viewed as
        (N, H, W, g, C/g) swaps its last two axes): one copy, not three nodes."""
        if node.op_type != "Reshape" or node.domain != "" or len(node.inputs) < 2 or node.inputs[0] not in self.nhwc:
            return False
        s = _shape4(self.vt.get(node.inputs[0]))
        if s is None or not all(isinstance(d, int) for d in s):
            return False
        t = self._only_reader(node.outputs[0], "Transpose")
        r = self._only_reader(t.outputs[0], "Reshape") if t is not None else None
        if r is None or list(t.attrs.get("perm") or ()) != [0, 2, 1, 3, 4] or len(r.inputs) < 2:
            return False
        s5, s4 = self.consts.get(node.inputs[1]), self.consts.get(r.inputs[1])
        if s5 is None or s4 is None or s5.ndim != 1 or s5.size != 5 or list(s4) != list(s) or node.attrs.get("allowzero"):
            return False
        n, g, cg, h, w = (int(v) for v in s5)
        if (n, h, w) != (s[0], s[2], s[3]) or g < 1 or g * cg != s[1] or any(x in self.keep_ops for x in
                                                                             ("Reshape", "Transpose")):
            return False
        y = self.new_twin_output(r.outputs[0])
        self.out.append(make_node(self.g, node.name, "ChannelShuffle", [self.nhwc[node.inputs[0]]], [y],
                                  {"group": g}, INTERNAL_DOMAIN))
        self.skip.update((id(t), id(r)))
        return True

    def concat_on_channels(self, node) -> bool:
        if node.op_type != "Concat" or node.domain != "" or len(node.outputs) != 1:
            return False
        ins = [x for x in node.inputs if x]
        axis = int(node.attrs.get("axis", 0))
        if not ins or not all(x in self.nhwc for x in ins) or axis not in (1, -3) or not self._cpu_runs(node):
            return False
        attrs = dict(node.attrs, axis=3)
        y = self.new_twin_output(node.outputs[0])
        self.out.append(make_node(self.g, node.name, "Concat", [self.nhwc[x] for x in ins], [y], attrs))
        return True


def layout_nhwc(graph: Graph, ctx=None) -> Graph:
    keep_ops = getattr(ctx, "keep_ops", frozenset())
    return _Layout(graph, keep_ops).run()
