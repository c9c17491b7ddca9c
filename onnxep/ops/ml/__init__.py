"""ai.onnx.ml ops (onnx/defs/traditionalml): what skl2onnx writes."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ()
