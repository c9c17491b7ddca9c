"""A compiled subgraph: what If, Loop, Scan and SequenceMap run their bodies with.

At the kernel's construction each body GraphProto becomes an onnxep Graph (the body's inputs, then the outer-scope
values it reads; value types from the body's inputs / outputs / value_info, the enclosing graph's types of the outer
values and onnx shape inference of the body), optimized at the basic level only (Identity removal, constant folding,
Conv + affine folding: passes that keep every graph input and output), partitioned over the session's devices (cpu
first, the reference backend only when the session's fallback is on), compiled to plans and run by an Executor. An
outer value that is a constant of the enclosing graph becomes a constant of the body (so its kernels may pre-pack it);
the others are fed on each run from the enclosing plan's values (the step's extra inputs, see SubgraphScope).

Values: a sequence is a list of arrays, an optional is its value or None when empty (as the reference backend and
onnxruntime's run() have them). A sequence's tensors never live in a planned arena: the sequence ops copy the tensors
they put in one, and the bodies' outputs that go into one are copied when they share memory with a fed value."""
from __future__ import annotations

import numpy as np
import onnx

from onnxep.errors import InvalidGraph, OnnxepError
from onnxep.graph.ir import ValueType

#: graph_optimization_level the bodies are optimized at (ORT_ENABLE_BASIC)
BODY_LEVEL = 1


def _rewrap(e: OnnxepError, prefix: str) -> OnnxepError:
    msg = e.args[0] if e.args else ""
    try:
        return type(e)(f"{prefix}: {msg}")
    except Exception:       # an error type that takes other arguments: keep it as it is
        return e


class BodyOwner:
    """Mixin (before OpKernel) of a kernel holding one compiled subgraph as `self.body` (Loop, Scan, SequenceMap):
    release() frees it (nothing to free when __init__ failed before making it)."""

    def release(self):
        body = getattr(self, "body", None)
        if body is not None:
            body.release()


class Body:
    """One subgraph of a node, compiled. `run(feeds, outer, run_ctx)` -> the body's outputs, in order."""

    __slots__ = ("where", "attr", "input_names", "input_types", "output_names", "output_types", "outer_index",
                 "executor", "__weakref__")

    def __init__(self, g: onnx.GraphProto, info, attr: str):
        from onnxep.contracts.compile import compile as compile_partitions
        from onnxep.graph.executor import Executor
        from onnxep.graph.model import build_graph, graph_outer_names
        from onnxep.graph.partition import partition
        from onnxep.graph.passes import optimize

        self.where = f"{info.op_type} node {info.name!r} ({attr})"
        self.attr = attr
        scope = info.scope
        if scope is None:
            raise InvalidGraph(f"{self.where}: a kernel with subgraphs is made by the cpu backend's graph_plan_create "
                               f"(KernelInfo.scope is None)")
        self.executor = None
        reads = graph_outer_names(g) - {o for node in g.node for o in node.output}
        n = scope.n_inputs
        inner = {i.name for i in g.input} | {t.name for t in g.initializer}
        outer_consts = {}          # outer constant -> array: a constant of the body
        self.outer_index = []      # (outer name, its index among the step's inputs): fed each run
        model = onnx.ModelProto()
        model.ir_version = max(int(scope.ir_version), 3)
        for d, v in scope.opsets.items():
            op = model.opset_import.add()
            op.domain, op.version = d, int(v)
        model.functions.extend(scope.functions)
        body = model.graph
        body.CopyFrom(g)
        for k, x in enumerate(scope.outer):
            if x not in reads or x in inner:
                continue
            j = n + k
            vi = body.input.add()
            vi.name = x
            vt = info.input_types[j] if j < len(info.input_types) else None
            if j in info.constants:
                outer_consts[x] = info.constants[j]
                vt = ValueType.of_array(np.asarray(outer_consts[x])) if vt is None else vt
            else:
                self.outer_index.append((x, j))
            proto = vt.proto if vt is not None else None
            if proto is not None:
                vi.type.CopyFrom(proto)
        try:
            graph = build_graph(model)
            del model, body
            # a value_info with an empty type (an outer shape inference leaves some in bodies) says nothing: drop it,
            # so kernels see the value as untyped rather than as of an unknown kind
            graph.value_types = {x: vt for x, vt in graph.value_types.items() if vt.kind != "unknown"}
            for x, arr in outer_consts.items():
                graph.initializers[x] = arr
            graph.inputs = [(x, vt) for x, vt in graph.inputs if x not in outer_consts]
            self.input_names = [i.name for i in g.input]
            types = dict(graph.inputs)
            types.update(graph.overridable)
            self.input_types = [types.get(x) or graph.value_types.get(x) for x in self.input_names]
            self.output_names = [x for x, _ in graph.outputs]
            self.output_types = [vt for _, vt in graph.outputs]
            graph = optimize(graph, BODY_LEVEL, keep_ops=scope.forced)
            parts = partition(graph, scope.devices, scope.fallback, scope.forced)
            plans = compile_partitions(parts, scope.backends, scope.compile_ctx)
        except OnnxepError as e:
            raise _rewrap(e, f"{self.where}") from e
        consts = graph.constants
        out_consts = {x: consts[x] for x in self.output_names if x in consts}
        overridable = {x: graph.initializers[x] for x, _ in graph.overridable}
        self.executor = Executor(plans, scope.backends, self.output_names, out_consts, overridable)

    @property
    def plans(self):
        return [] if self.executor is None else list(self.executor.plans)

    def outer_feeds(self, ctx) -> dict:
        """The outer-scope values this body reads, from the step's extra inputs."""
        return {x: ctx.input(j) for x, j in self.outer_index}

    def run(self, feeds: dict, run_ctx) -> list:
        return self.executor.run_nested(feeds, self.output_names, run_ctx)

    def release(self) -> None:
        ex, self.executor = self.executor, None
        if ex is not None:
            for plan in ex.plans:
                ex.backends[plan.backend_name].graph_plan_free(plan)
            ex.plans = []


def run_context(ctx):
    """The enclosing run's RunContext (a fresh one when the kernel runs outside an executor)."""
    run = getattr(ctx, "run", None)
    if run is None:
        run = getattr(ctx.alloc, "__self__", None)
        if run is None or not hasattr(run, "recorder"):
            from onnxep.contracts.allocator import Stream
            from onnxep.graph.executor import RunContext
            run = RunContext(Stream("subgraph"), 1 << 40)
    return run


def scalar_feed(value, vt, dtype):
    """A scalar (iteration number, condition) shaped as the body declares the input: rank 1 when it says so."""
    a = np.array(value, dtype=dtype)
    if vt is not None and vt.shape is not None and len(vt.shape) == 1:
        a = a.reshape(1)
    return a


def owned(v, fed_owners):
    """`v` (a body output going into a sequence or a stacked output) copied when it shares memory with a value fed
    to the body (an outer tensor may live in the enclosing run's arena; a sequence must not hold it)."""
    if isinstance(v, np.ndarray) and fed_owners and _base(v) in fed_owners:
        return v.copy()
    return v


def _base(a):
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return id(a)


def fed_owners(values) -> set:
    return {_base(v) for v in values if isinstance(v, np.ndarray)}


def wrap_iteration(e: OnnxepError, what: str) -> OnnxepError:
    return _rewrap(e, what)
