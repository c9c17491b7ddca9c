"""ai.onnx.preview.training ops (onnx/defs/training): Adagrad, Adam, Momentum. (Gradient is a graph
rewrite, not a kernel: onnxep/graph/passes/expand_gradient.py.)"""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("adagrad", "adam", "momentum")
