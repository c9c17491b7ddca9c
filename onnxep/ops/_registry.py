"""The op registry: the explicit list of op modules, and lookup by (domain, op_type, opset).

Adding an op: write ops/<snake_op>.py with OpKernel subclasses, add its module name to _MODULES, add a test."""
from __future__ import annotations

import importlib
import inspect

from onnxep.contracts.kernel import API_VERSION
from onnxep.ops._base import OpKernel

_MODULES = (
    # -- elementwise, shape and tensor ops
    "relu",
    # -- gemm, matmul, conv
    "gemm",
    "mat_mul",
    "conv",
    # -- pooling, normalization, softmax
    # -- (more groups go here)
)

_REGISTRY: dict[tuple[str, str], list[type[OpKernel]]] = {}


def _register(cls):
    if cls.ort_version_supported != API_VERSION:
        raise ImportError(f"{cls.__name__} targets contract version {cls.ort_version_supported}, "
                          f"onnxep implements {API_VERSION}")
    if cls.flags != 0:
        raise ImportError(f"{cls.__name__}.flags must be 0")
    _REGISTRY.setdefault((cls.domain, cls.op_type), []).append(cls)


def _load():
    for mod_name in _MODULES:
        mod = importlib.import_module(f"onnxep.ops.{mod_name}")
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if issubclass(cls, OpKernel) and cls is not OpKernel and cls.__module__ == mod.__name__ and cls.op_type:
                _register(cls)
    for classes in _REGISTRY.values():
        classes.sort(key=lambda c: c.since)
        for a, b in zip(classes, classes[1:]):
            if a.until is None:
                a.until = b.since


def lookup(domain: str, op_type: str, opset: int):
    """The kernel class for this op at this opset version, or None."""
    for cls in _REGISTRY.get((domain, op_type), ()):
        if cls.since <= opset and (cls.until is None or opset < cls.until):
            return cls
    return None


def all_kernels():
    return [c for classes in _REGISTRY.values() for c in classes]


_load()
