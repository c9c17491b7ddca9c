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
    _FOUND.clear()
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
    _load_key(cls.domain, cls.op_type)
    _register(cls)
    return cls


def unregister(cls):
    _load_key(cls.domain, cls.op_type)
    classes = _REGISTRY.get((cls.domain, cls.op_type), [])
    if cls in classes:
        classes.remove(cls)
        _index(cls.domain, cls.op_type)


def modules() -> list:
    """Every op module's dotted name, family by family."""
    return [f"onnxep.ops.{fam}.{op}" for fam in _FAMILIES
            for op in importlib.import_module(f"onnxep.ops.{fam}").OPS]


#: (domain, op_type) -> the op modules defining kernels of it that are not imported yet. An op module is imported
#: at the first lookup of one of its ops (_index.INDEX says which, without importing): a process imports the few
#: dozen modules its models use, not all ~250 (about 4.5 MB of RSS and most of onnxep's import time).
_PENDING: dict[tuple[str, str], list[str]] = {}
_LOADED: set = set()


def _load_module(mod_name):
    if mod_name in _LOADED:
        return
    _LOADED.add(mod_name)
    mod = importlib.import_module(mod_name)
    for _, cls in inspect.getmembers(mod, inspect.isclass):
        if issubclass(cls, OpKernel) and cls is not OpKernel and cls.__module__ == mod.__name__ and cls.op_type:
            _register(cls)


def _load_key(domain, op_type):
    """Import the op modules of (domain, op_type) not imported yet, in registry order."""
    pending = _PENDING.pop((domain, op_type), None)
    if pending:
        for mod_name in pending:
            _load_module(mod_name)


def _load():
    """Index every op module by the ops _index.INDEX lists for it; import at once those it does not list (a module
    added since the index was written: write_index() writes it anew)."""
    from onnxep.ops._index import INDEX
    for mod_name in modules():
        keys = INDEX.get(mod_name)
        if keys is None:
            _load_module(mod_name)
            continue
        for key in keys:
            _PENDING.setdefault(key, []).append(mod_name)


def load_all():
    """Import every op module (all_kernels, and what needs the whole registry)."""
    for key in list(_PENDING):
        _load_key(*key)


def index() -> dict:
    """module name -> the (domain, op_type) pairs of the kernel classes it registers, every module imported (what
    _index.INDEX must hold)."""
    for mod_name in modules():
        _load_module(mod_name)
    out = {m: [] for m in modules()}
    for key, classes in _REGISTRY.items():
        for cls in classes:
            if cls.__module__ in out and key not in out[cls.__module__]:
                out[cls.__module__].append(key)
    return {m: tuple(sorted(keys)) for m, keys in out.items()}


def write_index(path=None) -> str:
    import os
    path = path or os.path.join(os.path.dirname(os.path.abspath(__file__)), "_index.py")
    lines = ['"""Generated by ops/_registry.py write_index() -- python -c "from onnxep.ops._registry import write_index;',
             'write_index()" --: the ops each op module registers, so that the registry imports a module at the first',
             'lookup of one of its ops. A module missing here is imported with onnxep; tests/contracts/',
             'test_kernel_contract.py checks this file against the modules."""',
             "", "INDEX = {"]
    for mod_name, keys in index().items():
        line = f"    {mod_name!r}: {keys!r},"
        if len(line) <= 120:
            lines.append(line)
        else:
            lines.append(f"    {mod_name!r}: (")
            lines.extend(f"        {k!r}," for k in keys)
            lines.append("    ),")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


#: (domain, op_type, opset) -> what lookup answered (cleared whenever a range changes): a session asks it several
#: times per node (the passes, partition, compile)
_FOUND: dict = {}


def lookup(domain: str, op_type: str, opset: int):
    """The kernel class for this op at this opset version, or None."""
    key = (domain, op_type, opset)
    try:
        return _FOUND[key]
    except KeyError:
        pass
    if _PENDING:
        _load_key(domain, op_type)
    found = None
    for since, until, cls in _RANGES.get((domain, op_type), ()):
        if since <= opset and (until is None or opset < until):
            found = cls
            break
    _FOUND[key] = found
    return found


def version_range(cls) -> tuple:
    """(since, until) of a registered class; until is exclusive, None when open-ended."""
    _load_key(cls.domain, cls.op_type)
    for since, until, c in _RANGES.get((cls.domain, cls.op_type), ()):
        if c is cls:
            return since, until
    raise KeyError(cls)


def all_kernels():
    load_all()
    return [c for classes in _REGISTRY.values() for c in classes]


_load()
