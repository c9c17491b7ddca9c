"""Stage 3, partition: each node goes to the first device whose supports_op accepts it (cpu before reference);
consecutive nodes of one device form a partition. Partitions run in order; values crossing from one device's
partition to another's are copied at the boundary (executor)."""
from __future__ import annotations

from dataclasses import dataclass, field

from onnxep.errors import NotImplemented as OnnxepNotImplemented
from onnxep.graph.ir import Graph, OpInfo, ValueType
from onnxep.graph.model import graph_outer_names


@dataclass
class Partition:
    backend: str                      # device name
    nodes: list
    inputs: list                      # names read from outside (graph inputs, other partitions, overridable inits)
    outputs: list                     # names other partitions or the graph outputs need
    constants: dict                   # name -> array, the non-overridable initializers its nodes read
    value_types: dict
    opsets: dict
    ir_version: int
    functions: list = field(default_factory=list)
    context: object = None            # a loaded EPContext blob (graph/epcontext.py): the backend rebuilds the plan from it
    # how the session placed nodes, for kernels that compile subgraphs (If / Loop / Scan / SequenceMap bodies are
    # partitioned the same way): the devices in order, whether the fallback is on, the op types forced off the first
    devices: tuple = ()
    fallback: bool = True
    forced: frozenset = frozenset()
    #: id(node) -> the OpInfo partitioning made of it (assign): op_info hands each out once (compile asks once per
    #: node), not kept past it -- an OpInfo holds the node's constants, which compile drops once packed
    made: dict = field(default_factory=dict)

    def op_info(self, node) -> OpInfo:
        op = self.made.pop(id(node), None)
        if op is not None and op.node is node:
            return op
        return op_info(node, self.value_types, self.constants)


def subgraph_reads(node) -> tuple:
    """The names a node's subgraphs read from the enclosing scope, sorted (graph_outer_names, less what a body's own
    nodes produce: a body whose nodes are not in topological order reads nothing of its own from outside)."""
    names = set()
    for g in node.subgraphs:
        produced = {o for n in g.node for o in n.output}
        names |= graph_outer_names(g) - produced
    return tuple(sorted(names))


def op_info(node, value_types, constants) -> OpInfo:
    its = [value_types.get(x) if x else None for x in node.inputs]
    ots = [value_types.get(x) if x else None for x in node.outputs]
    for i, x in enumerate(node.inputs):  # constants are always fully typed, even without shape inference
        if x in constants and its[i] is None:
            its[i] = ValueType.of_array(constants[x])
    consts = {i: constants[x] for i, x in enumerate(node.inputs) if x and x in constants}
    return OpInfo(node, its, ots, consts)


def assign(graph: Graph, devices, fallback: bool = True, forced=frozenset(), pinned=None, made=None) -> list:
    """Device name per node (same order as graph.nodes). Op types in `forced` skip the first device (debugging aid:
    session config 'onnxep.fallback_op_types'). `pinned`: node name -> device name for nodes already compiled for a
    device (EPContext nodes); no supports_op is asked for them. `made` (a dict) gets id(node) -> its OpInfo."""
    constants = graph.constants
    pinned = pinned or {}
    names = []
    for node in graph.nodes:
        if node.name in pinned:
            names.append(pinned[node.name])
            continue
        op = op_info(node, graph.value_types, constants)
        if made is not None:
            made[id(node)] = op
        chosen = None
        for i, dev in enumerate(devices):
            if i > 0 and not fallback:
                break
            if i == 0 and node.op_type in forced and fallback:
                continue
            if dev.supports_op(op):
                chosen = dev.name
                break
        if chosen is None:
            what = (f"node {node.name!r} (op {node.domain + '.' if node.domain else ''}{node.op_type}, opset "
                    f"{node.opset}, input types {[t.type_str if t else None for t in op.input_types]})")
            if fallback:
                raise OnnxepNotImplemented(f"{what}: no backend supports it ({', '.join(d.name for d in devices)})")
            raise OnnxepNotImplemented(f"{what} is not supported by the {devices[0].name} backend and the fallback "
                                       f"is off (session config 'session.disable_cpu_ep_fallback')")
        names.append(chosen)
    return names


def partition(graph: Graph, devices, fallback: bool = True, forced=frozenset(), pinned=None) -> list:
    """Consecutive nodes of one device form a partition; a pinned node (see `assign`) is always a partition alone."""
    pinned = pinned or {}
    made = {}
    placement = assign(graph, devices, fallback, forced, pinned, made)
    groups = []
    for node, dev in zip(graph.nodes, placement):
        if groups and groups[-1][0] == dev and node.name not in pinned and groups[-1][1][-1].name not in pinned:
            groups[-1][1].append(node)
        else:
            groups.append((dev, [node]))
    graph_outputs = {n for n, _ in graph.outputs}
    constants = graph.constants
    # names each group reads (including names read inside subgraphs)
    reads = []
    for _, nodes in groups:
        r = []
        for n in nodes:
            r.extend(x for x in n.inputs if x)
            if n.attrs and n.has_subgraph:
                r.extend(subgraph_reads(n))
        reads.append(r)
    last_read = {}       # name -> the last group reading it (a group's outputs are what a later group reads)
    for gi, r in enumerate(reads):
        for x in r:
            last_read[x] = gi
    parts = []
    for gi, (dev, nodes) in enumerate(groups):
        produced = {o for n in nodes for o in n.outputs if o}
        inputs, seen = [], set()
        for x in reads[gi]:
            if x not in produced and x not in seen and x not in constants:
                seen.add(x)
                inputs.append(x)
        outputs = [o for n in nodes for o in n.outputs if o and (last_read.get(o, -1) > gi or o in graph_outputs)]
        used_consts = {x: constants[x] for x in reads[gi] if x in constants and x not in produced}
        parts.append(Partition(dev, nodes, inputs, outputs, used_consts, graph.value_types, graph.opsets,
                               graph.ir_version, graph.functions, devices=tuple(devices), fallback=fallback,
                               forced=frozenset(forced),
                               made={id(n): made[id(n)] for n in nodes if id(n) in made}))
    return parts
