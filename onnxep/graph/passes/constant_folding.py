"""Constant folding: a node whose inputs are all constants is run once at load time with the cpu backend's kernel
and its outputs become constants. Weights computed by ConstantOfShape (the light model-zoo models) thereby become
initializers that Gemm/Conv pre-pack at compile.

Skipped: nodes with subgraphs, non-deterministic ops, nodes the cpu backend does not support, and outputs larger than
MAX_FOLDED_BYTES each (folding must not turn a tiny model into a huge one)."""
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
    while pending:
        node = pending.pop()
        ins = [x for x in node.inputs if x]
        if (node.op_type in NONDETERMINISTIC or node.has_subgraph or not all(x in constants for x in ins)
                or not node.outputs):
            keep.append(node)
            continue
        if node.op_type == "Constant" and not node.domain and len(node.outputs) == 1:
            v = constant_value(node.attrs)        # no kernel needed: the value is the attribute
            if v is not None:
                _store(graph, constants, folded, node.outputs[0], v)
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
    graph.initializers = folded
    return graph


def _store(graph, constants, folded, name, v):
    v = v if v.flags.c_contiguous else np.ascontiguousarray(v)  # (ascontiguousarray makes 0-d 1-d)
    constants[name] = v
    folded[name] = v
    graph.value_types.setdefault(name, ValueType.of_array(v))
