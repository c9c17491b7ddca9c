"""ai.onnx.preview.training ops (onnx/defs/training): Adagrad, Adam, Momentum, Gradient."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("adagrad", "adam", "momentum")
