"""ai.onnx tensor ops (onnx/defs/tensor): shape, data movement, indexing and constants."""
