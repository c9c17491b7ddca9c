"""ai.onnx tensor ops (onnx/defs/tensor): shape, data movement, indexing and constants."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "reshape", "flatten", "transpose", "concat", "unsqueeze", "squeeze", "identity", "shape", "gather", "scatter",
    "constant", "constant_of_shape",
)
