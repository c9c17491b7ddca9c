"""ai.onnx sequence and optional ops (onnx/defs/sequence, onnx/defs/optional): Sequence*, SplitToSequence,
ConcatFromSequence, SequenceMap (its body run as control/_body.py runs If / Loop / Scan bodies), Optional*. A sequence
is a list of arrays, an optional its value or None (_seq.py)."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("sequence_empty", "sequence_construct", "sequence_insert", "sequence_at", "sequence_erase", "sequence_length",
       "split_to_sequence", "concat_from_sequence", "sequence_map", "optional", "optional_has_element",
       "optional_get_element")
