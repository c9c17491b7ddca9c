"""ai.onnx sequence and optional ops (onnx/defs/sequence, onnx/defs/optional): Sequence*, SplitToSequence, ConcatFromSequence, Optional*."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ()
