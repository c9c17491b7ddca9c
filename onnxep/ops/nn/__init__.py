"""ai.onnx nn ops (onnx/defs/nn): convolution, pooling, normalization and dropout."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "conv", "max_pool", "average_pool", "global_average_pool", "global_max_pool", "lrn", "batch_normalization",
    "dropout", "layer_normalization",
    "instance_normalization", "group_normalization", "mean_variance_normalization", "lp_normalization",
    "rms_normalization", "conv_transpose", "resize", "upsample", "lp_pool", "global_lp_pool",
    "max_unpool", "col2im", "causal_conv_with_state",
    "deform_conv", "rotary_embedding", "attention",
    "linear_attention", "tfidf_vectorizer",
)
