"""ai.onnx control flow (onnx/defs/controlflow): If, Loop and Scan, their bodies run by onnxep's own executor with outer-scope values."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ()
