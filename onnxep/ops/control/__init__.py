"""ai.onnx control flow (onnx/defs/controlflow): If, Loop and Scan, their bodies compiled and run by onnxep's own
executor with outer-scope values (_body.py)."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("if_", "loop", "scan")
