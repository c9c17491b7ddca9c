"""The op registry: the explicit list of op modules, and lookup by (domain, op_type, opset).

Adding an op: write onnxep/ops/<family>/<op>.py with OpKernel subclasses, add "<op>" to OPS in
onnxep/ops/<family>/__init__.py, add tests/ops/test_<op>.py. The families (_FAMILIES) follow onnx/defs and
onnxruntime's providers/cpu folders."""
from __future__ import annotations

import importlib
import inspect

from onnxep.contracts.kernel import API_VERSION
from onnxep.ops._base import OpKernel

#: The op families, each a subpackage whose __init__ lists its op modules in OPS (one op per module). Ordered as
#: onnx/defs; the registry is the union of their OPS.
_FAMILIES = ("math", "tensor", "nn", "reduce", "rnn", "quant", "control", "sequence", "text", "image", "signal",
             "object_detection", "ml", "training", "onnxep")

_REGISTRY: dict[tuple[str, str], list[type[OpKernel]]] = {}
#: (domain, op_type) -> [(since, until, cls)], until exclusive (None: open-ended). Computed here, never written onto
#: the classes, so a kernel class that subclasses another registered one does not inherit its range.
_RANGES: dict[tuple[str, str], list[tuple]] = {}


def _register(cls):
    if cls.ort_version_supported != API_VERSION:
        raise ImportError(f"{cls.__name__} targets contract version {cls.ort_version_supported}, "
                          f"onnxep implements {API_VERSION}")
    if cls.flags != 0:
        raise ImportError(f"{cls.__name__}.flags must be 0")
    _REGISTRY.setdefault((cls.domain, cls.op_type), []).append(cls)
    _index(cls.domain, cls.op_type)


def _index(domain, op_type):
    classes = sorted(_REGISTRY.get((domain, op_type), []), key=lambda c: c.since)
    ranges = []
    for i, c in enumerate(classes):
        until = c.__dict__.get("until")  # only an `until` declared on this very class
        if until is None and i + 1 < len(classes):
            until = classes[i + 1].since
        ranges.append((c.since, until, c))
    _RANGES[(domain, op_type)] = ranges


def register(cls):
    """Register a kernel class from outside onnxep (your own op or domain). Usable as a class decorator.
    Refuses (ImportError) a class built for another contract version or with flags != 0."""
    if not (isinstance(cls, type) and issubclass(cls, OpKernel) and cls.op_type):
        raise TypeError(f"register expects an OpKernel subclass with op_type set, got {cls!r}")
    _register(cls)
    return cls


def unregister(cls):
    classes = _REGISTRY.get((cls.domain, cls.op_type), [])
    if cls in classes:
        classes.remove(cls)
        _index(cls.domain, cls.op_type)


def modules() -> list:
    """Every op module's dotted name, family by family."""
    return [f"onnxep.ops.{fam}.{op}" for fam in _FAMILIES
            for op in importlib.import_module(f"onnxep.ops.{fam}").OPS]


def _load():
    for mod_name in modules():
        mod = importlib.import_module(mod_name)
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if issubclass(cls, OpKernel) and cls is not OpKernel and cls.__module__ == mod.__name__ and cls.op_type:
                _register(cls)


def lookup(domain: str, op_type: str, opset: int):
    """The kernel class for this op at this opset version, or None."""
    for since, until, cls in _RANGES.get((domain, op_type), ()):
        if since <= opset and (until is None or opset < until):
            return cls
    return None


def version_range(cls) -> tuple:
    """(since, until) of a registered class; until is exclusive, None when open-ended."""
    for since, until, c in _RANGES.get((cls.domain, cls.op_type), ()):
        if c is cls:
            return since, until
    raise KeyError(cls)


def all_kernels():
    return [c for classes in _REGISTRY.values() for c in classes]


_load()
