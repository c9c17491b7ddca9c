"""The compiled run loop of cpu plans (DESIGN "The run loop"; the native half is onnxep/_k_runloop.pxi).

A planned run (graph/planner.py) gives every tensor of an input signature the same arena array on every run in the
same arena buffer (ArenaRun.cached). The first such run of a plan in a buffer is *captured*: the Python loop runs as
always and records, per step, the arena's request counter before and after the step and the arrays it read and made.
The plan is then compiled for that signature and buffer into a `_kernels.Program`:

- a kernel exposing a C entry (`c_step(ins, outs, nthreads)`, returning (entry name, argument spec, ints, floats):
  the argument spec lists input indices i >= 0, output indices as ~j, None for NULL, or a fixed buffer such as a
  packed weight) becomes a C step; a view op (Reshape, Squeeze, Unsqueeze, Flatten, Identity) whose output starts at
  its input's first byte becomes an alias step (pointer arithmetic, no work);
- a step whose c_step would make small integer results (they may be shapes) stays in Python, where each run checks
  their values; a kernel's `c_value_inputs` name the inputs whose values (not only shapes) its C step bakes in (Slice
  starts, Gather indices, the Pow exponent): the step is C only when each is a constant or such a checked value;
- every other step (user kernels, the reference boundary, data-dependent shapes, control flow, ops not ported, a step
  writing into a Concat's slot) stays a Python step: `Kernel.compute(ctx)` as before, the arena's counter set to what
  the capture saw so its allocations get the same arrays;
- the values get slots in the program's pointer table: constants and arena arrays are fixed when the program is made;
  feeds, outputs that leave the arena (what the user gets) and values a Python step makes are patched per run.

A compiled run walks the segments: each stretch of C steps is one `Program.run(start, stop)` without the GIL, each
Python step a compute(ctx) followed by a check that its outputs have the captured shapes and dtypes (and small integer
outputs the captured values: they may be shapes). When a check fails, the rest of the run goes through the Python
loop (always correct) and the program is dropped; the next planned run captures again.
"""
from __future__ import annotations

from collections import ChainMap
from time import perf_counter_ns

import numpy as np

from onnxep import _kernels
from onnxep.graph.planner import small_ints
from onnxep.ops import _c_steps

FNS = _kernels.RUNLOOP_FNS
LIMITS = _kernels.RUNLOOP_LIMITS

#: op types whose kernel publishes a view of input 0 (set_output): an alias step when the view starts at its input
VIEW_OPS = frozenset({("", "Reshape"), ("", "Squeeze"), ("", "Unsqueeze"), ("", "Flatten"), ("", "Identity")})

#: op types whose kernel publishes input 0 itself when no conversion is needed (Cast to the input's type)
SAME_TYPE_VIEWS = frozenset({("", "Cast"), ("", "CastLike")})

#: outputs leaving the arena up to this many bytes are allocated with numpy.empty in a compiled run (default allocator)
SMALL_EXTERNAL = 1 << 16

#: programs kept per arena buffer and memory plan (one per cpu plan of the session)
MAX_PROGRAMS = 64


def _addr(a) -> int:
    return a.__array_interface__["data"][0]


class StepCapture:
    """What the capture run saw of one step: arena request counter before / after, input and output arrays."""

    __slots__ = ("k0", "k1", "ins", "outs", "small")

    def __init__(self, k0, k1, ins, outs):
        self.k0, self.k1, self.ins, self.outs = k0, k1, ins, outs
        # small integer outputs' values now (they may be shapes: a Python step's are checked by value each run, by
        # the planner's rule, so a signature family compares them with a recording's value_key): the arena reuses
        # their memory later in the run
        self.small = [small_ints(v) if v.__class__ is np.ndarray else None for v in outs]


class Compiled:
    """One plan compiled for one signature in one arena buffer."""

    __slots__ = ("prog", "order", "k0", "k1", "segments", "env0", "env_all", "feeds", "feed_slots", "externals",
                 "n_c", "n_py", "steps_of", "inputs")

    def run(self, plan, run, values, run_ctx, nthreads, wrap, trace=None):
        """Run the plan; False (nothing done) when the arena is not where the capture was. With `trace` (a
        StepTrace: a profiled or per-node-logged run) each step is timed -- the C steps by the program itself
        (Program.run_timed), the Python steps around their compute -- and recorded in the trace when the walk ends
        (also by an error), each with its values' shapes in this run."""
        arena = run_ctx.arena
        if arena.k != self.k0 or arena.diverged:
            return False
        env = self.env0.copy()
        for name in self.inputs:
            env[name] = values[name]
        if trace is None:
            return self._walk(plan, run, values, run_ctx, nthreads, wrap, env, None)
        timed = []      # (plan step, t0, t1)
        try:
            return self._walk(plan, run, values, run_ctx, nthreads, wrap, env, timed)
        finally:
            t_post = perf_counter_ns()
            vals = ChainMap(env, self.env_all)
            for i, t0, t1 in timed:
                trace.step(i, t0, t1, run[i][1], run[i][2], vals)
            trace.post_ns += perf_counter_ns() - t_post

    def _walk(self, plan, run, values, run_ctx, nthreads, wrap, env, timed):
        """run's segments from env (the run's values so far); `timed` (a list, or None) collects each step's span."""
        arena = run_ctx.arena
        prog = self.prog
        if self.feeds:
            prog.set_ptrs(self.feed_slots, [values[name] for name in self.feeds])
        alloc = run_ctx.alloc
        if self.externals:
            # outputs that leave the arena (what the user gets): small ones straight from numpy with the default
            # allocator (their size was checked when the capture allocated them), the rest through the run's
            # allocator at the request index the capture saw
            small = run_ctx.stream.uses_default_allocator
            bound = run_ctx.bound
            for slot, name, k, shape, dtype, nbytes in self.externals:
                binding = bound.get(name) if bound is not None else None
                if binding is not None and binding[0].shape == shape and binding[0].dtype == dtype:
                    a = env[name] = binding[0]      # an IOBinding buffer: the C steps write the output there
                elif small and nbytes <= SMALL_EXTERNAL:
                    a = env[name] = np.empty(shape, dtype)
                else:
                    arena.k = k
                    a = env[name] = alloc(shape, dtype)
                prog.set_ptr(slot, a)
        ctx = None
        for seg in self.segments:
            if seg[0]:
                _, start, stop, views = seg
                if run_ctx.stop:        # RunOptions.terminate: before each stretch of C steps too
                    from onnxep.errors import Fail
                    from onnxep.graph.executor import TERMINATED
                    raise Fail(TERMINATED)
                bad = prog.run(start, stop) if timed is None else self._run_timed(start, stop, timed)
                if bad >= 0:
                    # a step found bad input (a Gather index out of range): the rest of the run in Python from
                    # that step, which raises the step's named error
                    for name, src, shape in views:
                        if src in env:
                            env[name] = env[src].reshape(shape)
                    for x, a in self.env_all.items():
                        env.setdefault(x, a)
                    for x in plan.inputs:
                        env.setdefault(x, values[x])
                    if ctx is None:
                        ctx = _context(run_ctx)(env, (), (), alloc, nthreads)
                        ctx.run = run_ctx
                    i, arena.k = self.order[bad]
                    return ("resume", i, env, ctx)
                for name, src, shape in views:
                    env[name] = env[src].reshape(shape)
                continue
            _, i, k0, expect, patch = seg
            compute, ins, outs, packed, frees, name, op, slot = run[i]
            if ctx is None:
                ctx = _context(run_ctx)(env, (), (), alloc, nthreads)
                ctx.run = run_ctx
            if run_ctx.stop:
                from onnxep.errors import Fail
                from onnxep.graph.executor import TERMINATED
                raise Fail(TERMINATED)
            arena.k = k0
            ctx.ins, ctx.outs, ctx.packed, ctx.node, ctx.slot = ins, outs, packed, name, slot
            if timed is None:
                wrap(compute, ctx, op, name)
            else:
                t0 = perf_counter_ns()
                wrap(compute, ctx, op, name)
                timed.append((i, t0, perf_counter_ns()))
            for o, shape, dtype, small in expect:
                v = env.get(o)
                if v is None or v.__class__ is not np.ndarray or v.shape != shape or v.dtype != dtype or (
                        small is not None and v.tobytes() != small):
                    # the step made something else than the capture saw: the rest of the run in Python
                    for x, a in self.env_all.items():
                        env.setdefault(x, a)
                    for x in plan.inputs:
                        env.setdefault(x, values[x])
                    return ("resume", i + 1, env, ctx)
            for o, s in patch:
                prog.set_ptr(s, env[o])
        arena.k = self.k1
        for name in plan.outputs:
            values[name] = env[name]
        return True

    def _run_timed(self, start, stop, timed):
        """prog.run(start, stop) with a clock reading after each step: each step that ran whole appended to `timed` as
        (plan step, t0, t1)."""
        ts = np.empty(stop - start + 1, np.int64)
        bad = self.prog.run_timed(start, stop, ts)
        order = self.order
        for n in range(start, stop if bad < 0 else bad):
            timed.append((order[n][0], int(ts[n - start]), int(ts[n - start + 1])))
        return bad


def _context(run_ctx):
    """The KernelContext class of a Python step: with IOBinding outputs, one that writes them in place."""
    from onnxep.contracts.kernel import KernelContext
    if run_ctx.bound is None:
        return KernelContext
    from onnxep.graph.executor import BoundKernelContext
    return BoundKernelContext


def _c_spec(kernel, op_key, cap, nthreads):
    """(entry, arg spec, ints, floats, fresh outputs) of a step that can run in C, else None."""
    outs = cap.outs
    if op_key in VIEW_OPS or op_key in SAME_TYPE_VIEWS:
        x = cap.ins[0] if cap.ins else None
        y = outs[0] if len(outs) == 1 else None
        if (x.__class__ is np.ndarray and y.__class__ is np.ndarray and x.dtype != object and y.size
                and y.flags.c_contiguous and x.nbytes == y.nbytes and _addr(x) == _addr(y) and cap.k1 == cap.k0
                and (op_key in VIEW_OPS or x.dtype == y.dtype)):
            return ("alias", [0, ~0], [0], [], ())
        if op_key in VIEW_OPS:
            return None
    c_step = getattr(kernel, "c_step", None)
    if c_step is None:
        return None
    spec = c_step(cap.ins, outs, nthreads)
    if spec is None:
        return None
    entry, args, ints, floats = spec
    fresh = tuple(j for j, v in enumerate(outs) if v is not None)
    if cap.k1 - cap.k0 != len(fresh):
        return None
    return entry, args, ints, floats, fresh


def compile_plan(plan, run, caps, k0, k1, arena, nthreads, fed=None):
    """A Compiled for the plan from its capture (`caps`, one StepCapture per step), or None when no step runs in C.
    Under a signature family (arena.family; `fed`: the value_key of each plan input in the capture) only the steps
    whose values are all fixed across the family may run in C (_varying)."""
    views = arena.views
    consts = plan.constants
    family = getattr(arena, "family", None)
    reshaped = revalued = frozenset()
    if family is not None:
        v = _varying(plan, run, caps, family, fed)
        if v is None:
            return None
        reshaped, revalued = v
    varying = reshaped | revalued
    # steps reading or making a varying value
    touched = {i for i, s in enumerate(run) if any(x in varying for x in (*s[1], *s[2]) if x)} if varying else set()
    shape_fixed = _signature_fixed_steps(plan, run, caps, touched)
    fixed_steps = set(shape_fixed)
    if fixed_steps:     # their outputs are constants of the program: the steps do not run
        consts = dict(consts)
        for i in fixed_steps:
            for o, v in zip(run[i][2], caps[i].outs):
                if o:
                    consts[o] = v
    slot_specs, placed = _concat_slots(plan, run, caps, arena, nthreads, fixed_steps | touched)
    same_values = consts        # (values the same on every run: not a placed Concat's output)
    if placed:          # Concats whose inputs C steps write in place: their output is a fixed arena array
        consts = dict(consts)
        for j, y in placed.items():
            if j not in slot_specs:         # (else its C step copies the one input written elsewhere)
                fixed_steps.add(j)
            consts[run[j][2][0]] = y
    plan_inputs = set(plan.inputs)
    producer = {}
    for i, s in enumerate(run):
        for o in s[2]:
            if o:
                producer[o] = i
    # per step: None (Python) or the C spec
    specs = []
    for i, (compute, ins, outs, packed, frees, name, op, slot) in enumerate(run):
        kernel = compute.__self__
        info = getattr(kernel, "info", None)
        spec = None
        if i in fixed_steps:
            specs.append(None)
            continue
        if i in slot_specs:
            specs.append(slot_specs[i])
            continue
        if any(x in reshaped for x in ins if x) or any(o in reshaped for o in outs if o):
            specs.append(None)      # a value of a size that varies across the family: Python sizes it each run
            continue
        if slot is None and info is not None and i not in plan.slots and not any(
                o in _slot_targets(plan) for o in outs if o):
            try:
                spec = _c_spec(kernel, (info.domain, info.op_type), caps[i], nthreads)
            except Exception:       # a c_step that cannot describe this case: the step stays in Python
                spec = None
        if spec is not None and len(spec[1]) > LIMITS["slots"]:
            spec = None
        if spec is not None and not all(_value_fixed(ins[a], same_values, producer, specs, caps, run, varying)
                                        for a in getattr(kernel, "c_value_inputs", ()) if a < len(ins) and ins[a]):
            spec = None     # the step bakes in an input's values: only constants and checked values qualify
        specs.append(spec)
    _small_results_checked(run, caps, specs, {(i, a) for i in shape_fixed
                                              for a in range(run[i][0].__self__._n_shape)})
    n_c = sum(s is not None for s in specs)
    if n_c == 0:
        return None
    slots = {}           # value name -> slot
    fixed = {}           # value name -> array whose address is fixed (constants, arena arrays, views of them)
    per_run = set()      # value names whose address changes per run
    externals = []       # (slot, name, request index, shape, dtype): C outputs outside the arena
    keep = []
    fixed_objs = []      # (slot, object)
    nslots = [1]

    def new_slot():
        s = nslots[0]
        nslots[0] += 1
        return s

    def slot_of(x):
        s = slots.get(x)
        if s is None:
            s = slots[x] = new_slot()
        return s

    py_reads = set()
    for i, s in enumerate(run):
        if specs[i] is None and i not in fixed_steps:
            py_reads.update(x for x in s[1] if x)
    steps = []           # (step index, entry id, slots, ints, floats)
    materialize = {}     # step index -> (name, src, shape)
    for i, (compute, ins, outs, packed, frees, name, op, slot) in enumerate(run):
        cap = caps[i]
        spec = specs[i]
        if spec is None:
            if i not in fixed_steps:
                for o, v in zip(outs, cap.outs):
                    if o:
                        per_run.add(o)
            continue
        entry, args, ints, floats, fresh = spec
        if i in slot_specs and i not in placed:     # a view of a placed Concat's output: fixed, for a resume
            fixed[outs[0]] = cap.outs[0]
        arg_slots = []
        for a in args:
            if a is None:
                arg_slots.append(0)
            elif isinstance(a, int) and a >= 0:
                x = ins[a]
                if not x:
                    arg_slots.append(0)
                    continue
                if x not in slots:
                    v = cap.ins[a]
                    if x in consts or (x not in plan_inputs and x not in producer):
                        fixed[x] = v
                        fixed_objs.append((slot_of(x), v))
                    elif x in plan_inputs:
                        per_run.add(x)
                        slot_of(x)
                    else:
                        slot_of(x)
                arg_slots.append(slots[x])
            elif isinstance(a, int):
                j = ~a
                o = outs[j]
                s = slot_of(o) if o else new_slot()
                arg_slots.append(s)
                if entry == "alias":
                    src = ins[0]
                    if src in fixed:
                        fixed[o] = cap.outs[0]
                    else:
                        per_run.add(o)
                        materialize.setdefault(i, []).append((o, src, cap.outs[0].shape))
                    continue
                v = cap.outs[j]
                k = cap.k0 + fresh.index(j)
                e = views[k] if views is not None and k < len(views) else None
                if e is not None and e[2] is v:
                    fixed[o] = v
                    fixed_objs.append((s, v))
                else:
                    per_run.add(o)
                    externals.append((s, o, k, v.shape, v.dtype, v.nbytes))
            else:
                s = new_slot()
                fixed_objs.append((s, a))
                keep.append(a)
                arg_slots.append(s)
        steps.append((i, FNS[entry], arg_slots, ints, floats))
    prog = _kernels.Program(len(steps), nslots[0])
    for s, obj in fixed_objs:
        prog.set_ptr(s, obj)
    prog.keep = keep
    index = {}
    for n, (i, fn, arg_slots, ints, floats) in enumerate(steps):
        prog.set_step(n, fn, arg_slots, ints, floats, nthreads)
        index[i] = n
    order = tuple((i, caps[i].k0) for i, *_ in steps)     # program step -> (plan step, arena counter before it)
    # segments
    segments = []
    i = 0
    n_steps = len(run)
    while i < n_steps:
        if specs[i] is not None:
            j = last = i
            views_after = []
            # (a placed Concat between C steps does not run: the stretch goes on past it)
            while j < n_steps and (specs[j] is not None or j in fixed_steps and j in placed):
                if specs[j] is not None:
                    views_after.extend(materialize.get(j, ()))
                    last = j
                j += 1
            segments.append((True, index[i], index[last] + 1, tuple(views_after)))
            i = j
            continue
        if i in fixed_steps:
            i += 1
            continue
        cap = caps[i]
        outs = run[i][2]
        expect = []
        patch = []
        for o, v, small in zip(outs, cap.outs, cap.small):
            if not o:
                continue
            if o in reshaped:       # varies across the family: not checked, and no C step reads it
                if o in slots:
                    return None
                continue
            if v.__class__ is np.ndarray:
                expect.append((o, v.shape, v.dtype, None if o in revalued else small))
                if o in slots:
                    patch.append((o, slots[o]))
            elif o in slots:      # a C step reads a non-array: cannot happen (c_step takes arrays only)
                return None
        segments.append((False, i, cap.k0, tuple(expect), tuple(patch)))
        i += 1
    c = Compiled()
    c.prog = prog
    c.order = order
    c.k0, c.k1 = k0, k1
    c.segments = tuple(segments)
    need = set(py_reads) | set(plan.outputs)
    env0 = {x: v for x, v in consts.items() if x in need}
    env_all = dict(consts)
    for x, v in fixed.items():
        env_all[x] = v
        if x in need:
            env0[x] = v
    c.env0 = env0
    c.env_all = env_all
    feeds = [x for x in plan.inputs if x in slots]
    c.feeds = tuple(feeds)
    c.inputs = tuple(x for x in plan.inputs if x in need or x in slots)
    c.feed_slots = tuple(slots[x] for x in feeds)
    c.externals = tuple(externals)
    c.n_c, c.n_py = n_c, sum(not seg[0] for seg in segments)
    return c


def _varying(plan, run, caps, family, fed):
    """(values whose shape or dtype varies across the signature family, values whose small integer contents do) from
    the family's reference run of the plan and this capture (`fed`: the plan inputs' value_key): every value whose
    value_key differs between the two, and the feeds the family's template leaves open. None when the plan has no
    reference run or its steps differ."""
    ref = family.ref.get(plan)
    if ref is None or fed is None:
        return None
    ref_in, ref_steps = ref
    if len(ref_steps) != len(run) or len(ref_in) != len(plan.inputs) or len(fed) != len(plan.inputs):
        return None
    reshaped, revalued = set(), set()

    def compare(x, now, then):
        if now is None or then is None or now[0] != then[0] or now[1] != then[1]:
            reshaped.add(x)
        elif now[2] != then[2]:
            revalued.add(x)

    for x, now, then in zip(plan.inputs, fed, ref_in):
        compare(x, now, then)
        open_dims = family.varying_feeds.get(x)
        if open_dims is not None:
            (reshaped if open_dims else revalued).add(x)
    for i, (s, cap, then) in enumerate(zip(run, caps, ref_steps)):
        if len(then) != len(s[2]):
            return None
        for o, v, small, was in zip(s[2], cap.outs, cap.small, then):
            if o:
                compare(o, (v.shape, v.dtype, small) if v.__class__ is np.ndarray else None, was)
    revalued -= reshaped
    return frozenset(reshaped), frozenset(revalued)


#: C entries that take the output's pixel stride as one more int (their kernel writes a channel slice in place):
#: entry -> (the entry writing a slice, the args index of the residual input, which must be None)
SLOT_ENTRIES = {"conv_nhwc": ("conv_nhwc_ldy", 3), "bconv_nhwc": ("bconv_nhwc_ldy", 3)}


def _concat_slots(plan, run, caps, arena, nthreads, skip):
    """Concat elimination in C (device.concat_slots made the plan slots): ({producer step: C spec writing its channel
    slice of the Concat's output in place}, {Concat step: its output}) for each Concat along the last axis whose
    input but at most one a slot producer wrote in place during the capture, each producer's C entry taking a pixel
    stride (SLOT_ENTRIES), and whose output is an arena array of the run's buffer (fixed address, not a graph
    output). Such a Concat does not run in a compiled run (its output is the program's constant), or, with one input
    written elsewhere (a pool's, an input's), is the RL_STRIDED step copying that one into its channels; any other
    stays as it was: its producers and the Concat itself Python steps."""
    views = arena.views
    if not plan.slots or views is None:
        return {}, {}
    in_arena = {id(e[2]) for e in views if e is not None}
    groups = {}
    for p, (target, offset, ldy) in plan.slots.items():
        groups.setdefault(target, []).append(p)
    concat_of = {}
    for j, s in enumerate(run):
        if s[2] and s[2][0] in groups and s[6] == "Concat":
            concat_of[s[2][0]] = j
    specs, placed = {}, {}
    for target, producers in groups.items():
        j = concat_of.get(target)
        if j is None or j in skip:
            continue
        y = caps[j].outs[0]
        if (y.__class__ is not np.ndarray or id(y) not in in_arena or y.dtype != np.float32
                or not y.flags.c_contiguous or caps[j].k1 != caps[j].k0):
            continue
        made = {run[p][2][0]: p for p in producers}
        ins = run[j][1]
        if not set(made) <= set(ins) or len(set(ins)) != len(ins) or len(caps[j].ins) != len(ins):
            continue
        # inputs no slot producer wrote: at most one, copied in by the Concat's own C step (RL_STRIDED)
        rest, offset = [], 0
        for k, (x, v) in enumerate(zip(ins, caps[j].ins)):
            if v.__class__ is not np.ndarray or v.ndim != y.ndim:
                rest = None
                break
            if x not in made:
                rest.append((k, v, offset))
            offset += v.shape[-1]
        if rest is None or len(rest) > 1 or offset != y.shape[-1]:
            continue
        copy = None
        if rest:
            k, v, offset = rest[0]
            c = _c_steps.collapse(v.shape, v.strides, y.strides)
            if (v.dtype != y.dtype or not v.flags.c_contiguous or v.shape[:-1] != y.shape[:-1] or c is None
                    or np.may_share_memory(v, y)):
                continue
            nd, shape, xs, ds = c
            copy = ("strided", [k, y.reshape(-1)[offset:]], [v.itemsize, nd, 0, *shape, *xs, *ds], [], ())
        group = {}
        for p in producers:
            spec = _slot_spec(run[p], caps[p], plan.slots[p], y, nthreads)
            if spec is None or p in skip:
                break
            group[p] = spec
        else:
            specs.update(group)
            if copy is not None:
                specs[j] = copy
            placed[j] = y
    return specs, placed


def _slot_spec(step, cap, slot, y, nthreads):
    """The C spec of a slot producer writing its channel slice of y in place, or None."""
    compute, ins, outs, packed, frees, name, op, _ = step
    kernel = getattr(compute, "__self__", None)
    v = cap.outs[0] if len(cap.outs) == 1 else None
    target, offset, ldy = slot
    if (kernel is None or getattr(kernel, "c_step", None) is None or v.__class__ is not np.ndarray
            or v.dtype != np.float32 or v.ndim < 1 or ldy != y.shape[-1] or v.shape[:-1] != y.shape[:-1]
            or offset + v.shape[-1] > ldy or _addr(v) != _addr(y) + 4 * offset):
        return None
    try:
        spec = kernel.c_step(cap.ins, [np.empty(v.shape, np.float32)], nthreads)
    except Exception:       # a c_step that cannot describe this case: the step stays in Python
        return None
    if spec is None or spec[0] not in SLOT_ENTRIES:
        return None
    entry, args, ints, floats = spec
    ldy_entry, res = SLOT_ENTRIES[entry]
    if len(args) <= res or args[res] is not None or len(ints) + 1 > LIMITS["ints"]:
        return None
    # the output: y's bytes from the slice's first channel on (a fixed buffer of the program)
    out = y.reshape(-1)[offset:]
    args = [out if a is not None and a.__class__ is int and a < 0 else a for a in args]
    return ldy_entry, args, list(ints) + [ldy], floats, ()


def _small_results_checked(run, caps, specs, shape_reads=frozenset()):
    """A C step making small integer results (they may be shapes) keeps them only when every step reading them is a
    C step that reads them as data (not one of its c_value_inputs; a view op only as the data it views) or reads
    their shape only (`shape_reads`: (step, input) pairs); else it goes back to Python, where each run checks those
    values. Last step first, so a step sent back re-checks its producers."""
    readers = {}
    for j, s in enumerate(run):
        for a, x in enumerate(s[1]):
            if x:
                readers.setdefault(x, []).append((j, a))
    for i in range(len(run) - 1, -1, -1):
        if specs[i] is None or specs[i][0] == "alias":
            continue
        for o, small in zip(run[i][2], caps[i].small):
            if small is None or not o:
                continue
            if not _read_as_data(o, run, specs, readers, shape_reads):
                specs[i] = None
                break


def _read_as_data(o, run, specs, readers, shape_reads) -> bool:
    """Every reader of value o reads its shape only, or is a C step reading it as data: not as one of its
    c_value_inputs; an alias step (a view op) only as its input 0, the view's own readers then reading it as data."""
    for j, a in readers.get(o, ()):
        if (j, a) in shape_reads:
            continue
        if specs[j] is None or a in getattr(run[j][0].__self__, "c_value_inputs", ()):
            return False
        if specs[j][0] == "alias" and (a != 0 or not all(_read_as_data(v, run, specs, readers, shape_reads)
                                                          for v in run[j][2] if v)):
            return False
    return True


def _signature_fixed_steps(plan, run, caps, touched=frozenset()):
    """Steps whose outputs are the same arrays on every run of the signature: ShapeSubgraph nodes (ops/onnxep/
    shape_subgraph.py) that answered from their cache (read-only arrays it holds, no arena request) and read as data
    only constants and such outputs. Every value's shape is fixed in a compiled run (feeds by the signature, C outputs
    by the program, Python outputs checked), so these outputs are too: the program keeps them as constants. Under a
    signature family, not the steps `touched` by a value that varies across it."""
    from onnxep.ops.onnxep.shape_subgraph import _CACHED, ShapeSubgraph_1
    fixed = set()
    made = set()
    for i, (compute, ins, outs, *_rest) in enumerate(run):
        kernel = getattr(compute, "__self__", None)
        if (kernel.__class__ is not ShapeSubgraph_1 or compute.__func__ is not ShapeSubgraph_1.compute
                or i in touched):
            continue
        cap = caps[i]
        if cap.k1 != cap.k0 or not all(
                v.__class__ is np.ndarray and not v.flags.writeable and _CACHED.get(id(v)) is v
                for o, v in zip(outs, cap.outs) if o):
            continue
        if not all(ins[j] in plan.constants or ins[j] in made for j in kernel._data):
            continue
        fixed.add(i)
        made.update(o for o in outs if o)
    return fixed


def _value_fixed(x, consts, producer, specs, caps, run, varying=frozenset()) -> bool:
    """Whether value x is the same on every run of the signature: a constant, or a small integer result of a Python
    step (checked by value after the step, StepCapture.small) that does not vary across the signature family."""
    if x in consts:
        return True
    if x in varying:
        return False
    i = producer.get(x)
    if i is None or i >= len(specs) or specs[i] is not None:
        return False
    return any(o == x and s is not None for o, s in zip(run[i][2], caps[i].small))


def _slot_targets(plan):
    t = plan.__dict__.get("_slot_targets") if hasattr(plan, "__dict__") else None
    if t is None:
        t = frozenset(v[0] for v in plan.slots.values())
        try:
            plan._slot_targets = t
        except AttributeError:
            pass
    return t
