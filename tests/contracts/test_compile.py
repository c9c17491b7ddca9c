"""The compile step against seed 003_a6c6328fd6e65493.txt (OrtEp::Compile).

Oracle: object identity (what a plan can reach) and numpy."""
import gc

import numpy as np
import pytest
from onnx import helper

from onnxep.backends.cpu import CPU_DEVICE
from onnxep.backends.reference import REFERENCE_DEVICE
from onnxep.contracts import Stream
from onnxep.contracts.backend import BufferType
from onnxep.contracts.compile import CompileContext, compile
from onnxep.graph.ir import Graph, Node
from onnxep.graph.model import build_graph
from onnxep.graph.partition import Partition, partition
from tests._util import make_model


def _parts():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    g = build_graph(make_model(nodes, {"x": np.zeros((2, 3), np.float32)}, ["y"]))
    return g, partition(g, [CPU_DEVICE, REFERENCE_DEVICE], forced={"Neg"})


def _backends():
    return {d.name: d.init_backend(Stream()) for d in (CPU_DEVICE, REFERENCE_DEVICE)}


def _reachable(roots, limit=200000):
    seen, stack = {}, list(roots)
    while stack and len(seen) < limit:
        o = stack.pop()
        if id(o) in seen or isinstance(o, (type, type(gc))):
            continue
        seen[id(o)] = o
        stack.extend(gc.get_referents(o))
    return seen


def test_one_plan_per_partition_in_order():
    # seed 003: "Implementer must set a OrtNodeComputeInfo instance for each OrtGraph in order to define its
    # computation function."
    _, parts = _parts()
    plans = compile(parts, _backends(), CompileContext(weight_allocator=BufferType("w", Stream())))
    assert [p.backend_name for p in plans] == [p.backend for p in parts] == ["cpu", "reference", "cpu"]
    assert [p.inputs for p in plans] == [("x",), ("a",), ("b",)]


def test_graph_objects_are_not_kept_after_compile():
    # seed 003: "Do NOT cache the provided OrtGraph instances in any of the OrtNodeComputeInfo functions because the
    # graphs are only valid for the duration of the call to Compile. Any graph/node/input/output names that are needed
    # by the OrtNodeComputeInfo functions must be copied and stored by the OrtEp."
    g, parts = _parts()
    plans = compile(parts, _backends(), CompileContext(weight_allocator=BufferType("w", Stream())))
    reach = _reachable(plans)
    forbidden = {id(g)} | {id(p) for p in parts} | {id(n) for p in parts for n in p.nodes} | {
        id(p.nodes) for p in parts}
    leaked = [type(reach[i]).__name__ for i in forbidden if i in reach]
    assert not leaked, leaked
    assert not any(isinstance(o, (Graph, Node, Partition)) for o in reach.values())


def test_failed_compile_frees_the_plans_already_made():
    _, parts = _parts()
    backends = _backends()
    released = []

    class Exploding:
        def graph_plan_create(self, part, ctx):
            raise RuntimeError("cannot compile")

    backends["reference"] = Exploding()
    import onnxep.ops.math.relu as relu
    orig = relu.Relu_6.release
    relu.Relu_6.release = lambda self: released.append(self.name)
    try:
        with pytest.raises(RuntimeError, match="cannot compile"):
            compile(parts, backends, CompileContext(weight_allocator=BufferType("w", Stream())))
    finally:
        relu.Relu_6.release = orig
    assert released == [parts[0].nodes[0].name]
