"""The op registry: the explicit list of op modules, and lookup by (domain, op_type, opset).

Adding an op: write onnxep/ops/<family>/<op>.py with OpKernel subclasses, add "<family>.<op>" to _MODULES, add
tests/ops/test_<op>.py. The families follow onnx/defs and onnxruntime's providers/cpu folders."""
from __future__ import annotations

import importlib
import inspect

from onnxep.contracts.kernel import API_VERSION
from onnxep.ops._base import OpKernel

_MODULES = (
    # -- math: elementwise arithmetic and activations, Gemm / MatMul, Softmax
    "math.abs", "math.add", "math.sub", "math.mul", "math.div", "math.sum", "math.max", "math.min",
    "math.neg", "math.exp", "math.sqrt", "math.erf", "math.tanh", "math.sigmoid",
    "math.relu", "math.leaky_relu", "math.clip",
    "math.gemm", "math.mat_mul",
    "math.softmax", "math.log_softmax",
    # -- tensor: shape and data movement
    "tensor.reshape", "tensor.flatten", "tensor.transpose", "tensor.concat", "tensor.unsqueeze", "tensor.squeeze",
    "tensor.identity", "tensor.shape", "tensor.gather", "tensor.scatter",
    "tensor.constant", "tensor.constant_of_shape",
    # -- nn: convolution, pooling, normalization, dropout
    "nn.conv",
    "nn.max_pool", "nn.average_pool", "nn.global_average_pool", "nn.global_max_pool",
    "nn.lrn", "nn.batch_normalization", "nn.dropout", "nn.layer_normalization",
    # -- onnxep: com.onnxep internal ops written by the graph passes (channel-last, transformer fusions)
    "onnxep.nhwc_conv", "onnxep.nhwc_pool", "onnxep.nhwc_lrn", "onnxep.channel_affine", "onnxep.channel_shuffle",
    "onnxep.gelu", "onnxep.fused_mat_mul", "onnxep.strided_mat_mul", "onnxep.masked_softmax",
    "onnxep.fused_attention",
)

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


def _load():
    for mod_name in _MODULES:
        mod = importlib.import_module(f"onnxep.ops.{mod_name}")
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
