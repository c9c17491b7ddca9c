"""ai.onnx nn ops (onnx/defs/nn): convolution, pooling, normalization and dropout."""
