"""Constant folding: a node whose inputs are all constants is run once at load time with the cpu backend's kernel
and its outputs become constants. Weights computed by ConstantOfShape (the light model-zoo models) thereby become
initializers that Gemm/Conv pre-pack at compile.

Skipped: nodes with subgraphs, non-deterministic ops, nodes the cpu backend does not support, and outputs larger than
MAX_FOLDED_BYTES each (folding must not turn a tiny model into a huge one).

Exporters repeat the same constant computation once per layer (torch's TorchScript exporter writes the pads of every
"same"-padded conv as its own ConstantOfShape -> Concat -> Reshape -> Slice -> Transpose -> Reshape -> Cast chain). A
node whose op, attributes and input values (small ones, up to MEMO_BYTES in all) match a node folded before gets that
node's results (copies) without running a kernel."""
from __future__ import annotations

import numpy as np

from onnxep.backends.cpu import CPU_DEVICE
from onnxep.backends.cpu.device import KernelInfo
from onnxep.contracts.kernel import KernelContext
from onnxep.graph.ir import Graph, ValueType
from onnxep.graph.model import check_size
from onnxep.graph.partition import op_info
from onnxep.ops import _registry
from onnxep.ops.tensor.constant import _value as constant_value

NONDETERMINISTIC = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                    "Bernoulli", "Dropout"}
MAX_FOLDED_BYTES = 1 << 30
MEMO_BYTES = 4096         # inputs up to this many bytes in all make a memo key (see the module docstring)


def _alloc(shape, dtype=np.float32):
    check_size(shape, dtype, "constant folding", MAX_FOLDED_BYTES)
    return np.empty(shape, dtype)


def fold_constants(graph: Graph, ctx=None) -> Graph:
    constants = graph.constants
    folded = dict(graph.initializers)
    keep = []
    # each node is let go once handled: a folded one (its attributes, its Node) is gone before the next is run, not
    # held to the end beside every array folded so far (a model of ConstantOfShape-made weights folds hundreds)
    pending = graph.nodes
    graph.nodes = keep
    pending.reverse()
    memo = {}
    while pending:
        node = pending.pop()
        ins = [x for x in node.inputs if x]
        if (node.op_type in NONDETERMINISTIC or node.has_subgraph or not all(map(constants.__contains__, ins))
                or not node.outputs):
            keep.append(node)
            continue
        if node.op_type == "Constant" and not node.domain and len(node.outputs) == 1:
            v = constant_value(node.attrs)        # no kernel needed: the value is the attribute
            if v is not None:
                _store(graph, constants, folded, node.outputs[0], v)
                continue
        key = _memo_key(node, constants)
        if key is not None:
            hit = memo.get(key)
            if hit is not None:
                for name, v in zip(node.outputs, hit):
                    if name:           # (a copy: a later pass may edit one name's array in place)
                        _store(graph, constants, folded, name, v.copy())
                continue
        op = op_info(node, graph.value_types, constants)
        if not CPU_DEVICE.supports_op(op):
            keep.append(node)
            continue
        cls = _registry.lookup(node.domain, node.op_type, node.opset)
        kernel = cls(KernelInfo(node.name, node.op_type, node.domain, node.opset, dict(node.attrs),
                                tuple(op.input_types), tuple(op.output_types), dict(op.constants)))
        values = {x: constants[x] for x in ins}
        try:
            kernel.compute(KernelContext(values, tuple(node.inputs), tuple(node.outputs), _alloc, 0, (), node.name))
        except Exception:  # leave it to run time, where the error names the node
            keep.append(node)
            continue
        finally:
            kernel.release()
        outs = {o: values.get(o) for o in node.outputs if o}
        if not all(isinstance(v, np.ndarray) for v in outs.values()):
            keep.append(node)
            continue
        for name, v in outs.items():
            _store(graph, constants, folded, name, v)
        if key is not None:
            memo[key] = tuple(constants.get(o) if o else None for o in node.outputs)
    graph.initializers = folded
    return graph


_SCALARS = (int, float, str, bytes, bool)


def _memo_key(node, constants):
    """What decides a node's results: op, opset, attributes, output slots and input values; None when an input or an
    attribute is too large (or of a kind) not worth hashing."""
    attrs = []
    for k, v in node.attrs.items():
        if v is None or type(v) in _SCALARS:
            attrs.append((k, v))
        elif type(v) is list and all(type(e) in _SCALARS for e in v):
            attrs.append((k, tuple(v)))
        elif isinstance(v, np.ndarray) and v.nbytes <= MEMO_BYTES and v.dtype != object:
            attrs.append((k, v.dtype.str, v.shape, v.tobytes()))
        else:
            return None
    ins = []
    total = 0
    for x in node.inputs:
        if not x:
            ins.append(None)
            continue
        a = constants[x]
        total += a.nbytes
        if total > MEMO_BYTES or a.dtype == object:
            return None
        ins.append((a.dtype.str, a.shape, a.tobytes()))
    return (node.domain, node.op_type, node.opset, tuple(attrs), tuple(ins), tuple(bool(o) for o in node.outputs))


def _store(graph, constants, folded, name, v):
    v = v if v.flags.c_contiguous else np.ascontiguousarray(v)  # (ascontiguousarray makes 0-d 1-d)
    constants[name] = v
    folded[name] = v
    graph.value_types.setdefault(name, ValueType.of_array(v))
