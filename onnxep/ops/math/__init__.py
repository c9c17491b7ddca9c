"""ai.onnx math ops (onnx/defs/math): elementwise arithmetic and activations, Gemm, MatMul, Softmax."""
