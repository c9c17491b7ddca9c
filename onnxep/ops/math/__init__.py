"""ai.onnx math ops (onnx/defs/math and the logical / bitwise ones): elementwise arithmetic, comparisons and
activations, Gemm, MatMul, Einsum, Softmax. binary_table, unary_table and activations each define one class per row
of a table (one numpy ufunc or function per op)."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "abs", "add", "sub", "mul", "div", "sum", "max", "min", "neg", "exp", "sqrt", "erf", "tanh", "sigmoid", "relu",
    "leaky_relu", "clip", "gemm", "mat_mul", "softmax", "log_softmax",
    # numpy-vectorised, every dtype the schemas allow (bfloat16 aside)
    "binary_table", "unary_table", "activations", "pow", "mod", "bit_shift", "is_inf", "mean", "p_relu", "gelu",
    "einsum", "hardmax", "swi_glu", "det", "hard_sigmoid", "hard_swish",
)
