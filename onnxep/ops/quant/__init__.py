"""ai.onnx quantization ops (onnx/defs/quantization, and the integer math ops of onnx/defs/math and nn): QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ()
