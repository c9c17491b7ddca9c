"""Helpers of the pattern-matching fusion passes (fuse_gelu, fuse_layernorm, fuse_matmul_bias, ...): who consumes a
value, constant scalars, float32 values, and the Fusion a pass records its rewrites in."""
from __future__ import annotations

import numpy as np

from onnxep.graph.ir import Graph
from onnxep.graph.passes._edit import INTERNAL_DOMAIN, Names, drop_unused_initializers, producers, reads


def keeps_any(ctx, ops) -> bool:
    """Whether the session forces any of `ops` onto the reference backend (ctx.keep_ops): a fusion of them must
    leave the graph as it is."""
    return ctx is not None and bool(ctx.keep_ops & set(ops))


def consumers(graph: Graph) -> dict:
    """name -> [nodes reading it] (subgraph references count, so a value a subgraph uses is never fused away)."""
    out: dict = {}
    for node in graph.nodes:
        for x in reads(node):
            out.setdefault(x, []).append(node)
    return out


def only_consumer(cons: dict, outputs: set, name: str, op_type: str | None = None):
    """The single node reading `name` (of `op_type`, default domain, when given), or None -- also when `name` is a
    graph output (its value must stay visible)."""
    users = cons.get(name, [])
    if len(users) != 1 or name in outputs:
        return None
    n = users[0]
    if op_type is not None and (n.op_type != op_type or n.domain != ""):
        return None
    return n


def other_input(node, name):
    """The input of a two-input node that is not `name` (None when both are, or the node has not two inputs)."""
    if len(node.inputs) != 2:
        return None
    a, b = node.inputs
    if a == name and b != name:
        return b
    if b == name and a != name:
        return a
    return None


def scalar_const(consts: dict, name, value: float, rtol=1e-6) -> bool:
    """`name` is a float32 constant holding one value (any shape of size 1) equal to `value` within rtol."""
    v = consts.get(name)
    if v is None or v.dtype != np.float32 or v.size != 1:
        return False
    return abs(float(v.reshape(())) - value) <= rtol * abs(value)


def half_x_times(consts, producer, cons, outputs, x, p, rtol=1e-6):
    """0.5 * x * p as exporters write the end of a Gelu, after p: (nodes, last node) or None. the forms:
    Mul(x, p) -> Mul(., 0.5); Mul(p, 0.5) -> Mul(x, .); Mul(x, 0.5) and Mul(that, p); operand order free; every
    intermediate read by the pattern only; 0.5 within rtol (a Fusion's consts, producer, cons and outputs)."""
    m1 = only_consumer(cons, outputs, p, "Mul")
    if m1 is None:
        return None
    q = other_input(m1, p)
    if q == x:                                           # Mul(x, p) -> Mul(., 0.5)
        m2 = only_consumer(cons, outputs, m1.outputs[0], "Mul")
        if m2 is None or not scalar_const(consts, other_input(m2, m1.outputs[0]), 0.5, rtol):
            return None
        return [m1, m2], m2
    if scalar_const(consts, q, 0.5, rtol):               # Mul(p, 0.5) -> Mul(x, .)
        m2 = only_consumer(cons, outputs, m1.outputs[0], "Mul")
        if m2 is None or other_input(m2, m1.outputs[0]) != x:
            return None
        return [m1, m2], m2
    half = producer.get(q)                               # Mul(x, 0.5) -> Mul(that, p)
    if (default_op(half, "Mul") and only_consumer(cons, outputs, q) is m1 and other_input(half, x) is not None
            and scalar_const(consts, other_input(half, x), 0.5, rtol)):
        return [half, m1], m1
    return None


def is_f32(graph: Graph, name) -> bool:
    vt = graph.value_types.get(name)
    return vt is not None and vt.kind == "tensor" and vt.type_str == "tensor(float)" and vt.shape is not None


def default_op(node, op_type) -> bool:
    return node is not None and node.domain == "" and node.op_type == op_type


def internal_op(node, op_type) -> bool:
    """`node` is one of onnxep's own com.onnxep ops of this type (what an earlier pass wrote)."""
    return node is not None and node.domain == INTERNAL_DOMAIN and node.op_type == op_type


class _Lazy(dict):
    """A dict made by make(graph) at its first use: a pass that finds nothing to rewrite never asks who produces or
    consumes a value, and building the maps walked every node once per pass. Read and written as a dict (get, [],
    in, iteration; producers are reassigned by absorb); the graph is the one the Fusion was made on, as it is then."""

    __slots__ = ("_make", "_graph")

    def __init__(self, make, graph):
        super().__init__()
        self._make, self._graph = make, graph

    def _fill(self):
        make, graph = self._make, self._graph
        self._make = self._graph = None
        dict.update(self, make(graph))

    __hash__ = None


def _filled(name):
    """_Lazy's override of dict.<name>: fill the dict on first use, then the plain dict method."""
    plain = getattr(dict, name)

    def method(self, *args):
        if self._make is not None:
            self._fill()
        return plain(self, *args)

    method.__name__ = name
    return method


for _name in ("get", "__getitem__", "__setitem__", "__delitem__", "__contains__", "__iter__", "__len__", "keys",
              "values", "items", "setdefault", "pop", "__eq__", "__repr__"):
    setattr(_Lazy, _name, _filled(_name))
del _name


class Fusion:
    """One run of a pattern-fusion pass: what it looks values up in (constants, producers, consumers, graph outputs,
    fresh names), and what it rewrites -- each matched pattern's nodes go, and the node the pattern becomes takes the
    place of the pattern's last node (`apply`, through replace_nodes)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.consts = graph.constants
        self.producer = _Lazy(producers, graph)
        self.cons = _Lazy(consumers, graph)
        self.outputs = {n for n, _ in graph.outputs}
        self.names = Names(graph)
        self._drop, self._replace = set(), {}

    def taken(self, nodes) -> bool:
        """Whether an earlier match already took any of `nodes`."""
        return any(id(n) in self._drop for n in nodes)

    def fuse(self, pattern, last, node) -> None:
        """`pattern`'s nodes go; `node` stands where `last` (one of them) stood."""
        self._drop.update(id(n) for n in pattern)
        self._replace[id(last)] = node

    def apply(self) -> Graph:
        if self._replace:
            replace_nodes(self.graph, self._drop, self._replace)
        return self.graph


def replace_nodes(graph: Graph, drop: set, replace: dict) -> None:
    """Node ids in `replace` give way to their new node (at the same place: the last node of a pattern, so every
    input of the new node is computed before it); the other ids in `drop` are removed; then the initializers nothing
    reads any more."""
    graph.nodes = [replace.get(id(n), n) for n in graph.nodes if id(n) in replace or id(n) not in drop]
    drop_unused_initializers(graph)
