"""The cpu backend's op kernels: one op per file, listed once in _registry._MODULES."""
