"""ai.onnx object-detection ops (onnx/defs/object_detection): NonMaxSuppression, RoiAlign."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = ("non_max_suppression", "roi_align")
