"""ai.onnx quantization ops (onnx/defs/quantization, and the integer math ops of onnx/defs/math and nn): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("quantize_linear", "dequantize_linear", "dynamic_quantize_linear", "mat_mul_integer", "q_linear_mat_mul",
       "q_linear_conv", "conv_integer")
