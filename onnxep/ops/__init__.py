"""The cpu backend's op kernels: one op per file in a family subpackage (math, tensor, nn, onnxep for com.onnxep),
listed once in _registry._MODULES; shared helpers are the _*.py modules here and beside the ops that use them."""
