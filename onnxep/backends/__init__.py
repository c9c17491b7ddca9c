"""Backends: `cpu` (onnxep's native kernels) and `reference` (onnx.reference, the fallback)."""
