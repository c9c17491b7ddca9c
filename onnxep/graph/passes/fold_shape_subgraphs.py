"""Shape subgraphs: the values that depend only on the graph inputs' shapes (and constants) are computed once per
input-shape signature, not on every run (issue 24).

Exporters write the shape logic of a model as nodes on tiny int64 tensors -- Shape -> Gather -> Unsqueeze -> Concat ->
Reshape's shape, Range / Expand / Where / Equal / Cast building positions and masks from sequence lengths -- and each
of those nodes costs a kernel call per run. This pass finds them and collapses them into com.onnxep ShapeSubgraph
nodes (ops/onnxep/shape_subgraph.py), whose kernel runs the captured nodes on the first run of a signature and
returns the cached (read-only) results after that.

Two properties of values, decided in one walk over the nodes in topological order (conservatively: when in doubt, a
value has neither):

  shape-determined   the value's shape is a function of the graph inputs' shapes: graph inputs (and overridable
                     initializers) themselves, constants, signature-determined values, and the outputs of a node whose
                     op is listed in SHAPE_ARGS (its output shapes are a function of its input shapes, its attributes
                     and the data of the inputs SHAPE_ARGS names) when every input is shape-determined and those named
                     inputs are signature-determined or constant. Not listed, so never shape-determined: NonZero,
                     Unique, Compress, NonMaxSuppression, control flow (If / Loop / Scan), sequence ops, ... -- a
                     value downstream of one of them is not either, unless it is rebuilt from determined values.
  signature-determined
                     the value's data is a function of the graph inputs' shapes and constants: the output of Shape or
                     Size of a shape-determined tensor (which reads only the tensor's shape), and the outputs of a
                     deterministic default-domain node (not NONDETERMINISTIC, no subgraph, tensor outputs, a cpu
                     kernel, not an op type forced onto the reference backend) whose inputs are all signature-
                     determined or constant, at least one of them signature-determined.

The signature-determined nodes are grouped by *level*: the position of the latest node whose output shape they read
(-1: only graph inputs'), the maximum over the node's own shape reads and its signature-determined inputs. All nodes of
one level become one ShapeSubgraph node placed right after the node of that position -- every value it reads exists
there, and every reader of its outputs comes after (a reader of a level-L value depends on node L) -- so the graph
stays topologically ordered. A ShapeSubgraph's inputs are, in order: the tensors it reads the shape of only (its
attribute shape_inputs counts them; the kernel never reads their data), the signature-determined values of earlier
ShapeSubgraphs it reads (data, part of the cache key), and the constants it reads. Its outputs are its values that
other nodes, subgraphs or graph outputs read; its attribute `body` is the captured nodes as a graph/ir.py Body (inputs
and outputs named as the node's; a GraphProto when the node is written out), `opset` the default-domain opset they run at.

A level holding a single Shape or Size node is left as it is (nothing to save). Runs after every other pass (the
layout pass must not see ShapeSubgraph nodes reading channel-first tensors); level 2, as it writes a com.onnxep op."""
from __future__ import annotations

from onnxep.backends.cpu import CPU_DEVICE
from onnxep.graph.ir import Body, Graph, ValueType
from onnxep.graph.partition import op_info
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, Names, drop_unused_initializers, make_node, reads
from onnxep.graph.passes.constant_folding import NONDETERMINISTIC
from onnxep.ops.onnxep.shape_subgraph import VIEW_OPS

OP_TYPE = "ShapeSubgraph"
SHAPE_OPS = ("Shape", "Size")

_ALL = None      # every input's data decides the output shape

#: (domain, op type) -> indices of the inputs whose DATA (besides every input's shape and the attributes) decides the
#: output shapes. Ops not listed have no shape-determined outputs.
SHAPE_ARGS: dict = {}


def _ops(domain: str, names: str, args=()):
    for name in names.split():
        SHAPE_ARGS[(domain, name)] = args


# element-wise, broadcasting, and shape-preserving ops: the output shape follows from the input shapes
_ops("", """Abs Acos Acosh Add And Asin Asinh Atan Atanh BitShift BitwiseAnd BitwiseNot BitwiseOr BitwiseXor Cast
         CastLike Ceil Celu Clip Cos Cosh Div Elu Equal Erf Exp Floor Gelu Greater GreaterOrEqual HardSigmoid
         HardSwish Hardmax Identity IsInf IsNaN LeakyRelu Less LessOrEqual Log LogSoftmax Max Mean Min Mish Mod Mul
         Neg Not Or PRelu Pow Reciprocal Relu Round Selu Shrink Sigmoid Sign Sin Sinh Softmax Softplus Softsign Sqrt
         Sub Sum Tan Tanh ThresholdedRelu Where Xor CumSum Trilu Dropout LRN
         QuantizeLinear DequantizeLinear DynamicQuantizeLinear""")
# ops whose output shape is a function of the input shapes and attributes
_ops("", """MatMul MatMulInteger Gemm Conv ConvInteger ConvTranspose MaxPool AveragePool LpPool GlobalAveragePool
         GlobalMaxPool GlobalLpPool BatchNormalization InstanceNormalization LayerNormalization GroupNormalization
         RMSNormalization MeanVarianceNormalization Transpose Flatten Concat Gather GatherElements GatherND
         ScatterElements ScatterND Scatter Einsum DepthToSpace SpaceToDepth ArgMax ArgMin Shape Size EyeLike
         QLinearConv QLinearMatMul RoiAlign GridSample LSTM GRU RNN""")
# ops with shape arguments: their data must be determined too
_ops("", "Reshape Expand TopK OneHot Upsample", (1,))
_ops("", "Tile", (1, 2))                             # repeats (and opset 1's axis)
_ops("", "Squeeze Unsqueeze Split", (1,))           # axes / split inputs (opset 13 on); attributes before
_ops("", """ReduceMax ReduceMin ReduceMean ReduceSum ReduceProd ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp
         ReduceSumSquare""", (1,))                   # axes input (opset 13 / 18 on)
_ops("", "Slice", (1, 2, 3, 4))
_ops("", "Pad", (1, 3))                              # pads, axes (not the constant value)
_ops("", "Resize", (1, 2, 3))                        # scales, sizes (opset 10: scales is input 1)
_ops("", "ConstantOfShape Range", _ALL)
_ops("", "MaxUnpool", (2,))
# onnxep's own ops (earlier passes): fused forms of the ops above, same output shapes
_ops(INTERNAL_DOMAIN, """Gelu FusedMatMul StridedMatMul MaskedSoftmax FusedAttention NhwcConv NhwcMaxPool
         NhwcAveragePool NhwcGlobalAveragePool NhwcGlobalMaxPool NhwcLRN ChannelAffine ChannelShuffle Silu
         RMSNormalization FastGelu GroupNorm""")
_ops(INTERNAL_DOMAIN, "RotaryHalf", (3, 4))           # the split points decide the shape
_ops(INTERNAL_DOMAIN, "DynamicQuantizeMatMul")      # qdq slice: MatMul's output shape
_ops(INTERNAL_DOMAIN, "RotaryInterleaved", (3,))      # so does the Reshape's shape


def _is_tensor(vt) -> bool:
    return vt is not None and vt.kind == "tensor"


def fold_shape_subgraphs(graph: Graph, ctx=None) -> Graph:
    keep_ops = ctx.keep_ops if ctx is not None else frozenset()
    constants = graph.constants
    vtypes = graph.value_types
    nodes = graph.nodes
    det = {n for n, vt in list(graph.inputs) + list(graph.overridable) if _is_tensor(vt)}   # shape-determined
    det.update(constants)
    level = {}       # signature-determined value -> its level
    member = {}      # id(node) -> level, for signature-determined nodes
    position = {}    # value -> index of the node that writes it
    views = _shape_only_views(graph)
    for i, node in enumerate(nodes):
        lvl = _sd_level(node, vtypes, constants, det, level, position, keep_ops, views)
        outs = [o for o in node.outputs if o]
        if lvl is not None:
            member[id(node)] = lvl
            for o in outs:
                level[o] = lvl
            det.update(outs)
        elif _shape_determined(node, det, level, constants):
            det.update(outs)
        for o in outs:
            position[o] = i
    if not member:
        return graph
    groups: dict = {}
    for node in nodes:
        lvl = member.get(id(node))
        if lvl is not None:
            groups.setdefault(lvl, []).append(node)
    # who reads each value from outside its level (nodes, their subgraphs, graph outputs)
    readers: dict = {}
    for node in nodes:
        lvl = member.get(id(node), "outside")
        for x in reads(node):
            readers.setdefault(x, set()).add(lvl)
    for name, _ in graph.outputs:
        readers.setdefault(name, set()).add("outside")
    names = Names(graph)
    # what goes right after the node at each level's position: its ShapeSubgraph; a lone Shape / Size node as it is
    # (moved there: a later level may read it); nothing when nothing outside reads the level's values
    placed = {}
    for lvl, members in groups.items():
        if len(members) == 1 and members[0].op_type in SHAPE_OPS:
            placed[lvl] = members
        else:
            made = _collapse(graph, names, lvl, members, readers, constants, views)
            placed[lvl] = [made] if made is not None else []
    out = list(placed.get(-1, ()))
    for i, node in enumerate(nodes):
        if id(node) not in member:
            out.append(node)
        out.extend(placed.get(i, ()))
    graph.nodes = out
    drop_unused_initializers(graph)
    return graph


def _shape_only_views(graph) -> set:
    """ids of the view nodes (VIEW_OPS: Reshape, Unsqueeze, Squeeze, Flatten, Identity, Expand) whose output only
    Shape / Size nodes read, directly or through other such views (their input 0): a grouped-query attention's
    Reshape(Expand(Unsqueeze(kv))) once the attention reads kv itself (fuse_exporter_attention) is left for the
    Shape the exporter took of it. Their ShapeSubgraph runs them on stand-ins (ops/onnxep/shape_subgraph.py), so
    the expanded copy is never made."""
    users = {}
    for node in graph.nodes:
        named = set(node.inputs)
        for j, x in enumerate(node.inputs):
            if x:
                users.setdefault(x, []).append((node, j))
        for x in reads(node):
            if x not in named:                # read by a subgraph: data
                users.setdefault(x, []).append((None, -1))
    outputs = {name for name, _ in graph.outputs}
    views = set()
    for node in reversed(graph.nodes):
        if (node.domain not in ("", "ai.onnx") or node.op_type not in VIEW_OPS or len(node.outputs) != 1
                or not node.inputs or not node.inputs[0] or (node.attrs and node.has_subgraph)):
            continue
        o = node.outputs[0]
        us = users.get(o)
        if not o or o in outputs or not us:
            continue
        if all(u is not None and u.domain in ("", "ai.onnx") and (
                u.op_type in SHAPE_OPS or (id(u) in views and j == 0 and u.inputs.count(o) == 1)) for u, j in us):
            views.add(id(node))
    return views


def _sd_level(node, vtypes, constants, det, level, position, keep_ops, views=frozenset()):
    """The level of a signature-determined node, or None when the node is not one."""
    ins = [x for x in node.inputs if x]
    if node.op_type in SHAPE_OPS or id(node) in views:
        if len(ins) != 1 and id(node) not in views:
            return None
        x = node.inputs[0]
        if x in level:
            lvl = level[x]
        elif x in constants or x not in det or not _is_tensor(vtypes.get(x)):
            return None
        else:
            lvl = position.get(x, -1)         # a graph input: -1
        for y in node.inputs[1:]:            # a view's shape / axes: signature-determined or constant
            if y and y not in constants:
                if y not in level:
                    return None
                lvl = max(lvl, level[y])
    else:
        if not ins or not all(x in level or x in constants for x in ins):
            return None
        lvls = [level[x] for x in ins if x in level]
        if not lvls:
            return None                       # constants only: constant folding's, not ours
        lvl = max(lvls)
    if (node.domain not in ("", "ai.onnx") or node.op_type in NONDETERMINISTIC or node.op_type in keep_ops
            or not any(node.outputs) or (node.attrs and node.has_subgraph)
            or not all(_is_tensor(vtypes.get(o)) for o in node.outputs if o)):
        return None
    if not CPU_DEVICE.supports_op(op_info(node, vtypes, constants)):
        return None
    return lvl


def _shape_determined(node, det, level, constants) -> bool:
    """Whether a node that is not signature-determined has outputs whose shapes are (see SHAPE_ARGS)."""
    if node.attrs and node.has_subgraph:
        return False
    args = SHAPE_ARGS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type), False)
    if args is False:
        return False
    for j, x in enumerate(node.inputs):
        if not x:
            continue
        if x not in det:
            return False
        if (args is _ALL or j in args) and x not in level and x not in constants:
            return False
    return True


def _collapse(graph, names, lvl, members, readers, constants, views=frozenset()):
    """The ShapeSubgraph node standing for `members` (one level's nodes, in order), or None when nothing outside
    reads what they make."""
    produced = {o for n in members for o in n.outputs if o}
    outputs = [o for n in members for o in n.outputs
               if o and any(r != lvl for r in readers.get(o, ()))]
    if not outputs:
        return None
    # what the members read from outside: shape-only reads, data of earlier ShapeSubgraphs, constants
    shape_only, data, consts = [], [], []
    reads_data = set()
    for n in members:
        for j, x in enumerate(n.inputs):
            if x and x not in produced and not ((n.op_type in SHAPE_OPS or id(n) in views) and j == 0):
                reads_data.add(x)
    seen = set()
    for n in members:
        for j, x in enumerate(n.inputs):
            if not x or x in produced or x in seen:
                continue
            seen.add(x)
            if x in constants:
                consts.append(x)
            elif x in reads_data:
                data.append(x)
            else:
                shape_only.append(x)
    inputs = shape_only + data + consts
    vtypes = graph.value_types
    types = {}
    for x in (*inputs, *produced):
        vt = vtypes.get(x)
        if vt is None and x in constants:
            vt = ValueType.of_array(constants[x])
        if vt is not None:
            types[x] = vt
    # the members as they are, with their types: the kernel takes them without a proto round trip (graph/ir.py Body)
    body = Body(names.new(f"shape_subgraph_{lvl + 1}_body"), tuple(members), tuple(inputs), tuple(outputs), types)
    opset = graph.opsets.get("", graph.opsets.get("ai.onnx", 1))
    return make_node(graph, names.new(f"shape_subgraph_{lvl + 1}"), OP_TYPE, inputs, outputs,
                     {"body": body, "shape_inputs": len(shape_only), "opset": int(opset)}, INTERNAL_DOMAIN)
