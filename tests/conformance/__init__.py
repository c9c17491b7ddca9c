"""The ONNX backend conformance suite (see test_onnx_backend.py)."""
