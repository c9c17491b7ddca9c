"""com.onnxep internal ops: the channel-last and fused ops that onnxep's graph passes write."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "nhwc_conv", "nhwc_pw_dw", "nhwc_pool", "nhwc_lrn", "channel_affine", "channel_shuffle", "gelu", "fused_mat_mul",
    "strided_mat_mul", "masked_softmax", "fused_attention",
    "shape_subgraph",
    "rms_norm", "silu", "rotary_half", "rotary_interleaved",
    "fast_gelu", "group_norm",
    "dynamic_quantize_mat_mul",
    "quantize_dequantize",
    "q_linear_conv_nhwc",
    "q_linear_add",
)
