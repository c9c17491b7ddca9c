"""ai.onnx tensor ops (onnx/defs/tensor): shape, data movement, indexing and constants."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "reshape", "flatten", "transpose", "concat", "unsqueeze", "squeeze", "identity", "shape", "gather", "scatter",
    "constant", "constant_of_shape", "where", "cast", "range", "slice", "expand", "split", "gather_nd", "cum_sum",
    "pad", "tile", "gather_elements", "scatter_elements", "scatter_nd", "one_hot", "trilu", "non_zero", "size",
    "eye_like", "compress", "reverse_sequence", "depth_to_space", "space_to_depth",
    "bit_cast", "cum_prod", "unique", "tensor_scatter", "center_crop_pad",
)
