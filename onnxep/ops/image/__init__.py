"""ai.onnx image ops (onnx/defs/image): ImageDecoder."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("image_decoder",)
