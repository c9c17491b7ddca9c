"""ai.onnx math ops (onnx/defs/math): elementwise arithmetic and activations, Gemm, MatMul, Softmax."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "abs", "add", "sub", "mul", "div", "sum", "max", "min", "neg", "exp", "sqrt", "erf", "tanh", "sigmoid", "relu",
    "leaky_relu", "clip", "gemm", "mat_mul", "softmax", "log_softmax",
)
