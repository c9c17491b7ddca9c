"""Stage 5, plan: where every activation lives -- the job of ggml-alloc, and of onnxruntime's memory pattern.

The first run of a session for an input signature (shapes, dtypes, and the values of small integer feeds, which may
be shapes) records its allocations: how many bytes each took, the step that made it, and the last step that read it
through any name -- a Reshape or an Identity is a view, so its readers keep the allocation alive -- plus the
(output, input) pairs a kernel declares it may compute in place (`Kernel.inplace`). `plan_memory` turns that record
into one offset per allocation in a single arena:

  - an allocation that outlives the run (a graph output, or a view of one; anything still referenced after the run)
    is *external*: it is allocated on its own every run, never from the arena;
  - an output a kernel may write over a dying input of the same size takes that input's place (in-place reuse);
  - the rest are placed greedily, largest first, each at the lowest offset that is free for its whole lifetime
    (the "greedy by size" offset assignment of TFLite's and onnxruntime's planners); offsets and sizes are rounded to
    the backend buffer type's alignment through its get_alloc_size.

Later runs with the same signature borrow one arena buffer from a pool shared by the sessions that share a container
or a stream (ArenaPool), or take one from the stream's registered allocator (seed 004), and hand out views at the
planned offsets, checking each request against the record: a request of another size (a kernel whose allocations depend
on data) ends the plan for that run -- the rest of the run allocates on its own, which is always safe -- and the
signature is recorded again next time.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from onnxep.contracts.allocator import trim_host_heap
from onnxep.contracts.backend import Tensor

#: Integer feeds of rank 0 or 1 up to this many elements are part of the signature by value: they may be shapes
#: that decide sizes (a shape, a sequence length, a top-k count). Others -- token ids, masks, positions, rank 2 and
#: up -- are data: a model whose sizes follow their values anyway (NonZero of a mask) leaves its plan safely
#: (ArenaRun.take), as with any data-dependent size. (With token ids in the signature, a sentence encoder never ran
#: the same signature twice: MiniLM-L6 on 20-token queries, 2.05 ms a call against 1.43 for repeated ids.)
SIGNATURE_INT_ELEMS = 64


def signature(feeds: dict) -> tuple:
    """What decides a run's allocations: every feed's shape and dtype, and the values of small integer feeds of rank
    0 or 1."""
    if len(feeds) == 1:                  # (the common case, without the sort)
        for name, v in feeds.items():
            return (_feed_key(name, v),)
    return tuple(_feed_key(name, feeds[name]) for name in sorted(feeds))


def small_ints(v):
    """The bytes of array `v` when it holds integers (or bools) and at most SIGNATURE_INT_ELEMS of them -- it may be
    a shape --, else None: what a signature, a recording's value_key and a capture's checked outputs hold by value."""
    return v.tobytes() if v.dtype.kind in "iub" and v.size <= SIGNATURE_INT_ELEMS else None


def signature_values(v):
    """The bytes of feed `v` (an array) that are part of the signature, or None (see SIGNATURE_INT_ELEMS)."""
    return small_ints(v) if v.ndim <= 1 else None


def _feed_key(name, v):
    if isinstance(v, np.ndarray):
        return (name, v.shape, v.dtype, signature_values(v))
    return (name, type(v).__name__, id(v))     # sequences, maps: never the same signature twice


def _owner(arr):
    """The object whose lifetime is the allocation's: the numpy block at the end of the .base chain, or the lease of
    a user allocator's block (contracts/allocator.py)."""
    b = arr
    while isinstance(b, np.ndarray) and b.base is not None:
        b = b.base
    return getattr(b, "_lease", b)


class AllocRecorder:
    """Watches one run: every allocation (via RunContext.alloc), every step's reads and what its outputs are."""

    def __init__(self):
        self.nbytes = []      # per allocation, in the order they were made
        self.start = []       # step that made it
        self.end = []         # last step that read it (or made it)
        self.refs = []        # weak reference to its owner (None when the owner takes none)
        self.inplace = []     # (output allocation, input allocation, step)
        self.ids = {}         # value name -> allocation it lives in
        self.tick = 0
        self._pending = []    # (allocation, array) made during the current step
        self.external = None  # per allocation, once finished: whether it outlives the run
        # per plan of a backend recording its steps (the cpu plans): what the run fed it and what each step made, as
        # (shape, dtype, small integer bytes | None) per value -- what a signature family compares (SignatureFamily)
        self.shapes = {}

    def on_alloc(self, nbytes: int, arr: np.ndarray) -> None:
        aid = len(self.nbytes)
        self.nbytes.append(nbytes)
        self.start.append(self.tick)
        self.end.append(self.tick)
        try:
            self.refs.append(weakref.ref(_owner(arr)))
        except TypeError:
            self.refs.append(None)
        self._pending.append((aid, arr))

    def begin_step(self, ins, values: dict) -> None:
        """A step starts and reads `ins`."""
        self.tick += 1
        t, ids, end = self.tick, self.ids, self.end
        for x in ins:
            aid = ids.get(x)
            if aid is not None:
                end[aid] = t

    def end_step(self, ins, outs, values: dict, inplace=()) -> None:
        """The step wrote `outs` (still in `values`, as are `ins`): bind each output to the allocation it lives in --
        one made during the step, or (a view) one of its inputs'."""
        t, ids, end = self.tick, self.ids, self.end
        pending, self._pending = self._pending, []
        fresh = {}
        for oi, o in enumerate(outs):
            v = values.get(o) if o else None
            if not isinstance(v, np.ndarray) or v.nbytes == 0:
                continue
            aid = None
            for pid, arr in pending:
                if v is arr or np.may_share_memory(v, arr):
                    aid = pid
                    fresh[oi] = pid
                    break
            if aid is None:
                for x in ins:
                    xid = ids.get(x)
                    if xid is not None and np.may_share_memory(v, values[x]):
                        aid = xid
                        break
            if aid is not None:
                ids[o] = aid
                end[aid] = max(end[aid], t)
        for oi, ii in inplace:
            if oi in fresh and ii < len(ins) and ids.get(ins[ii]) is not None:
                # only if no other input of the step lives in that memory, unless it too is read element by element
                # for this output (Add(a, a) may reuse a; a conv whose X is also its residual Z may not)
                target, declared = ids[ins[ii]], {i for o, i in inplace if o == oi}
                if not any(ids.get(x) == target for j, x in enumerate(ins) if j not in declared):
                    self.inplace.append((fresh[oi], target, t))

    def bind(self, name, values):
        """`values[name]` was replaced by an allocation made just now (a boundary copy)."""
        self.end_step((), (name,), values)

    def finish(self, output_names, alloc_size, reuse: bool = True) -> "MemoryPlan":
        """The plan, once the run is over and its values are dropped: what the outputs live in, and anything still
        referenced, is external."""
        n = len(self.nbytes)
        external = [False] * n
        for name in output_names:
            aid = self.ids.get(name)
            if aid is not None:
                external[aid] = True
        for aid, ref in enumerate(self.refs):
            if ref is None or ref() is not None:
                external[aid] = True
        self.external = external
        self.refs = None
        return plan_memory(self.nbytes, self.start, self.end, external, self.inplace, alloc_size, reuse)


def value_key(v):
    """(shape, dtype, bytes of a small integer array | None) of a value, or None for what is not an array: what a
    recording run notes per value and a signature family's capture compares with it."""
    if v.__class__ is not np.ndarray:
        return None
    return (v.shape, v.dtype, small_ints(v))


class MemoryPlan:
    """Offsets of one signature's allocations in one arena (-1: external). A signature family's plan has `elastic`
    allocations: their size follows the family's varying dims, so they are external and their size is not checked."""

    __slots__ = ("nbytes", "offsets", "arena_size", "n", "elastic", "__weakref__")

    def __init__(self, nbytes, offsets, arena_size, elastic=frozenset()):
        self.nbytes = tuple(nbytes)
        self.offsets = tuple(offsets)
        self.arena_size = int(arena_size)
        self.n = len(self.nbytes)
        self.elastic = elastic

    def describe(self) -> str:
        placed = [b for b, o in zip(self.nbytes, self.offsets) if o >= 0]
        return (f"MemoryPlan({self.n} allocations, {len(placed)} in a {self.arena_size} byte arena holding "
                f"{sum(placed)} bytes of tensors)")


def plan_memory(nbytes, start, end, external, inplace, alloc_size, reuse: bool = True) -> MemoryPlan:
    """Offsets for allocations with lifetimes [start, end] (steps, both ends live). `alloc_size(nbytes)` is the
    buffer type's rounded size (a multiple of its alignment), so every offset stays aligned. Without `reuse`
    (SessionOptions.enable_mem_reuse = False) every allocation has a region of its own, one after another."""
    n = len(nbytes)
    size = [alloc_size(b) for b in nbytes]
    if not reuse:
        offset, arena = [-1] * n, 0
        for i in range(n):
            if not external[i] and size[i] > 0:
                offset[i] = arena
                arena += size[i]
        return MemoryPlan(nbytes, offset, arena)
    parent = list(range(n))
    end = list(end)
    taken_at = {}

    def root(i):
        while parent[i] != i:
            i = parent[i]
        return i

    # in place: the output takes the input's memory when the input dies at this very step
    for out_id, in_id, t in inplace:
        r = root(in_id)
        if (external[out_id] or external[r] or out_id == r or end[r] != t or size[r] != size[out_id]
                or taken_at.get(r) == t or start[out_id] != t):
            continue
        parent[out_id] = r
        end[r] = max(end[r], end[out_id])
        taken_at[r] = t
    roots = [i for i in range(n) if parent[i] == i and not external[i] and size[i] > 0]
    roots.sort(key=lambda i: (-size[i], start[i], i))
    placed = []                   # (offset, size, start, end)
    offset = [-1] * n
    arena = 0
    for i in roots:
        s, e, sz = start[i], end[i], size[i]
        busy = sorted((o, o + z) for o, z, ps, pe in placed if ps <= e and s <= pe)
        best, best_gap, cur = None, None, 0
        for lo, hi in busy:
            gap = lo - cur
            if gap >= sz and (best_gap is None or gap < best_gap):
                best, best_gap = cur, gap
            cur = max(cur, hi)
        if best is None:
            best = cur
        offset[i] = best
        placed.append((best, sz, s, e))
        arena = max(arena, best + sz)
    for i in range(n):
        if parent[i] != i and not external[i]:
            offset[i] = offset[root(i)]
    return MemoryPlan(nbytes, offset, arena)


def tensor_alloc_size(buffer_type):
    """get_alloc_size of the buffer type, for a byte count."""
    def size(nbytes):
        return buffer_type.get_alloc_size(Tensor("", np.uint8, (nbytes,)))
    return size


class ArenaRun:
    """One planned run: hands out the arena's views in record order while the requests match the record.

    `views` (from the ArenaPool, per plan and pooled buffer, or None) keeps the typed array made for each request:
    a later run of the same plan in the same buffer gets the same array back for the same shape and dtype -- the
    same bytes at the same offset -- without slicing, viewing and reshaping again (about 2 us per tensor in a model
    run)."""

    __slots__ = ("plan", "mem", "k", "diverged", "views", "family")

    def __init__(self, plan: MemoryPlan, mem: np.ndarray, views=None, family=None):
        self.plan = plan
        self.mem = mem          # uint8, at least plan.arena_size bytes
        self.k = 0
        self.diverged = False
        self.views = views      # list of (shape, dtype, array) | None, one per request, or None
        self.family = family    # the SignatureFamily whose plan this is, or None (one signature's)

    def cached(self, shape, dtype):
        """The array this request got in an earlier run of the plan in this buffer, if it asks for the same shape
        and dtype (so the same bytes as the record), else None (then `take` decides)."""
        views = self.views
        k = self.k
        if views is None or self.diverged or k >= len(views):
            return None
        e = views[k]
        if e is None or e[1] is not dtype or e[0] != shape:
            return None
        self.k = k + 1
        return e[2]

    def keep(self, k, shape, dtype, arr) -> None:
        """Remember request k's array for the next runs (see cached)."""
        if self.views is not None and type(shape) is tuple:
            self.views[k] = (shape, dtype, arr)

    def take(self, nbytes: int):
        """The planned view for the next request, or None: allocate it outside the arena (external, or the run no
        longer follows the record -- from then on every request is None)."""
        k = self.k
        plan = self.plan
        if self.diverged:
            return None
        self.k = k + 1
        if k >= plan.n or plan.nbytes[k] != nbytes:
            if plan.elastic and k in plan.elastic:
                return None
            self.diverged = True
            return None
        off = plan.offsets[k]
        if off < 0:
            return None
        return self.mem[off:off + nbytes]


class ArenaPool:
    """Arena buffers (default allocator) lent to planned runs: the activation memory of every session drawing from the
    pool. A run borrows a free buffer that holds its plan -- the last one given back, else the smallest that is large
    enough, else (only smaller ones free) one of its plan's size in place of the largest of them, so a pool used by
    one run at a time is one buffer grown to the largest plan run from it --, and when none is free (runs on other
    threads hold them all) it allocates one more; it gives its buffer back when it ends. Two runs never share a
    buffer: taking one is `list.pop`, atomic, so the common case (the last buffer given back fits) takes no lock.
    A pool holds at most as many buffers as runs have overlapped on it (onnxruntime's arena likewise keeps what
    concurrent runs needed). The buffers go when the pool does: when its owner (`arena_pool`) and every session
    drawing from it are gone."""

    __slots__ = ("_lock", "_free", "nbytes", "nbuffers", "_views")

    GROWTH = 1.5

    def __init__(self):
        self._lock = threading.Lock()    # for the byte / buffer counts
        self._free = []                  # Buffers not lent out
        self._views = {}                 # Buffer -> {MemoryPlan (weak): ArenaRun views}: dropped with the buffer
        self.nbytes = 0                  # bytes of every buffer of the pool, lent or not
        self.nbuffers = 0

    def borrow(self, size: int, backend):
        """A Buffer of at least `size` bytes no other run holds until it is given back (allocated from `backend`'s
        buffer type when the pool has none to lend)."""
        try:
            buf = self._free.pop()
        except IndexError:
            buf = None
        if buf is not None and buf.size >= size:
            return buf
        # the last one given back is too small (or there is none): every free one taken, one chosen, the rest back
        taken = [] if buf is None else [buf]
        while True:
            try:
                taken.append(self._free.pop())
            except IndexError:
                break
        fits = [b for b in taken if b.size >= size]
        grow = size
        if fits:
            buf = min(fits, key=lambda b: b.size)
            taken.remove(buf)
        elif taken:
            # only smaller ones: the largest makes way for one of at least GROWTH times its size (the programs
            # compiled for a buffer go with it, and inputs of ever new lengths would otherwise replace it at each
            # larger plan: MiniLM-L6 fed lengths at random recompiled 90 times for 64 plans)
            old = max(taken, key=lambda b: b.size)
            taken.remove(old)
            grow = max(size, int(old.size * self.GROWTH))
            with self._lock:
                self.nbytes -= old.size
                self.nbuffers -= 1
            self._views.pop(old, None)
            old.free_buffer()
            buf = None
        self._free.extend(taken)
        if buf is None:
            buf = backend.alloc_buffer(grow)
            with self._lock:
                self.nbytes += buf.size
                self.nbuffers += 1
        return buf

    def give_back(self, buf) -> None:
        self._free.append(buf)

    def shrink(self) -> None:
        """Free every buffer no run holds (the run config memory.enable_memory_arena_shrinkage)."""
        while True:
            try:
                buf = self._free.pop()
            except IndexError:
                break
            with self._lock:
                self.nbytes -= buf.size
                self.nbuffers -= 1
            self._views.pop(buf, None)
            buf.free_buffer()

    def views(self, buf, plan: MemoryPlan) -> list:
        """The ArenaRun views of `plan` in `buf` (lent to the caller: no other run uses them meanwhile). They go with
        the plan, or with the buffer when the pool frees it (they would otherwise keep its memory)."""
        per_plan = self._views.get(buf)
        if per_plan is None:
            with self._lock:
                per_plan = self._views.setdefault(buf, weakref.WeakKeyDictionary())
        views = per_plan.get(plan)
        if views is None:
            views = per_plan[plan] = _Views([None] * plan.n)
            views.programs = {}
        return views


class _Views(list):
    """ArenaRun views of one plan in one buffer, and the compiled programs of the cpu plans for them (`programs`:
    CpuPlan -> backends/cpu/runloop.py Compiled): a program points into this buffer, so it lives as long as these
    views do."""

    __slots__ = ("programs",)


_POOLS = weakref.WeakKeyDictionary()      # owner (a Stream, a PrePackedWeightsContainer) -> ArenaPool
_POOLS_LOCK = threading.Lock()


def arena_pool(owner) -> ArenaPool:
    """The arena pool of the sessions sharing `owner`: it lives while `owner` or one of its sessions does."""
    with _POOLS_LOCK:
        pool = _POOLS.get(owner)
        if pool is None:
            pool = _POOLS[owner] = ArenaPool()
        return pool


_ANY = object()      # a family template's small integer feed whose values vary


def family_template(keys):
    """The template of input signatures `keys` (planner signatures of the same feeds: names, dtypes and ranks) that
    differ only in some dims and small integer values: each feed's entry with the dims that differ among them as
    None and the values that differ as _ANY; None when they differ in anything else."""
    first = keys[0]
    if any(len(k) != len(first) for k in keys):
        return None
    out = []
    for entries in zip(*keys):
        if any(len(e) != 4 for e in entries):        # a sequence or map feed: never the same signature twice
            return None
        name, shape, dtype, small = entries[0]
        if any(e[0] != name or e[2] is not dtype and e[2] != dtype or type(e[1]) is not tuple
               or len(e[1]) != len(shape) for e in entries):
            return None
        dims = tuple(d if all(e[1][j] == d for e in entries) else None for j, d in enumerate(shape))
        # (an integer feed that grows past SIGNATURE_INT_ELEMS leaves its values out of the signature: any values)
        vals = small if all(e[3] == small for e in entries) else _ANY
        out.append((name, dims, dtype, vals))
    return tuple(out)


def in_family(template, key) -> bool:
    """Whether signature `key` is one of `template`'s: the same feeds, dtypes and ranks, the fixed dims and values."""
    if len(key) != len(template) or any(len(e) != 4 for e in key):
        return False
    for (name, dims, dtype, vals), (kname, shape, kdtype, small) in zip(template, key):
        if (name != kname or dtype != kdtype or type(shape) is not tuple or len(shape) != len(dims)
                or vals is not _ANY and vals != small):
            return False
        for d, n in zip(dims, shape):
            if d is not None and d != n:
                return False
    return True


class SignatureFamily:
    """Input signatures that differ only in some dims and small integer values -- a decoder's steps, whose key /
    value cache grows a row a step, so that no signature ever comes back -- run under one memory plan and one
    compiled program per arena buffer. Made from two recorded runs of the family and its first planned run:

      - the plan is the last recorded run's, with every allocation whose size differed between the two recorded
        runs *elastic*: external (from the block pool, any size) while the others keep their arena offsets;
      - `ref` holds, per cpu plan, what the last recorded run fed it and what each of its steps made (value_key):
        the family's first planned run (a capture, backends/cpu/runloop.py) marks every value that differs from it,
        or is a feed the template leaves open, as *varying*. Only steps whose inputs and outputs are all fixed in
        shape (and whose baked-in values are fixed) run in C; the rest run in Python, with the fixed outputs of
        Python steps checked on every run as for a single signature.

    A run whose allocations leave the plan (a fixed size that changed after all) counts as a divergence of the
    family; after ArenaPlanner.MAX_DIVERGENCES the family is dropped. A family whose programs run fewer steps in C
    than in Python is *fruitless* (an encoder fed sentences of any length: nearly every tensor's size follows the
    length): its signatures run as before families, unrecorded until they come back, then recorded and planned on
    their own (MiniLM-L6 at random lengths 8-128 took 6.3 ms a call as a family against 5.9 without). A fruitful
    family keeps its signatures even when they come back: recording and compiling each again costs more than the
    few Python steps it would save (a decoding loop run again from the same prompt: every step a recording, then
    every step a compile)."""

    __slots__ = ("template", "plan", "ref", "varying_feeds", "divergences", "n_c", "n_py", "fruitless")

    def __init__(self, template, plan, ref):
        self.template = template
        self.plan = plan
        self.ref = ref
        # feed name -> True when dims of it vary, False when only its small integer values do
        self.varying_feeds = {name: None in dims for name, dims, dtype, vals in template
                              if vals is _ANY or None in dims}
        self.divergences = 0
        self.n_c = self.n_py = 0    # C and Python steps of its compiled programs
        self.fruitless = False

    def count(self, n_c: int, n_py: int) -> None:
        """A program of the family was compiled (backends/cpu/device.py) with n_c C and n_py Python steps."""
        self.n_c += n_c
        self.n_py += n_py


def _family_plan(older, last, alloc_size, reuse):
    """The memory plan of a family from two recorded runs (AllocRecorders, finished) of two of its signatures, or None
    when their runs made different allocations at different steps (then they are no family)."""
    if len(older.nbytes) != len(last.nbytes) or older.start != last.start or older.end != last.end:
        return None
    elastic = frozenset(k for k, (a, b) in enumerate(zip(older.nbytes, last.nbytes)) if a != b)
    external = [e or k in elastic for k, e in enumerate(last.external)]
    p = plan_memory(last.nbytes, last.start, last.end, external, last.inplace, alloc_size, reuse)
    p.elastic = elastic
    return p


class ArenaPlanner:
    """A session's memory plans, one per input signature, and where its arenas come from.

    `start` before a run: a signature seen for the first time is recorded; a planned one gets an arena. With the
    default allocator it is borrowed from the ArenaPool of `share_with` -- the session's Stream when it was given one
    (`InferenceSession(..., stream=s)`), else its PrePackedWeightsContainer -- and given back when the run ends, so
    sessions sharing a container or a stream share their activation arenas as onnxruntime's sessions share an
    environment allocator with session.use_env_allocators, while runs that overlap (threads) each borrow their own.
    With a registered allocator it is a fresh block from that allocator, returned when the run ends, so a user
    allocator sees one arena allocation per run besides the graph outputs. `finish` after the run (its values
    dropped) stores the plan."""

    # Plans kept: an encoder fed sentences of 17 lengths in turn kept none of 16 (every run a recording or a capture,
    # 6.9-7.0 ms a MiniLM-L6 call against 3.6 for a compiled one). With all taken, a new signature is recorded on its
    # FULL_RUNS-th run (noted till then) in place of the oldest plan: lengths drawn at random from more than this
    # many would otherwise record and compile without end (MiniLM-L6, lengths 8-128: 1.13x onnxruntime's call time
    # with every come-back recorded, against 1.04 with 16 plans). 128 holds those 121 lengths: calls 200-600 at
    # 4.5-5.0 ms against 5.2-5.3 with 64 plans, RSS 183 MB against 179 (the kernels' memos hold as many shapes,
    # ops/_memo.py)
    MAX_SIGNATURES = 128
    FULL_RUNS = 4
    MAX_DIVERGENCES = 2          # a signature whose runs leave the record this often is no longer planned
    # After this many runs in a row that each recorded a new signature, a new signature is only noted, and recorded
    # when it comes back: a decoder fed its growing past (the key / value cache) never repeats one, so recording
    # every step (all of its tensors fresh pages, the heap trimmed after it) cost more than the plan ever returned
    # (GPT-2 at 2 threads, past 500 -> 560: 1,931 page faults a step, onnxruntime 499). Unrecorded runs allocate
    # from the session's block pool.
    CHURN_RUNS = 3
    MAX_NOTED = 64
    # While churning, a new signature that differs from the last two recorded ones only in dims and small integer
    # values runs under their SignatureFamily: one plan and compiled program for all of them. At most this many.
    MAX_FAMILIES = 4

    def __init__(self, backend, share_with=None, reuse: bool = True, pooled: bool = True):
        self.backend = backend                   # arenas come from its buffer type (so from its stream)
        self.reuse = reuse                       # False: no two allocations share memory (enable_mem_reuse)
        self.pooled = pooled                     # False: a run's arena is its own, dropped after it (no cpu arena)
        self.stream = backend.buffer_type.stream
        self.alloc_size = tensor_alloc_size(backend.buffer_type)
        self.plans = {}                          # signature -> MemoryPlan | None (not planned)
        self._divergences = {}
        self._fresh = 0                          # runs in a row that recorded a new signature
        self._noted = {}                         # signatures run unrecorded -> their runs so far, oldest first
        self._recent = []                        # the last two recorded runs: (signature, AllocRecorder)
        self._trimmed = 0                        # bytes of the largest recorded run (trim_host_heap after it)
        self.families = []                       # SignatureFamily, newest last
        self._pool = arena_pool(share_with if share_with is not None else self.stream)

    def start(self, key, run_ctx):
        """Set run_ctx up to record or to use a plan; returns what finish needs."""
        plan = self.plans.get(key, _MISSING)
        if plan is _MISSING:
            family = self._family(key)
            if family is not None and not family.fruitless:
                return self._planned(key, family.plan, run_ctx, family)
            # a new signature is recorded at once, or while churning on its second run, or with every plan slot
            # taken on its FULL_RUNS-th (it then takes the oldest plan's slot)
            if len(self.plans) >= self.MAX_SIGNATURES:
                need = self.FULL_RUNS
            else:
                need = 2 if self._fresh >= self.CHURN_RUNS else 1
            seen = self._noted.pop(key, 0) + 1
            if seen < need:
                if len(self._noted) >= self.MAX_NOTED:
                    del self._noted[next(iter(self._noted))]
                self._noted[key] = seen
                return (key, None, None, None)
            self._fresh += 1
            run_ctx.recorder = AllocRecorder()
            return (key, None, None, None)
        self._fresh = 0
        if plan is None:
            return (key, None, None, None)
        return self._planned(key, plan, run_ctx, None)

    def _planned(self, key, plan, run_ctx, family):
        if self.pooled and self.stream.uses_default_allocator:
            # (a plan whose tensors all leave the arena borrows a buffer too: its views hold the compiled programs,
            # one per buffer, so runs on other threads never share one)
            buf = self._pool.borrow(max(plan.arena_size, 1), self.backend)
            run_ctx.arena = ArenaRun(plan, buf.memory(), self._pool.views(buf, plan), family)
            return (key, run_ctx.arena, buf, family)
        if plan.arena_size == 0 and family is None:
            return (key, None, None, None)
        buf = self.backend.alloc_buffer(max(plan.arena_size, 1))
        run_ctx.arena = ArenaRun(plan, buf.memory(), None, family)
        return (key, run_ctx.arena, None, family)

    def _family(self, key):
        """The SignatureFamily that new signature `key` runs under: one it is of, else, while churning, one made from
        the last two recorded runs when it and their signatures form one; else None."""
        for family in self.families:
            if in_family(family.template, key):
                return family
        if self._fresh < self.CHURN_RUNS or len(self._recent) < 2:
            return None
        (k2, older), (k1, last) = self._recent
        template = family_template((k2, k1, key))
        if template is None:
            return None
        plan = _family_plan(older, last, self.alloc_size, self.reuse)
        if plan is None:
            return None
        family = SignatureFamily(template, plan, last.shapes)
        if len(self.families) >= self.MAX_FAMILIES:
            del self.families[0]
        self.families.append(family)
        self._recent = []
        return family

    def finish(self, token, run_ctx, output_names, ok: bool) -> None:
        key, arena, lent, family = token
        rec, run_ctx.recorder, run_ctx.arena = run_ctx.recorder, None, None
        if lent is not None:
            self._pool.give_back(lent)
        if rec is not None and ok:
            if len(self.plans) >= self.MAX_SIGNATURES:
                del self.plans[next(iter(self.plans))]
            self.plans[key] = rec.finish(output_names, self.alloc_size, self.reuse)
            self._recent = [*self._recent[-1:], (key, rec)]
            recorded = sum(rec.nbytes)
            if recorded > self._trimmed:
                # the recorded run's tensors are freed and the arena replaces them: the heap goes back to the OS,
                # once per new high-water mark (1.1 ms of a 7.7 ms MiniLM-L6 recording; a smaller recording's
                # tensors fit in what the larger one left)
                self._trimmed = recorded
                trim_host_heap()
        if family is not None and family.n_py > family.n_c and not family.fruitless:
            family.fruitless = True
            self._noted[key] = 1        # (ran once, as a noted signature would have: recorded when it comes back)
        if arena is not None and arena.diverged:
            if family is not None:
                family.divergences += 1
                if family.divergences >= self.MAX_DIVERGENCES and family in self.families:
                    self.families.remove(family)
                return
            n = self._divergences[key] = self._divergences.get(key, 0) + 1
            if n >= self.MAX_DIVERGENCES:
                self.plans[key] = None
            else:
                self.plans.pop(key, None)          # record it again next time

    def shrink(self) -> None:
        self._pool.shrink()

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena pool this session draws from (0 before its first planned run, or with a user
        allocator), shared with the sessions that draw from it too."""
        return self._pool.nbytes


_MISSING = object()
