"""Stage 2, optimize: graph passes, one per file, each switched by graph_optimization_level.

    level  pass
    0      (always: semantics, not an optimization) ai.onnx.preview.training Gradient expanded into backward nodes
    1      Identity and inference Dropout removal; constant folding; a zero Pad folded into the Conv after it;
           BatchNormalization and per-channel Mul / Add folded into the Conv before them
    2      transformer fusions: the decomposed LayerNormalization chain -> LayerNormalization, the Erf form of Gelu ->
           com.onnxep Gelu, its tanh form -> com.onnxep FastGelu, the decomposed RMSNorm -> RMSNormalization,
           x * Sigmoid(alpha x) [* gate] -> com.onnxep Silu, the exporters' GroupNorm chain (Reshape,
           InstanceNormalization, Reshape, per-channel Mul / Add [, SiLU]) -> com.onnxep GroupNorm, the rotate_half
           rotary embedding -> com.onnxep RotaryHalf, MatMul by a constant + bias [+ residual] [+ Relu | Gelu] ->
           com.onnxep FusedMatMul,
           the Transposes / scale around a MatMul of computed operands -> com.onnxep StridedMatMul, an additive
           mask + Softmax -> com.onnxep MaskedSoftmax, then those two products around that softmax -> com.onnxep
           FusedAttention; a per-tensor QuantizeLinear -> DequantizeLinear pair -> com.onnxep QuantizeDequantize;
           last of all (after the level-3 passes when they run), the nodes computing values that
           depend only on the input shapes and constants -> com.onnxep ShapeSubgraph (computed once per signature)
    3      channel-last layout (NHWC twins of Conv, pooling and BatchNormalization, transposes only where layouts
           meet), then the NhwcConv epilogue fusions (residual Add, activations), a 1x1 NhwcConv and the depthwise one
           reading its large output -> com.onnxep NhwcPwDw (computed band by band), ChannelAffine chains (the
           per-channel Mul / Add and Relu after a BatchNormalization folded into it), a per-channel constant Mul
           after a FusedMatMul (a layer scale) folded into its weight, with the residual Add after it, the
           Transposes around a GroupNorm folded into it (it reads NCHW or channel-last, writes channel-last)

ORT_ENABLE_ALL (99, the default) runs them all; InferenceSession(disabled_optimizers=[...]) leaves out the passes named
(PASS_NAMES: onnxep's pass names and the onnxruntime transformer names each stands in for).
`optimized_model_filepath` writes the optimized graph (with onnxep's own com.onnxep ops where the passes put them, so
only onnxep runs it -- as onnxruntime's optimized models carry its com.microsoft ops)."""
from __future__ import annotations

from dataclasses import dataclass

import onnx

from onnxep.graph.ir import Graph
from onnxep.graph.model import save_graph
from onnxep.graph.passes.constant_folding import fold_constants
from onnxep.graph.passes.fold_shape_subgraphs import fold_shape_subgraphs
from onnxep.graph.passes.expand_gradient import expand_gradient
from onnxep.graph.passes.fuse_attention import fuse_attention
from onnxep.graph.passes.fuse_channel_affine import fuse_channel_affine
from onnxep.graph.passes.fuse_conv_affine import fuse_conv_affine
from onnxep.graph.passes.fuse_dynamic_quantize_matmul import fuse_dynamic_quantize_matmul
from onnxep.graph.passes.fuse_exporter_attention import fuse_exporter_attention
from onnxep.graph.passes.fuse_gelu import fuse_gelu
from onnxep.graph.passes.fuse_gelu_tanh import fuse_gelu_tanh
from onnxep.graph.passes.fuse_group_norm import fuse_group_norm, fuse_group_norm_nhwc
from onnxep.graph.passes.fuse_layernorm import fuse_layernorm
from onnxep.graph.passes.fuse_matmul_bias import fuse_matmul_bias
from onnxep.graph.passes.fuse_matmul_scale import fuse_matmul_scale
from onnxep.graph.passes.fuse_matmul_transpose import fuse_matmul_transpose
from onnxep.graph.passes.fuse_qdq_pair import fuse_qdq_pair
from onnxep.graph.passes.fuse_qdq_ops import fuse_qdq_ops
from onnxep.graph.passes.fuse_pad_conv import fuse_conv_slice, fuse_pad_conv
from onnxep.graph.passes.fuse_rms_norm import fuse_rms_norm
from onnxep.graph.passes.fuse_rotary import fuse_rotary
from onnxep.graph.passes.fuse_silu import fuse_silu
from onnxep.graph.passes.fuse_softmax_mask import fuse_softmax_mask
from onnxep.graph.passes.fuse_nhwc_conv import fuse_nhwc_conv
from onnxep.graph.passes.fuse_pw_dw import fuse_pw_dw
from onnxep.graph.passes.layout_nhwc import NHWC_TWINS, layout_nhwc
from onnxep.graph.passes.remove_identity import remove_identity


@dataclass(frozen=True)
class PassContext:
    """What passes may know of the session: op types forced onto the reference backend stay as they are."""

    keep_ops: frozenset = frozenset()


#: (minimum GraphOptimizationLevel, pass function (Graph, PassContext) -> Graph), applied in order.
PASSES: list = [
    (0, expand_gradient),      # every level, and not in PASS_NAMES: no disabled_optimizers name switches it off
    (1, remove_identity),
    (2, fuse_qdq_ops),         # before folding, which makes a weight's DequantizeLinear a float32 constant
    (1, fold_constants),
    (1, fuse_pad_conv),        # after folding: exporters compute the pads from shapes
    (1, fuse_conv_slice),
    (1, fuse_conv_affine),
    (2, fuse_dynamic_quantize_matmul),
    (2, fuse_qdq_pair),
    (2, fuse_layernorm),
    (2, fuse_gelu),
    (2, fuse_gelu_tanh),
    (2, fuse_rms_norm),
    (2, fuse_silu),
    (2, fuse_group_norm),      # after fuse_silu: it takes a Silu after the chain
    (2, fuse_rotary),
    (2, fuse_matmul_bias),     # after fuse_gelu: it takes the Gelu into the MatMul
    (2, fuse_exporter_attention),  # before fuse_matmul_transpose: the raw MatMul / Softmax / mask ops, as exported
    (2, fuse_matmul_transpose),
    (2, fuse_softmax_mask),
    (2, fuse_attention),       # after the two above: it takes their StridedMatMuls and MaskedSoftmax
    (3, layout_nhwc),
    (3, fuse_nhwc_conv),
    (3, fuse_pw_dw),           # after fuse_nhwc_conv: the two convs' activations are theirs by then
    (3, fuse_matmul_scale),    # after the layout pass: it took the Transposes between a layer scale and its residual
    (3, fuse_channel_affine),
    (3, fuse_group_norm_nhwc),  # after the layout pass: the Transposes around a GroupNorm go into it
    (2, fold_shape_subgraphs),  # last: it takes what the others left of the shape logic (the layout pass included)
]


#: pass -> the names InferenceSession(disabled_optimizers=[...]) knows it by: its function, its module (file) and the
#: onnxruntime graph transformers it stands in for, as onnxruntime 1.32 registers them (GeluFusionL1 / L2) and by
#: their class names (GeluFusion); disabling any one of them disables the whole onnxep pass.
PASS_NAMES: dict = {
    remove_identity: ("remove_identity", "EliminateIdentity", "EliminateDropout"),
    fold_constants: ("fold_constants", "constant_folding", "ConstantFolding"),
    fuse_pad_conv: ("fuse_pad_conv", "PadFusion"),
    fuse_conv_slice: ("fuse_conv_slice",),
    fuse_conv_affine: ("fuse_conv_affine", "ConvBNFusion", "ConvMulFusion", "ConvAddFusion"),
    fuse_dynamic_quantize_matmul: ("fuse_dynamic_quantize_matmul", "DynamicQuantizeMatMulFusion",
                                   "MatMulIntegerToFloatFusion"),
    fuse_qdq_ops: ("fuse_qdq_ops",),
    fuse_qdq_pair: ("fuse_qdq_pair", "QDQPropagationTransformer", "QDQSelectorActionTransformer"),
    fuse_layernorm: ("fuse_layernorm", "LayerNormFusion", "LayerNormFusionL1", "LayerNormFusionL2"),
    fuse_gelu: ("fuse_gelu", "GeluFusion", "GeluFusionL1", "GeluFusionL2"),
    fuse_gelu_tanh: ("fuse_gelu_tanh", "FastGeluFusion"),
    fuse_rms_norm: ("fuse_rms_norm", "SimplifiedLayerNormFusion"),
    fuse_silu: ("fuse_silu", "QuickGeluFusion"),
    fuse_group_norm: ("fuse_group_norm",),
    fuse_group_norm_nhwc: ("fuse_group_norm_nhwc",),
    fuse_rotary: ("fuse_rotary", "RotaryEmbeddingFusion"),
    fuse_matmul_bias: ("fuse_matmul_bias", "MatMulAddFusion", "BiasGeluFusion", "GemmActivationFusion",
                       "MatMulActivationFusion"),
    fuse_matmul_transpose: ("fuse_matmul_transpose", "MatmulTransposeFusion", "MatMulScaleFusion"),
    fuse_softmax_mask: ("fuse_softmax_mask",),
    fuse_attention: ("fuse_attention", "AttentionFusion"),
    fuse_exporter_attention: ("fuse_exporter_attention",),
    layout_nhwc: ("layout_nhwc", "NhwcTransformer", "NchwcTransformer"),
    fuse_nhwc_conv: ("fuse_nhwc_conv", "ConvActivationFusion", "ConvAddActivationFusion"),
    fuse_pw_dw: ("fuse_pw_dw",),
    fuse_matmul_scale: ("fuse_matmul_scale",),
    fuse_channel_affine: ("fuse_channel_affine",),
    fold_shape_subgraphs: ("fold_shape_subgraphs",),
}


#: pass -> the op types it can act on, as groups: a pass whose groups are not each met by an op type of the graph
#: (any domain: an over-approximation) finds nothing to rewrite, and the driver does not run it. Each group is what
#: the pass's pattern cannot do without (its anchor and the ops its match requires); a pass not listed always runs.
#: A light conv model has none of the transformer ops, a transformer none of the conv ones: most of the passes were
#: walks over every node finding nothing (fewer walks, not faster ones -- issue 25).
NEEDS: dict = {
    expand_gradient: ({"Gradient"},),
    remove_identity: ({"Identity", "Dropout", "Concat"},),
    fuse_pad_conv: ({"Pad"}, {"Conv"}),
    fuse_conv_slice: ({"Slice"}, {"Conv"}),
    fuse_conv_affine: ({"Conv"}, {"BatchNormalization", "Mul", "Add"}),
    fuse_dynamic_quantize_matmul: ({"MatMulInteger"}, {"DynamicQuantizeLinear"}),
    fuse_qdq_ops: ({"DequantizeLinear"},),     # (every QDQ group it folds reads a DequantizeLinear)
    fuse_qdq_pair: ({"QuantizeLinear"}, {"DequantizeLinear"}),
    fuse_layernorm: ({"Sub"}, {"ReduceMean"}, {"Sqrt"}, {"Div"}),
    fuse_gelu: ({"Erf"},),
    fuse_gelu_tanh: ({"Tanh"},),
    fuse_rms_norm: ({"Pow", "Mul"}, {"ReduceMean"}, {"Sqrt"}),
    fuse_silu: ({"Sigmoid"},),
    fuse_group_norm: ({"InstanceNormalization"},),
    fuse_rotary: ({"Concat"}, {"Slice"}, {"Neg"}),
    fuse_matmul_bias: ({"MatMul", "Gemm"},),
    fuse_exporter_attention: ({"Softmax"}, {"MatMul"}),
    fuse_matmul_transpose: ({"MatMul"},),
    fuse_softmax_mask: ({"Softmax"}, {"Add"}),
    fuse_attention: ({"StridedMatMul"},),
    # a channel-last region starts at a twin op, or at the model's own Transpose (layout_nhwc.model_transpose)
    layout_nhwc: (set(NHWC_TWINS) | {"Transpose"},),
    fuse_nhwc_conv: ({"NhwcConv"},),
    fuse_pw_dw: ({"NhwcConv"},),
    fuse_matmul_scale: ({"FusedMatMul"}, {"Mul"}),
    fuse_channel_affine: ({"ChannelAffine"},),
    fuse_group_norm_nhwc: ({"GroupNorm"},),
    fold_shape_subgraphs: ({"Shape", "Size"},),
}


def disabled_passes(names) -> tuple:
    """(the passes `names` disable, the names that match no pass) -- onnxruntime accepts any name and ignores one it
    does not know; the caller warns about those."""
    by_name = {n: fn for fn, ns in PASS_NAMES.items() for n in ns}
    passes, unknown = set(), []
    for name in names or ():
        fn = by_name.get(name)
        if fn is None:
            unknown.append(name)
        else:
            passes.add(fn)
    return frozenset(passes), unknown


def optimize(graph: Graph, level: int, optimized_model_filepath: str = "", model: onnx.ModelProto | None = None,
             keep_ops=frozenset(), disabled=frozenset()):
    """The passes of `level` in order, but those in `disabled` (pass functions, see disabled_passes)."""
    ctx = PassContext(frozenset(keep_ops))
    ops = None          # the op types of graph.nodes (made again after each pass that ran)
    for min_level, fn in PASSES:
        if level >= min_level and fn not in disabled:
            needs = NEEDS.get(getattr(fn, "__wrapped__", fn))
            if needs is not None:
                if ops is None:
                    ops = {n.op_type for n in graph.nodes}
                if any(map(ops.isdisjoint, needs)):
                    continue
            graph = fn(graph, ctx)
            ops = None
    if optimized_model_filepath and model is not None:
        save_graph(graph, model, optimized_model_filepath)
    return graph
