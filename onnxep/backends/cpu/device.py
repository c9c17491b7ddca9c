"""The cpu backend: supports_op from the op registry; plans are lists of kernel calls with pre-packed weights."""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace


from onnxep.contracts.backend import Backend, Device, GraphPlan
from onnxep.contracts.compile import load_prepacked_kernel, prepack_kernel
from onnxep.contracts.kernel import KernelContext
from onnxep.errors import EPFail, InvalidGraph, OnnxepError, RuntimeException
from onnxep.graph.ir import OpInfo, ValueType
from onnxep.graph.planner import value_key
from onnxep.graph.partition import subgraph_reads
from onnxep._kernels import set_caller_spin_us as _set_caller_spin_us
from onnxep.backends.cpu.runloop import MAX_PROGRAMS, Compiled, StepCapture, compile_plan
from onnxep.ops import _registry
from onnxep.ops._base import OpKernel


@dataclass(frozen=True, slots=True)
class KernelInfo:
    """Copies of what a kernel may know about its node (OrtKernelInfo). No graph objects."""

    name: str
    op_type: str
    domain: str
    opset: int
    attrs: dict
    input_types: tuple
    output_types: tuple
    constants: dict        # index -> array, constant inputs; an input's entry is removed once it is pre-packed
    #: a node with subgraphs (If, Loop, Scan, SequenceMap): the SubgraphScope its kernel compiles its bodies with,
    #: during construction only (the plan drops it once the kernel is made); None for every other node
    scope: object = None
    #: the session's onnxep.compute_precision ("fp32" or "bf16"): kernels with a bf16 path (MatMul, Gemm, the fused
    #: MatMul ops, convs through GEMM) pack their weights in bf16 when "bf16" and the CPU has vdpbf16ps
    precision: str = "fp32"


@dataclass(frozen=True, slots=True)
class SubgraphScope:
    """What a kernel whose node carries subgraphs needs to compile them as the session compiled its graph: the
    session's devices in order, its fallback flag and forced op types (a body is partitioned over the same devices,
    the reference backend only when the fallback is on), the backends to compile and run body plans on, the compile
    context (weight cache; never an EPContext export), the model's opsets, IR version and local functions.

    `outer` names the values the node's subgraphs read from the enclosing scope (graph/partition.py subgraph_reads,
    nested bodies included). The plan gives them to the kernel as extra inputs after the node's own: ctx.input(n + k)
    is outer[k] (n = the node's input count), typed by KernelInfo.input_types[n + k]; a constant one is also in
    KernelInfo.constants[n + k]. The memory planner, the plan's frees and RunOptions' pruning see them as reads."""

    devices: tuple
    fallback: bool
    forced: frozenset
    backends: dict
    compile_ctx: object
    opsets: dict
    ir_version: int
    functions: tuple
    outer: tuple
    n_inputs: int

_NO_INDICES = frozenset()
_INDEX_SETS = {_NO_INDICES: _NO_INDICES}    # one frozenset object per distinct set of packed input indices


def _indices(packed) -> frozenset:
    fs = frozenset(packed)
    return _INDEX_SETS.setdefault(fs, fs)


def _sharing(container):
    """once(x): what a kernel keeps of its node -- tuples of value names, tuples of ValueTypes -- as objects held once
    per container (share_immutable): sessions of one model on one container then hold one of each, not one per
    session (nor per node, where nodes repeat them). Without a container, x itself."""
    return (lambda x: x) if container is None else container.share_immutable


_BASE_CHECK_TYPES = OpKernel.check_types.__func__
_CHECKED: dict = {}     # (class, opset, input and output type signatures) -> what OpKernel.check_types answered


def _signature(names, types) -> tuple:
    """What OpKernel.check_types reads of a node's inputs or outputs: per name, None when absent, 0 when its type is
    unknown, else (kind, type string)."""
    if len(types) < len(names):
        types = [*types, *(None,) * (len(names) - len(types))]
    return tuple([None if not x else 0 if t is None else (t.kind, t.type_str) for x, t in zip(names, types)])


def _check_types(cls, op) -> bool:
    """cls.check_types(op), asked once per class, opset and type signature when the class keeps OpKernel's (it reads
    the op schema's type constraints and the node's value types only): a graph asks it for hundreds of nodes of a few
    signatures, partition and the passes again for the same nodes, and each answer walked the schema."""
    if getattr(cls.check_types, "__func__", None) is not _BASE_CHECK_TYPES:
        return cls.check_types(op)
    if not cls.type_constraints:
        return True        # (OpKernel.check_types' first answer: the com.onnxep ops check their types in supports)
    node = op.node
    key = (cls, node.opset, _signature(node.inputs, op.input_types), _signature(node.outputs, op.output_types))
    ok = _CHECKED.get(key)
    if ok is None:
        ok = _CHECKED[key] = bool(cls.check_types(op))
    return ok


class CpuDevice(Device):
    name = "cpu"
    description = "onnxep native kernels (float32, nogil Cython)"

    def supports_op(self, op: OpInfo) -> bool:
        """A kernel's check_types / supports either answers or raises: a crash there is a bug in the kernel, not a
        "no", so it surfaces (EPFail naming node, op and class, the crash chained) instead of quietly sending the node
        to the reference backend."""
        cls = _registry.lookup(op.node.domain, op.node.op_type, op.node.opset)
        if cls is None:
            return False
        try:
            return bool(_check_types(cls, op) and cls.supports(op))
        except Exception as e:
            node = op.node
            raise EPFail(f"cpu backend: {cls.__module__}.{cls.__qualname__} (check_types / supports) raised on "
                         f"node {node.name!r} (op {node.domain + '.' if node.domain else ''}{node.op_type}, opset "
                         f"{node.opset}): "
                         f"{type(e).__name__}: {e}") from e

    def init_backend(self, stream, **options):
        return CpuBackend(self, stream, **options)


CPU_DEVICE = CpuDevice()

#: planned runs of cpu plans go through their compiled programs (backends/cpu/runloop.py); ONNXEP_COMPILED_RUNS=0
#: keeps every run in the Python loop
COMPILED_RUNS = os.environ.get("ONNXEP_COMPILED_RUNS", "1") != "0"


class CpuPlan(GraphPlan):
    backend_name = "cpu"

    def __init__(self, inputs, outputs, steps, constants, prepacked=None, slots=None):
        super().__init__(inputs, outputs)
        self.steps = steps            # [(kernel, in_names, out_names, packed_indices, free_after, node_name, op)]
        self.slots = slots or {}      # step -> (Concat output, channel offset, its channels): see concat_slots
        self.constants = constants    # name -> array: constant inputs some kernel still reads
        self.prepacked = prepacked or {}  # (step, input index) -> (format, shared buffers): what EPContext saves

    def describe(self):
        return f"CpuPlan({len(self.steps)} kernels)"

    _run = None

    def run_list(self):
        """The steps as the executor loop reads them: (bound compute, ins, outs, packed, frees, node, op, slot),
        made once (again if steps or slots were replaced)."""
        run = self._run
        if run is None or run[0] is not self.steps or run[1] is not self.slots:
            run = self._run = (self.steps, self.slots,
                               tuple((k.compute, ins, outs, packed, frees, name, op, self.slots.get(i))
                                     for i, (k, ins, outs, packed, frees, name, op) in enumerate(self.steps)))
        return run[2]

    def strided_reads(self) -> dict:
        """Value name -> whether every step of this plan reading it takes it as a strided view
        (Kernel.strided_inputs); names no step reads are absent."""
        ok = {}
        for kernel, ins, *_ in self.steps:
            taken = kernel.strided_inputs
            for j, x in enumerate(ins):
                if x:
                    ok[x] = ok.get(x, True) and j in taken
        return ok

    def grow_outputs(self, names, reads) -> int:
        """Let each Concat step whose output is one of `names` (graph outputs no other plan reads but as a strided
        view) and that this plan's steps read only that way (`reads`: its strided_reads) return a view with spare
        rows (ops/_grow.py). Returns how many."""
        n = 0
        for kernel, ins, outs, *_ in self.steps:
            if (getattr(kernel, "grow_output", None) is False and len(outs) == 1 and outs[0] in names
                    and reads.get(outs[0], True)):
                kernel.grow_output = True
                n += 1
        return n

    def free(self):
        for step in self.steps:
            step[0].release()
        self.steps = []
        self._run = None
        self.constants = {}
        self.prepacked = {}


def concat_slots(steps, keep) -> dict:
    """Concat elimination, channel-last: an input of a Concat along the last axis whose producer (a kernel with
    strided_output) writes it for that Concat alone is written straight into the Concat's output, at its channel
    offset (KernelContext.slot), and the Concat copies only the other inputs. Needs the channel counts of every
    input and of the output statically (the offsets). Returns {producer step: (Concat output, offset, channels)}."""
    readers = {}
    for s in steps:
        for x in s[1]:
            if x:
                readers[x] = readers.get(x, 0) + 1
    producer = {s[2][0]: i for i, s in enumerate(steps) if s[2] and s[2][0]}
    slots = {}
    for kernel, ins, outs, *_ in steps:
        info = kernel.info
        if info.op_type != "Concat" or info.domain != "" or len(outs) != 1 or not outs[0]:
            continue
        shape = getattr(info.output_types[0], "shape", None) if info.output_types else None
        if not shape or int(info.attrs.get("axis", 0)) not in (-1, len(shape) - 1):
            continue
        chans = [getattr(t, "shape", None) for t in info.input_types]
        if not isinstance(shape[-1], int) or any(not c or len(c) != len(shape) or not isinstance(c[-1], int)
                                                 for c in chans):
            continue
        if sum(c[-1] for c in chans) != shape[-1]:
            continue
        offset = 0
        for x, c in zip(ins, chans):
            p = producer.get(x)
            if (p is not None and readers.get(x) == 1 and x not in keep
                    and getattr(steps[p][0], "strided_output", False)):
                slots[p] = (outs[0], offset, shape[-1])
            offset += c[-1]
    return slots


class CpuBackend(Backend):
    records_steps = True

    def __init__(self, device, stream, num_threads=0, compute_precision="fp32", allow_spinning=True):
        super().__init__(device, stream)
        self.num_threads = num_threads
        self.compute_precision = compute_precision
        # the pool's spin after this backend's parallel calls (_kernels.set_caller_spin_us, set per run on the
        # calling thread): -1 its default, 0 none (session.intra_op.allow_spinning=0)
        self.spin_us = -1 if allow_spinning else 0
        self._body_backends = None       # device name -> Backend, for subgraph plans (made on first use)

    @property
    def effective_precision(self) -> str:
        """The precision the kernels' GEMMs run in: bf16 only when asked and the CPU has vdpbf16ps (ops/_bf16.py)."""
        if self.compute_precision == "bf16":
            from onnxep import _kernels
            return "bf16" if _kernels.bgemm_hw() else "fp32"
        return "fp32"

    def graph_plan_create(self, partition, ctx) -> CpuPlan:
        """Kernels for the partition's nodes, constant weights pre-packed through the shared cache. A partition
        loaded from an EPContext blob (`partition.context`) is rebuilt from the blob instead: its kernels get the
        packed weights the blob carries (load_prepacked_kernel), and only weights the blob marks for repacking (a
        kernel that cannot describe its packing) go through prepack_weight. A node with subgraphs compiles its bodies
        over the session's devices (`placement`: the session's partition, also when the nodes come from a blob)."""
        placement = partition
        loaded = partition.context
        if loaded is not None:
            blob_precision = getattr(loaded, "compute_precision", "fp32")
            if blob_precision != self.effective_precision:
                raise InvalidGraph(f"EPContext node {loaded.name!r}: its weights were packed for "
                                   f"onnxep.compute_precision={blob_precision!r}, this session computes in "
                                   f"{self.effective_precision!r} (asked: {self.compute_precision!r}; bf16 needs a CPU "
                                   f"with AVX512_BF16): set the session config entry to {blob_precision!r} on such a "
                                   f"CPU, or export the EPContext model again")
            blob_convs = getattr(loaded, "bf16_conv_path", None)
            if blob_convs is not None:
                from onnxep.graph.epcontext import _bf16_conv_path
                if blob_convs != _bf16_conv_path():
                    raise InvalidGraph(f"EPContext node {loaded.name!r}: its convs were packed for the bf16 conv path "
                                       f"{blob_convs!r}, this process's is {_bf16_conv_path()!r} (ops/_bf16.py "
                                       f"bf16_conv_path: AMX, or vdpbf16ps where it outruns the FMA): export the "
                                       f"EPContext model again on this CPU")
            partition = loaded          # the blob's nodes, value types, unpacked constants, inputs and outputs
        steps = []
        constants = {}
        prepacked = {}
        last_use = {}
        # a node with subgraphs reads the outer-scope values its bodies name as extra inputs after its own
        outer = {}
        for i, node in enumerate(partition.nodes):
            if node.attrs and node.has_subgraph:
                outer[i] = subgraph_reads(node)
            for x in node.inputs:
                if x:
                    last_use[x] = i
            for x in outer.get(i, ()):
                last_use[x] = i
        keep = set(partition.outputs)
        once = _sharing(ctx.container)
        try:
            for i, node in enumerate(partition.nodes):
                op = partition.op_info(node)
                cls = _registry.lookup(node.domain, node.op_type, node.opset)
                name = sys.intern(node.name)
                ins = node.inputs
                input_types = op.input_types
                consts = dict(op.constants)
                scope = None
                if i in outer:
                    # (an EPContext export saves the subgraph attributes, the outer values' types and the outer
                    # constants: graph/epcontext.py serialize)
                    scope, ins, input_types = self._scope(partition, placement, node, outer[i], ctx, consts,
                                                          input_types)
                info = KernelInfo(name, node.op_type, node.domain, node.opset, dict(node.attrs),
                                  once(tuple(input_types)), once(tuple(op.output_types)), consts, scope,
                                  self.compute_precision)
                kernel = cls(info)
                if scope is not None and getattr(kernel, "info", None) is info:
                    kernel.info = info = replace(info, scope=None)    # the scope is for construction only
                # names interned: a second session of the model refers to the first one's strings, not its own copies
                steps.append([kernel, once(tuple(map(sys.intern, ins))),
                              once(tuple(map(sys.intern, node.outputs))), _NO_INDICES, (), name, node.op_type])
                record = {} if ctx.ep_context_export is not None else None   # only an EPContext export reads it
                if loaded is None:
                    packed = prepack_kernel(kernel, op.constants, ctx, record)
                else:
                    try:
                        packed = load_prepacked_kernel(kernel, loaded.packed_for(i), ctx)
                    except Exception as e:  # the blob describes a packing this kernel does not make: refuse it
                        raise InvalidGraph(f"EPContext node {loaded.name!r}: node {node.name!r} ({node.op_type}): "
                                           f"packed weight refused: {e}") from e
                    packed |= prepack_kernel(kernel, {j: op.constants[j] for j in loaded.repack_for(i)}, ctx, record)
                if record:
                    prepacked.update({(i, j): r for j, r in record.items()})
                steps[-1][3] = _indices(packed)
                if ctx.ep_context_export is None:
                    # compile owns the partition: a packed weight no later node of it reads goes now, not when the
                    # whole model is packed, so the peak holds one copy of the weights, not unpacked + packed
                    for j in packed:
                        x = node.inputs[j]
                        if last_use.get(x) == i and x not in keep and x not in constants:
                            partition.constants.pop(x, None)
                # the kernel contract: once packed, the runtime drops the original (compute cannot read it). The
                # info's constants would otherwise pin every unpacked weight for the session's lifetime, beside the
                # (shared) packed copy
                for j in packed:
                    info.constants.pop(j, None)
                for j, x in enumerate(ins):
                    if x and x in partition.constants and j not in packed:
                        if x not in constants:
                            # a constant read unpacked is a weight too (a bias, a folded per-channel scale): held
                            # once per process through the shared container, like the packed ones (not when loading
                            # an EPContext blob, which hashes no weight)
                            value = partition.constants[x]
                            share = ctx.container is not None and loaded is None
                            constants[x] = ctx.container.share_constant(value) if share else value
                        if j in info.constants:
                            info.constants[j] = constants[x]
                frees = tuple(x for x in set(steps[-1][1]) if x and last_use.get(x) == i and x not in keep
                              and x not in partition.constants)
                dead_outputs = tuple(o for o in steps[-1][2] if o and o not in keep and o not in last_use)
                steps[-1][4] = once(frees + dead_outputs)
        except BaseException:
            for s in steps:
                s[0].release()
            raise
        return CpuPlan(partition.inputs, partition.outputs, [tuple(s) for s in steps], constants, prepacked,
                       concat_slots(steps, keep))

    def _scope(self, partition, placement, node, outer, ctx, consts, input_types):
        """(SubgraphScope, the step's input names, their types) of a node with subgraphs: its own inputs, then the
        outer-scope values its bodies read (`outer`); `consts` gets those that are constants by input index. Types
        and constants come from `partition` (the session's, or a loaded EPContext blob), the devices, fallback flag
        and forced op types from `placement` (the session's partition), the opsets, IR version and local functions
        from the blob when it records them, else from the session's partition."""
        n = len(node.inputs)
        types = list(input_types)
        for k, x in enumerate(outer):
            vt = partition.value_types.get(x)
            if x in partition.constants:
                consts[n + k] = partition.constants[x]
                if vt is None:
                    vt = ValueType.of_array(partition.constants[x])
            types.append(vt)
        from onnxep.backends.reference import REFERENCE_DEVICE
        backends = self._body_backends
        if backends is None:
            backends = self._body_backends = {self.device.name: self,
                                              REFERENCE_DEVICE.name: REFERENCE_DEVICE.init_backend(self.stream)}
        # the session's devices (graph/partition.py records them), else its defaults
        devices = getattr(placement, "devices", ()) or (self.device, REFERENCE_DEVICE)
        body_ctx = replace(ctx, ep_context_export=None)
        model = partition if getattr(partition, "opsets", None) is not None else placement
        scope = SubgraphScope(tuple(devices), bool(getattr(placement, "fallback", True)),
                              frozenset(getattr(placement, "forced", ())), backends, body_ctx,
                              dict(getattr(model, "opsets", {}) or {}), int(getattr(model, "ir_version", 8) or 8),
                              tuple(getattr(model, "functions", ()) or ()), outer, n)
        return scope, tuple(node.inputs) + outer, types

    def graph_plan_compute(self, plan: CpuPlan, values: dict, run_ctx):
        _set_caller_spin_us(self.spin_us)
        run = plan.run_list()
        rec = run_ctx.recorder
        arena = run_ctx.arena
        caps = None
        # a profiled or per-node-logged run (a StepTrace passing nothing on to a planner) goes through the compiled
        # program too, timed step by step: what a profile shows is what an unprofiled run does
        trace = rec if rec is not None and rec is run_ctx.trace and rec.inner is None else None
        if (rec is None or trace is not None) and arena is not None and COMPILED_RUNS and not arena.diverged:
            # a planned run: the plan's compiled program for this arena buffer, or a capture run that makes it
            programs = getattr(arena.views, "programs", None)
            if programs is not None:
                comp = programs.get(plan)
                if comp is not None and comp.__class__ is Compiled and comp.steps_of is run:
                    r = comp.run(plan, run, values, run_ctx, self.num_threads, _call, trace)
                    if r is True:
                        return
                    if r is not False:      # a Python step made something else: the rest in Python
                        programs.pop(plan, None)
                        _, start, env, ctx = r
                        if trace is not None:
                            trace.k = start
                        self._loop(plan, run, env, ctx, trace, start, None)
                        for name in plan.outputs:
                            values[name] = env[name]
                        return
                    programs.pop(plan, None)
                    caps = []
                elif comp is not run:       # (the plan's run list: nothing of it runs in C)
                    caps = []
        env = dict(plan.constants)
        for name in plan.inputs:
            env[name] = values[name]
        # a recording run notes what each step made, a capture under a signature family what the plan was fed: the
        # family compares the two (graph/planner.py SignatureFamily)
        book = None if rec is None else getattr(getattr(rec, "inner", None) or rec, "shapes", None)
        shapes = fed = None
        if book is not None or (caps is not None and arena.family is not None):
            fed = tuple(value_key(values[x]) for x in plan.inputs)
        if book is not None:
            shapes = []
            book[plan] = (fed, shapes)
        # one context for the run, pointed at each step in turn (no kernel keeps it past its compute)
        if run_ctx.bound is None:
            ctx = KernelContext(env, (), (), run_ctx.alloc, self.num_threads)
        else:       # IOBinding outputs: their kernels write into the bound buffers
            from onnxep.graph.executor import BoundKernelContext
            ctx = BoundKernelContext(env, (), (), run_ctx.alloc, self.num_threads)
        ctx.run = run_ctx
        k0 = arena.k if caps is not None else 0
        self._loop(plan, run, env, ctx, rec, 0, caps, shapes)
        for name in plan.outputs:
            values[name] = env[name]
        if caps is not None and not arena.diverged:
            programs = arena.views.programs
            if len(programs) < MAX_PROGRAMS:
                comp = compile_plan(plan, run, caps, k0, arena.k, arena, self.num_threads, fed)
                if comp is not None:
                    comp.steps_of = run
                if arena.family is not None:        # (how much of it runs in C: SignatureFamily.fruitless)
                    arena.family.count(comp.n_c if comp is not None else 0,
                                       comp.n_py if comp is not None else len(run))
                programs[plan] = comp if comp is not None else run     # (the run list: nothing to compile)

    @staticmethod
    def _loop(plan, run, env, ctx, rec, start, caps, shapes=None):
        """The Python run loop from step `start`; with `caps` (a list), a capture: what each step read and made;
        with `shapes` (a list), each step's outputs' value_key."""
        arena = ctx.run.arena if caps is not None else None
        for i in range(start, len(run)):
            compute, ins, outs, packed, frees, name, op, slot = run[i]
            ctx.ins, ctx.outs, ctx.packed, ctx.node, ctx.slot = ins, outs, packed, name, slot
            if rec is not None:
                rec.begin_step(ins, env)
            if caps is not None:
                k0 = arena.k
                xs = [env.get(x) if x else None for x in ins]
            _call(compute, ctx, op, name)
            if caps is not None:
                caps.append(StepCapture(k0, arena.k, xs, [env.get(o) if o else None for o in outs]))
            if rec is not None:
                rec.end_step(ins, outs, env, getattr(compute.__self__, "inplace", ()))
            if shapes is not None:
                shapes.append(tuple(value_key(env.get(o)) if o else None for o in outs))
            for x in frees:
                env.pop(x, None)


def _call(compute, ctx, op, name):
    try:
        compute(ctx)
    except OnnxepError as e:
        raise type(e)(f"while running {op} node '{name}': {e.args[0] if e.args else ''}") from e
    except Exception as e:
        raise RuntimeException(f"Non-zero status code returned while running {op} node. Name:'{name}' "
                               f"Status Message: {type(e).__name__}: {e}") from e
