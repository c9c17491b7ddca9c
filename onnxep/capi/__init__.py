"""Import paths of onnxruntime's Python package that scripts use directly (`onnxruntime.capi...`), so
`import onnxep as onnxruntime` keeps them working."""
from onnxep.capi import onnxruntime_pybind11_state  # noqa: F401
