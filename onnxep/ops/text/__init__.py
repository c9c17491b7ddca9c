"""ai.onnx string ops (onnx/defs/text): StringNormalizer, StringConcat, StringSplit, RegexFullMatch."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("string_normalizer", "string_concat", "string_split", "regex_full_match")
