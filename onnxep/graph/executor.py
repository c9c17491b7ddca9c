"""Stage 6, run: feed inputs, compute the plans in order, copy values at backend boundaries, free each value after
its last reader, return the requested outputs."""
from __future__ import annotations

import logging
import math
from time import perf_counter_ns

import numpy as np

from onnxep.contracts.allocator import host_bytes

from onnxep.contracts.backend import Buffer, Tensor, cpy_tensor
from onnxep.contracts.kernel import KernelContext
from onnxep.errors import Fail
from onnxep.graph.model import check_size
from onnxep.graph.planner import signature

#: onnxruntime's message when RunOptions.terminate stops a run (its error type: Fail)
TERMINATED = "Exiting due to terminate flag being set to true."


class RunContext:
    """Per-run state handed to backends: the allocator for kernel outputs. A planned run (graph/planner.py) takes
    them from its arena (`arena`); the rest come from the stream's registered allocator, or else the session's
    HostBlockPool (None: each on its own). A recording run (`recorder`) reports every allocation to the planner.
    `stop` (RunOptions.terminate, possibly set from another thread) ends the run at the next allocation, plan or
    traced step; `trace` (a StepTrace) sees every step of a profiled or per-node-logged run; `prune` runs only the
    nodes the requested outputs need (RunOptions.only_execute_path_to_fetches). `bound` (IOBinding): graph output
    name -> (array, strict), the buffer the output is written into (see BoundKernelContext); `copied` lists the bound
    outputs no kernel wrote in place, copied in once at the end of the run."""

    __slots__ = ("stream", "limit", "run_options", "pool", "recorder", "arena", "stop", "trace", "prune", "bound",
                 "copied")

    def __init__(self, stream, limit, run_options=None, pool=None):
        self.stream = stream
        self.limit = limit
        self.run_options = run_options
        self.pool = pool
        self.recorder = None
        self.arena = None
        self.stop = False
        self.trace = None
        self.prune = False
        self.bound = None
        self.copied = None

    def outside(self, shape, dtype) -> bool:
        """Whether a kernel may make an output of `shape` and `dtype` itself rather than through `alloc` (a view it
        keeps growing: ops/_grow.py). Not in a run the memory planner records, nor in one it serves from a single
        signature's plan: every run of a signature makes the same requests, which its plan and compiled program
        follow. In a signature family's run (a decoder's next step) the request it stands for, external in the
        family's plan, is passed over in the plan's order."""
        rec = self.recorder
        if rec is not None and (rec.__class__ is not StepTrace or rec.inner is not None):
            return False
        arena = self.arena
        if arena is None or arena.diverged:
            return True
        if arena.family is None:
            return False
        if arena.cached(shape, dtype) is None:
            arena.take(math.prod(shape) * np.dtype(dtype).itemsize)
        return True

    def alloc(self, shape, dtype=np.float32) -> np.ndarray:
        """An uninitialised array from the stream's allocator (size checked before allocating)."""
        if self.stop:
            raise Fail(TERMINATED)
        arena = self.arena
        if arena is not None:
            arr = arena.cached(shape, dtype)    # this request's array of the last run in this arena buffer
            if arr is not None:
                return arr
        hit = _SIZES.get((shape, dtype))
        if hit is None:
            dt = np.dtype(dtype)
            nbytes = math.prod(shape) * dt.itemsize
            if shape and min(shape) < 0:
                check_size(shape, dt, "tensor allocation", self.limit)  # raises, saying why
            hit = (nbytes, dt)
            if len(_SIZES) < _SIZES_MAX:
                _SIZES[(shape, dtype)] = hit
        nbytes, dt = hit
        if nbytes > self.limit:
            check_size(shape, dt, "tensor allocation", self.limit)  # raises, saying why
        if arena is not None:
            k = arena.k
            mem = arena.take(nbytes)
            if mem is not None:
                arr = mem.view(dt).reshape(shape)
                arena.keep(k, shape, dtype, arr)
                return arr
        rec = self.recorder
        if not self.stream.uses_default_allocator:
            mem = self.stream.alloc(nbytes)
        elif self.pool is None or (rec is not None and (rec.__class__ is not StepTrace or rec.inner is not None)):
            mem = host_bytes(nbytes)        # a recording run keeps no pool: each tensor goes after its last reader
        else:
            mem = self.pool.take(nbytes)
        if rec is not None:
            rec.on_alloc(nbytes, mem)
        return mem.view(dt).reshape(shape)


_SIZES = {}          # (shape, dtype) -> (bytes, numpy dtype) of valid shapes: alloc's arithmetic once per shape
_SIZES_MAX = 65536


class StepTrace:
    """run_ctx.recorder while a run is profiled or logged per node. The cpu backend reports each kernel to its
    recorder (Backend.records_steps); the executor reports any other plan as one step. It stops the run before a step
    when `run_ctx.stop` is set, times each step into Chrome-trace events like onnxruntime's profiler
    ("<node>_kernel_time", cat "Node"), and passes on to the planner's recorder (`inner`, on a recording run) all it
    would have seen."""

    __slots__ = ("inner", "run_ctx", "events", "log", "origin", "pid", "tid", "names", "k", "t0", "post_ns")

    def __init__(self, run_ctx, events=None, log=None, origin=0, pid=0, tid=0):
        self.inner = None
        self.run_ctx = run_ctx
        self.events = events      # list the steps' records are appended to (_Profiler.run_events), or None
        self.log = log            # the run's _Log (session.py) for one verbose record per step, or None
        self.origin = origin      # perf_counter_ns of the profile's start (events' ts are microseconds from it)
        self.pid = pid
        self.tid = tid
        self.names = ()           # the plan's steps: (node name, op, provider, node index)
        self.k = 0
        self.t0 = 0
        # ns spent recording steps after the walk (a compiled run's timed steps): no part of the run's own time
        self.post_ns = 0

    def enter(self, names) -> None:
        self.names = names
        self.k = 0

    def on_alloc(self, nbytes, mem) -> None:
        if self.inner is not None:
            self.inner.on_alloc(nbytes, mem)

    def begin_step(self, ins, values) -> None:
        if self.run_ctx.stop:
            raise Fail(TERMINATED)
        if self.inner is not None:
            self.inner.begin_step(ins, values)
        self.t0 = perf_counter_ns()

    def end_step(self, ins, outs, values, inplace=()) -> None:
        t1 = perf_counter_ns()
        if self.inner is not None:
            self.inner.end_step(ins, outs, values, inplace)
        k = self.k
        self.k = k + 1
        self.step(k, self.t0, t1, ins, outs, values)

    def step(self, k, t0, t1, ins, outs, values) -> None:
        """Record step `k` of the current plan as run from t0 to t1 (perf_counter_ns), its inputs and outputs (names)
        read in `values` for their types and shapes. end_step calls it; a compiled run (backends/cpu/runloop.py)
        calls it for each step it timed, after the run."""
        names = self.names
        name, op, provider, index = names[k] if k < len(names) else ("?", "?", "?", -1)
        if self.events is not None:
            # one flat tuple of atomic values (ints, strings, the arrays' shape tuples): the collector untracks it at
            # the first young collection that sees it, so a long profile does not fill the old generation (dicts per
            # event did, and a full collection -- 15-40 ms on SqueezeNet -- landed inside some kernel's timed span
            # every few dozen runs). _Profiler.write turns the records into onnxruntime's events.
            shapes_in = _type_shapes(ins, values)
            self.events.append((self.tid, t0, t1, name, op, provider, index, len(shapes_in) // 2) + shapes_in
                               + _type_shapes(outs, values))
        if self.log is not None:
            self.log.log(logging.DEBUG, "node %r (%s) on %s: %.1f us", name, op, provider, (t1 - t0) / 1000)

    def bind(self, name, values) -> None:
        if self.inner is not None:
            self.inner.bind(name, values)


def _type_shapes(names, values) -> tuple:
    """The tensors among `names`, flat: (onnxruntime's type name, shape, type name, shape, ...); the profile writes
    each pair as {"float": [2, 3]}, onnxruntime's notation."""
    out = ()
    for x in names:
        v = values.get(x) if x else None
        if isinstance(v, np.ndarray):
            dt = v.dtype
            name = _TYPE_NAMES.get(dt)
            if name is None:     # (dtype.name is slow: once per dtype)
                name = _TYPE_NAMES[dt] = _ORT_TYPE_NAMES.get(dt.name, dt.name)
            out += (name, v.shape)
    return out


_ORT_TYPE_NAMES = {"float32": "float", "float64": "double", "object": "string"}
_TYPE_NAMES = {}


class Executor:
    def __init__(self, plans, backends, graph_outputs, constants, overridable, memory=None, plan_nodes=None,
                 providers=None):
        self.plans = plans
        # for traces: per plan, its nodes as (name, op type, node index); backend name -> provider name
        self.plan_nodes = plan_nodes if plan_nodes is not None else [() for _ in plans]
        self.providers = providers or {}
        self._trace_names = None
        self._pruned = {}
        self.memory = memory                  # ArenaPlanner, or None: every allocation on its own
        self.backends = backends              # device name -> Backend
        self.constants = constants            # non-overridable initializers that are graph outputs
        self.overridable = overridable        # name -> default array
        producer = {}
        for i, p in enumerate(plans):
            for o in p.outputs:
                producer[o] = i
        self.graph_outputs = list(graph_outputs)
        # boundary copies: inputs of plan i produced by a plan on another backend
        self.copies = []
        for i, p in enumerate(plans):
            self.copies.append(tuple((x, plans[producer[x]].backend_name) for x in p.inputs if x in producer
                                     and plans[producer[x]].backend_name != p.backend_name))
        last = {}
        for i, p in enumerate(plans):
            for x in p.inputs:
                last[x] = i
        keep = set(graph_outputs)
        self.frees = [tuple(x for x in p.inputs if last.get(x) == i and x not in keep) for i, p in enumerate(plans)]

    def enable_appends(self, graph_inputs) -> frozenset:
        """Outputs that grow in place (ops/_grow.py): every graph output that each plan reads, if at all, as a
        strided view (a cpu plan's strided_reads; any other plan reading it rules it out) may be made by its Concat
        as a view with spare rows (the cpu plans' grow_outputs). Returns the graph inputs read only that way: a view
        fed there is not copied to a C-contiguous array first."""
        reads = [p.strided_reads() if hasattr(p, "strided_reads") else None for p in self.plans]

        def taken(x):
            for p, r in zip(self.plans, reads):
                if (x in p.inputs) if r is None else not r.get(x, True):
                    return False
            return True

        outs = frozenset(o for o in self.graph_outputs if taken(o))
        for p, r in zip(self.plans, reads):
            if r is not None:
                p.grow_outputs(outs, r)
        return frozenset(x for x in graph_inputs if taken(x))

    def run(self, feeds: dict, output_names, run_ctx) -> list:
        if run_ctx.prune:
            run_ctx.prune = False
            return self.pruned(output_names).run(feeds, output_names, run_ctx)
        memory = self.memory
        token = None if memory is None else memory.start(signature(feeds), run_ctx)
        trace = run_ctx.trace
        if trace is not None:
            trace.inner, run_ctx.recorder = run_ctx.recorder, trace
        ok = False
        try:
            if run_ctx.stream.uses_default_allocator:   # (running() checks nothing for it)
                out = self._run(feeds, output_names, run_ctx)
            else:
                with run_ctx.stream.running():
                    out = self._run(feeds, output_names, run_ctx)
            ok = True
        finally:
            if trace is not None:
                run_ctx.recorder, trace.inner = trace.inner, None
            if memory is not None:
                memory.finish(token, run_ctx, self.graph_outputs, ok)
        return out

    def run_nested(self, feeds: dict, output_names, run_ctx) -> list:
        """A subgraph's run inside a step of an enclosing run (If / Loop / Scan / SequenceMap bodies): the plans
        only, with the enclosing run's context (its allocator, RunOptions.terminate) but without its memory plan,
        recorder, trace or pruning, which see the enclosing step as one step -- nor its host block pool: a loop keeps
        every iteration's scan outputs alive, and the pool would search through all of them on each allocation."""
        saved = (run_ctx.recorder, run_ctx.arena, run_ctx.trace, run_ctx.prune, run_ctx.pool, run_ctx.bound)
        run_ctx.recorder = run_ctx.arena = run_ctx.trace = run_ctx.pool = run_ctx.bound = None
        run_ctx.prune = False
        try:
            return self._run(feeds, output_names, run_ctx)
        finally:
            run_ctx.recorder, run_ctx.arena, run_ctx.trace, run_ctx.prune, run_ctx.pool, run_ctx.bound = saved

    def _run(self, feeds: dict, output_names, run_ctx) -> list:
        values = dict(self.overridable)
        values.update(feeds)
        rec = run_ctx.recorder
        trace = run_ctx.trace
        names = None if trace is None else self.trace_names()
        for i, plan in enumerate(self.plans):
            if run_ctx.stop:
                raise Fail(TERMINATED)
            if trace is not None:
                trace.enter(names[i])
            backend = self.backends[plan.backend_name]
            for x, src_name in self.copies[i]:
                v = values[x]
                if isinstance(v, np.ndarray) and v.dtype != object:
                    if rec is not None:
                        rec.begin_step((x,), values)
                    values[x] = self._boundary_copy(x, v, self.backends[src_name], backend, run_ctx)
                    if rec is not None:
                        rec.bind(x, values)
            per_plan = rec is not None and not backend.records_steps
            if per_plan:
                rec.begin_step(plan.inputs, values)
            backend.graph_plan_compute(plan, values, run_ctx)
            if per_plan:
                rec.end_step(plan.inputs, plan.outputs, values)
            for x in self.frees[i]:
                values.pop(x, None)
        out = []
        arena = run_ctx.arena
        bound = run_ctx.bound
        for name in output_names:
            if bound is not None and name in bound:
                out.append(_hand_to_bound(name, values[name] if name in values else self.constants[name],
                                          bound[name], run_ctx))
                continue
            if name in values:
                v = values[name]
                # never hand out arena memory (only a run that left its plan could: the plan keeps what outputs
                # live in outside the arena), nor a view of a constant (shared read-only between sessions, or the
                # session's own): the caller owns what run() returns
                if isinstance(v, np.ndarray) and (not v.flags.writeable or (
                        arena is not None and arena.diverged and np.may_share_memory(v, arena.mem))):
                    v = v.copy()
            else:
                v = self.constants[name]
                if isinstance(v, np.ndarray):
                    v = v.copy()
            out.append(v)
        return out

    def trace_names(self) -> list:
        """Per plan, the (node name, op, provider, node index) of each step a StepTrace sees: a cpu plan's kernels
        (from its steps), any other plan as one step named after its nodes."""
        names = self._trace_names
        if names is None:
            names = []
            for plan, nodes in zip(self.plans, self.plan_nodes):
                provider = self.providers.get(plan.backend_name, plan.backend_name)
                index = {n: i for n, _, i in nodes}
                steps = getattr(plan, "steps", None)
                if steps is not None and self.backends[plan.backend_name].records_steps:
                    names.append(tuple((s[5], s[6], provider, index.get(s[5], -1)) for s in steps))
                elif nodes:
                    label = nodes[0][0] if len(nodes) == 1 else f"{nodes[0][0]}..{nodes[-1][0]}"
                    ops = "+".join(dict.fromkeys(op for _, op, _ in nodes))
                    names.append(((label, ops, provider, nodes[0][2]),))
                else:
                    names.append(((plan.describe(), "?", provider, -1),))
            self._trace_names = names
        return names

    def pruned(self, output_names) -> "Executor":
        """An executor over only the nodes `output_names` need (RunOptions.only_execute_path_to_fetches): a cpu plan
        keeps the kernels whose outputs lead there, another plan is kept whole or dropped. No memory planner (its
        record is of whole runs). Made once per set of outputs."""
        key = tuple(output_names)
        ex = self._pruned.get(key)
        if ex is not None:
            return ex
        from onnxep.backends.cpu.device import CpuPlan      # (the one backend whose plans are cut per kernel)
        need = set(output_names)
        plans, nodes = [], []
        for plan, plan_nodes in zip(reversed(self.plans), reversed(self.plan_nodes)):
            outs = [o for o in plan.outputs if o in need]
            if not outs:
                continue
            steps = getattr(plan, "steps", None)
            # (a step of a node with subgraphs lists the outer-scope values its bodies read among its inputs: the
            # cut keeps their producers)
            if type(plan) is CpuPlan:
                live, kept = set(outs), []
                for j in range(len(steps) - 1, -1, -1):
                    s = steps[j]
                    if any(o in live for o in s[2] if o):
                        kept.append(j)
                        live.update(x for x in s[1] if x)
                kept.reverse()
                new_index = {j: n for n, j in enumerate(kept)}
                slots = {new_index[j]: slot for j, slot in plan.slots.items() if j in new_index}
                inputs = [x for x in plan.inputs if x in live]
                plan = CpuPlan(inputs, outs, [steps[j] for j in kept], plan.constants, None, slots)
            need.update(plan.inputs)
            plans.append(plan)
            nodes.append(plan_nodes)
        plans.reverse()
        nodes.reverse()
        ex = Executor(plans, self.backends, self.graph_outputs, self.constants, self.overridable, None, nodes,
                      self.providers)
        if len(self._pruned) < 64:
            self._pruned[key] = ex
        return ex

    def _boundary_copy(self, name, v, src_backend, dst_backend, run_ctx):
        src = Tensor(name, v.dtype, v.shape, _HostView(v), 0)
        dst_arr = run_ctx.alloc(v.shape, v.dtype)
        dst = Tensor(name, v.dtype, v.shape, _HostView(dst_arr), 0)
        cpy_tensor(src_backend, src, dst_backend, dst)
        return dst_arr


def _hand_to_bound(name, v, binding, run_ctx):
    """Output `v` for the IOBinding buffer `binding` = (array, strict): the array itself when a kernel wrote it
    there; else v copied into it once (v is a view of an input, a constant, or a kernel's own array); an output of
    another shape or type is an error for a preallocated buffer (as in onnxruntime), a new array otherwise."""
    target, strict = binding
    if v is target:
        return v
    if isinstance(v, np.ndarray) and v.shape == target.shape and v.dtype == target.dtype:
        np.copyto(target, v)
        if run_ctx.copied is not None:
            run_ctx.copied.append(name)
        return target
    if strict:
        raise bound_mismatch(name, v, target)
    return v


def bound_mismatch(name, v, target, node=None):
    """onnxruntime's error for an output that does not fit the buffer bound to it."""
    from onnxep.errors import InvalidArgument
    where = f" of node '{node}'" if node else ""
    dtype = getattr(v, "dtype", None)
    if dtype is not None and dtype != target.dtype:
        return InvalidArgument(f"Unexpected output data type for output '{name}'{where}. Actual: "
                               f"({_tensor_type(target.dtype)}) , expected: ({_tensor_type(dtype)})")
    shape = "{" + ",".join(map(str, getattr(v, "shape", ()))) + "}"
    return InvalidArgument(f"The output OrtValue provided for output '{name}'{where} has shape "
                           f"{{{','.join(map(str, target.shape))}}} but the computed output shape for this run is "
                           f"{shape}. When calling Run() with pre-allocated output OrtValues on a model with dynamic "
                           f"output shapes, either supply unallocated output OrtValues or ensure the pre-allocated "
                           f"shapes match the expected output shapes for each run.")


def _tensor_type(dt) -> str:
    return f"tensor({_ORT_TYPE_NAMES.get(np.dtype(dt).name, np.dtype(dt).name)})"


class BoundKernelContext(KernelContext):
    """The KernelContext of a run with IOBinding outputs (run_ctx.bound): output(i) of a bound graph output hands the
    kernel the bound array instead of allocating one, so the kernel writes the output in place. The arena and the
    planner's recorder still see the request (the arena's request order is the record's)."""

    __slots__ = ()

    def output(self, i: int, shape, dtype=np.float32) -> np.ndarray:
        outs = self.outs
        o = outs[i] if i < len(outs) else None
        run = self.run
        binding = run.bound.get(o) if o and run is not None and run.bound else None
        if binding is None or (i == 0 and self.slot is not None):
            return KernelContext.output(self, i, shape, dtype)
        target, strict = binding
        shape = tuple(shape)
        if target.shape != shape or target.dtype != np.dtype(dtype):
            if strict:
                raise bound_mismatch(o, _Shaped(shape, np.dtype(dtype)), target, self.node)
            return KernelContext.output(self, i, shape, dtype)
        if run.stop:
            raise Fail(TERMINATED)
        arena = run.arena
        if arena is not None:
            arena.take(target.nbytes)        # (an output is external to the arena: nothing is taken, the count moves)
        if run.recorder is not None:
            run.recorder.on_alloc(target.nbytes, target)
        self.values[o] = target
        return target


class _Shaped:
    """(shape, dtype) of an output that was not allocated, for bound_mismatch's message."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


class _HostView(Buffer):
    """A Buffer over an existing host array (used to name tensors at a boundary copy)."""

    __slots__ = ()

    def __init__(self, arr):
        super().__init__(None, arr.nbytes, np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
