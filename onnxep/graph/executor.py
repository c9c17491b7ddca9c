"""Stage 6, run: feed inputs, compute the plans in order, copy values at backend boundaries, free each value after
its last reader, return the requested outputs."""
from __future__ import annotations

import math

import numpy as np

from onnxep.contracts.allocator import host_bytes

from onnxep.contracts.backend import Buffer, Tensor, cpy_tensor
from onnxep.graph.model import check_size
from onnxep.graph.planner import signature


class RunContext:
    """Per-run state handed to backends: the allocator for kernel outputs. A planned run (graph/planner.py) takes
    them from its arena (`arena`); the rest come from the stream's registered allocator, or else the session's
    HostBlockPool. A recording run (`recorder`) reports every allocation to the planner."""

    __slots__ = ("stream", "limit", "run_options", "pool", "recorder", "arena")

    def __init__(self, stream, limit, run_options=None, pool=None):
        self.stream = stream
        self.limit = limit
        self.run_options = run_options
        self.pool = pool
        self.recorder = None
        self.arena = None

    def alloc(self, shape, dtype=np.float32) -> np.ndarray:
        """An uninitialised array from the stream's allocator (size checked before allocating)."""
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
        if not self.stream.uses_default_allocator:
            mem = self.stream.alloc(nbytes)
        elif self.pool is None or self.recorder is not None:
            mem = host_bytes(nbytes)        # a recording run keeps no pool: each tensor goes after its last reader
        else:
            mem = self.pool.take(nbytes)
        if self.recorder is not None:
            self.recorder.on_alloc(nbytes, mem)
        return mem.view(dt).reshape(shape)


_SIZES = {}          # (shape, dtype) -> (bytes, numpy dtype) of valid shapes: alloc's arithmetic once per shape
_SIZES_MAX = 65536


class Executor:
    def __init__(self, plans, backends, graph_outputs, constants, overridable, memory=None):
        self.plans = plans
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

    def run(self, feeds: dict, output_names, run_ctx) -> list:
        memory = self.memory
        token = None if memory is None else memory.start(signature(feeds), run_ctx)
        ok = False
        try:
            if run_ctx.stream.uses_default_allocator:   # (running() checks nothing for it)
                out = self._run(feeds, output_names, run_ctx)
            else:
                with run_ctx.stream.running():
                    out = self._run(feeds, output_names, run_ctx)
            ok = True
        finally:
            if memory is not None:
                memory.finish(token, run_ctx, self.graph_outputs, ok)
        return out

    def _run(self, feeds: dict, output_names, run_ctx) -> list:
        values = dict(self.overridable)
        values.update(feeds)
        rec = run_ctx.recorder
        for i, plan in enumerate(self.plans):
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
        for name in output_names:
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

    def _boundary_copy(self, name, v, src_backend, dst_backend, run_ctx):
        src = Tensor(name, v.dtype, v.shape, _HostView(v), 0)
        dst_arr = run_ctx.alloc(v.shape, v.dtype)
        dst = Tensor(name, v.dtype, v.shape, _HostView(dst_arr), 0)
        cpy_tensor(src_backend, src, dst_backend, dst)
        return dst_arr


class _HostView(Buffer):
    """A Buffer over an existing host array (used to name tensors at a boundary copy)."""

    __slots__ = ()

    def __init__(self, arr):
        super().__init__(None, arr.nbytes, np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
