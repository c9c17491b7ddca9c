"""ai.onnx nn ops (onnx/defs/nn): convolution, pooling, normalization, dropout, resizing, attention and text
vectorizing. The float32 kernels of Conv, pools, BatchNormalization, LRN and LayerNormalization are native (Cython);
their other types and every other op here are numpy-vectorized (shared pieces in _helpers.py, _numpy_paths.py)."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "conv", "max_pool", "average_pool", "global_average_pool", "global_max_pool", "lrn", "batch_normalization",
    "dropout", "layer_normalization",
    "instance_normalization", "group_normalization", "mean_variance_normalization", "lp_normalization",
    "rms_normalization", "conv_transpose", "resize", "upsample", "lp_pool", "global_lp_pool", "max_unpool", "col2im",
    "causal_conv_with_state", "deform_conv", "rotary_embedding", "attention", "linear_attention", "tfidf_vectorizer",
    "negative_log_likelihood_loss", "softmax_cross_entropy_loss",
    "grid_sample", "affine_grid", "flex_attention",
)
