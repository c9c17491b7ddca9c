"""Small helpers the graph passes share: fresh value names, consumer counts, new nodes and value types."""
from __future__ import annotations


from onnxep.graph.ir import Graph, Node, ValueType
from onnxep.graph.model import graph_outer_names

INTERNAL_DOMAIN = "com.onnxep"    # onnxep's own ops (written by passes only); opset 1


class Names:
    """Fresh value / node names that clash with nothing in the graph."""

    def __init__(self, graph: Graph):
        self._graph, self._used = graph, None

    @property
    def used(self) -> set:
        """Every name of the graph as it was at the first call (the names new() gave since included): gathered at the
        first new(), not at construction -- most passes make a Names and then find nothing to rewrite."""
        if self._used is None:
            graph = self._graph
            used = set(graph.initializers) | set(graph.value_types) | {n for n, _ in graph.inputs}
            used |= {n for n, _ in graph.outputs}
            for node in graph.nodes:
                used.update(node.inputs)
                used.update(node.outputs)
                used.add(node.name)
            self._used, self._graph = used, None
        return self._used

    def new(self, base: str) -> str:
        name, i = base, 0
        used = self.used
        while name in used:
            i += 1
            name = f"{base}_{i}"
        used.add(name)
        return name


def reads(node: Node) -> list:
    """The value names a node reads: its inputs and the outer names its subgraphs use."""
    out = [x for x in node.inputs if x]
    if node.attrs and node.has_subgraph:
        for g in node.subgraphs:
            out.extend(sorted(graph_outer_names(g)))
    return out


def producers(graph: Graph) -> dict:
    """value name -> the node of `graph` that writes it."""
    return {o: n for n in graph.nodes for o in n.outputs if o}


def consumer_counts(graph: Graph) -> dict:
    """name -> how many node inputs (and subgraph references) read it; graph outputs count as one more reader."""
    counts: dict = {}
    for node in graph.nodes:
        for x in reads(node):
            counts[x] = counts.get(x, 0) + 1
    for name, _ in graph.outputs:
        counts[name] = counts.get(name, 0) + 1
    return counts


def make_node(graph: Graph, name: str, op_type: str, inputs, outputs, attrs: dict, domain: str = "") -> Node:
    """A Node at the opset the graph imports for `domain`."""
    if domain == INTERNAL_DOMAIN:
        graph.opsets.setdefault(INTERNAL_DOMAIN, 1)
    return Node(name, op_type, domain, tuple(inputs), tuple(outputs), dict(attrs), graph.opsets.get(domain, 0))


def drop_unused_initializers(graph: Graph) -> None:
    """Forget initializers no node, subgraph or graph output reads (overridable ones stay: they are inputs)."""
    used = {x for n in graph.nodes for x in reads(n)} | {n for n, _ in graph.outputs}
    used |= {n for n, _ in graph.overridable}
    graph.initializers = {k: v for k, v in graph.initializers.items() if k in used}


def tensor_type(like: ValueType | None, shape) -> ValueType:
    """A tensor ValueType with `like`'s element type and the given shape (dims may be None or symbolic)."""
    elem = like.elem_type if like is not None and like.kind == "tensor" else 0
    if elem == 0 or shape is None:
        return ValueType()
    dims = [d if isinstance(d, (int, str)) else None for d in shape]
    return ValueType.of_tensor(elem, dims)


def absorb(into: Node, node: Node, producer: dict, drop: set) -> None:
    """`into` takes over `node`'s output (the fusion passes: `node`'s work is now part of `into`); `node` is marked
    in `drop` for remove_nodes."""
    into.outputs = (node.outputs[0],)
    producer[node.outputs[0]] = into
    drop.add(id(node))


def remove_nodes(graph: Graph, drop: set) -> None:
    """Remove the nodes whose ids are in `drop`, then the initializers nothing reads any more."""
    if drop:
        graph.nodes = [n for n in graph.nodes if id(n) not in drop]
        drop_unused_initializers(graph)
