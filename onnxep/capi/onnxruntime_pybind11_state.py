"""onnxruntime.capi.onnxruntime_pybind11_state: the exception types, under onnxruntime's module path."""
from onnxep.errors import *  # noqa: F401,F403
from onnxep.errors import __all__  # noqa: F401
