"""ShapeSubgraph (domain com.onnxep): default-domain nodes whose outputs depend only on the shapes of some tensors
and on constants, computed once per signature and cached -- what graph/passes/fold_shape_subgraphs.py makes of the
shape logic exporters write (Shape -> Gather -> Unsqueeze -> Concat, Range / Expand / Where building positions and
masks). Written by passes, never by users.

Attributes: `body` (graph: a graph/ir.py Body, as the pass writes it and graph/model.py decode_bodies reads it
back from a file) the captured nodes, its inputs and outputs named as the node's; `shape_inputs` (int) how
many leading inputs are read for their shape only (the body reads them through Shape / Size; the kernel hands it
stand-ins of the same shape and dtype, never their data); `opset` (int) the default-domain opset of the nodes. The other
inputs are read as data: signature-determined values made by earlier ShapeSubgraph nodes, and constants.

The cache key is the shapes of the shape inputs and, per non-constant data input, its identity when it is an array
this op cached (read-only, the same object every run of a signature; the entry holds it, so the identity cannot be
reused) or else its bytes (up to KEY_BYTES; a larger one is not cached on). A miss runs the body's nodes with onnxep's
cpu kernels (allocating on their own, outside the run's arena) and keeps the outputs, made read-only: a reader never
writes into them (kernels write in place only into arena memory the planner gave them, graph/planner.py, and the
executor copies a read-only graph output). At most MAX_ENTRIES signatures and MAX_BYTES of outputs per node, oldest
dropped first; a signature whose outputs alone exceed MAX_BYTES is computed each run.

Nodes whose bodies are the same up to names (the same ops, attributes and constants, wired the same way) share one
cache: a decoder's per-layer subgraphs, each reading its own layer's key / value tensor of the same shape, compute
once per signature instead of once per layer. A miss evaluates each body node once per distinct (node, its
inputs), the body's inputs of equal values (of equal shapes, for shape inputs) counted as one: the exporters repeat
the same shape arithmetic per layer inside one body (30 x Shape -> Squeeze -> Add of equal past shapes in
SmolLM-135M's). Which nodes run is planned once per pattern of equal inputs (_schedule), which a decoder's steps
share. A decoder fed its growing past misses every step, so this is what it pays per step."""
from __future__ import annotations

import threading
import weakref

import numpy as np

from onnxep.contracts.kernel import KernelContext
from onnxep.errors import OnnxepError, RuntimeException
from onnxep.graph.ir import WeakIntern
from onnxep.ops._base import OpKernel
from onnxep.ops._memo import ShapeMemo
from onnxep.ops.tensor.expand import expand_shape

DOMAIN = "com.onnxep"
MAX_ENTRIES = ShapeMemo.LIMIT      # (as many shapes as the kernels keep their plans for, ops/_memo.py)
MAX_BYTES = 64 << 20
KEY_BYTES = 4096

#: id -> array, every array a ShapeSubgraph holds in its cache (weak: an entry goes with its array)
_CACHED = weakref.WeakValueDictionary()


class _Cache:
    """One cache of signature -> outputs, shared by the nodes of one body fingerprint (weakly registered: it goes
    with its last node)."""
    __slots__ = ("entries", "nbytes", "lock", "__weakref__")

    def __init__(self):
        self.entries = {}            # key -> (outputs, arrays the key names by identity)
        self.nbytes = 0
        self.lock = threading.Lock()


#: body fingerprint -> its _Cache
_SHARED = WeakIntern()


def _freeze(v):
    """A hashable stand-in for an attribute or constant value (equal values, equal stand-ins); None when it has
    none (the node then takes part in no sharing)."""
    if isinstance(v, np.ndarray):
        return None if v.dtype == object else ("a", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (list, tuple)):
        items = tuple(_freeze(x) for x in v)
        return None if any(x is None for x in items) else ("l", items)
    if isinstance(v, (int, float, str, bytes, bool)) or v is None:
        return ("p", type(v).__name__, v)
    return None


def _vkey(a):
    """A data input's key for an evaluation's input pattern (ShapeSubgraph_1._schedule): small arrays by content,
    anything else by identity (alive for the whole evaluation, so an identity is never reused within it)."""
    if isinstance(a, np.ndarray) and a.dtype != object and a.nbytes <= KEY_BYTES:
        return ("v", a.dtype.str, a.shape, a.tobytes())
    return ("i", id(a))


#: default-domain ops a body runs on stand-ins (zero-stride arrays) when they view a shape input for Shape nodes only:
#: views (their kernels publish a reshaped input) and Expand (a broadcast view here, never a copy)
VIEW_OPS = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand"})


class _StandIn(KernelContext):
    """A body node's context on stand-ins: outputs are published as made (no contiguous copy of a zero-stride
    view)."""

    def set_output(self, i: int, value) -> None:
        if i < len(self.outs) and self.outs[i]:
            self.values[self.outs[i]] = value


def _stand_in(kernel, ctx, op):
    """Run a view node on stand-ins: Expand as a broadcast view (its kernel's checks, no copy), the rest as their
    kernels do (a reshaped view of the input)."""
    if op != "Expand":
        kernel.compute(ctx)
        return
    x = ctx.input(0)
    ctx.set_output(0, np.broadcast_to(x, expand_shape(x.shape, ctx.input(1))))


def _run_body_node(kernel, ctx, op, name, owner, how):
    """kernel.compute(ctx) (or how(kernel, ctx, op)), its errors named after the body node and the ShapeSubgraph."""
    try:
        if how is None:
            kernel.compute(ctx)
        else:
            how(kernel, ctx, op)
    except OnnxepError as e:
        raise type(e)(f"while running {op} node '{name}' (in {owner}): {e.args[0] if e.args else ''}") from e
    except Exception as e:
        raise RuntimeException(f"Non-zero status code returned while running {op} node. Name:'{name}' "
                               f"(in {owner}) Status Message: {type(e).__name__}: {e}") from e


def _alloc_limit(ctx):
    run = ctx.run
    return getattr(run, "limit", 1 << 40) if run is not None else 1 << 40


class ShapeSubgraph_1(OpKernel):
    domain, op_type, since = DOMAIN, "ShapeSubgraph", 1
    type_constraints = {}        # no onnx schema for this domain: supports() checks the body
    body = None
    shape_inputs = 0
    opset = 0

    @classmethod
    def supports(cls, op):
        from onnxep.graph.ir import Body
        from onnxep.ops import _registry
        node = op.node
        body = node.attrs.get("body")
        n_shape = node.attrs.get("shape_inputs", 0)
        opset = node.attrs.get("opset", 0)
        if (not isinstance(body, Body) or not isinstance(n_shape, int) or not isinstance(opset, int)
                or len(body.inputs) != len(node.inputs) or len(body.outputs) != len(node.outputs)
                or not 0 <= n_shape <= len(node.inputs) or not all(node.inputs) or not all(node.outputs)):
            return False
        return all(n.domain in ("", "ai.onnx") and _registry.lookup("", n.op_type, opset) is not None
                   for n in body.nodes)

    def __init__(self, info):
        super().__init__(info)
        from onnxep.backends.cpu.device import KernelInfo
        from onnxep.ops import _registry
        body, opset = self.body, int(self.opset)
        self._ins, self._outs = tuple(body.inputs), tuple(body.outputs)
        types = dict(body.types)
        nodes = [(n.name, n.op_type, n.inputs, n.outputs, n.attrs) for n in body.nodes]
        self._n_shape = int(self.shape_inputs)
        self.strided_inputs = tuple(range(self._n_shape))     # (their shapes only)
        consts = {self._ins[j]: a for j, a in info.constants.items() if j < len(self._ins)}
        self._data = tuple(j for j in range(self._n_shape, len(self._ins)) if j not in info.constants)
        for j, t in enumerate(info.input_types):
            if t is not None and j < len(self._ins):
                types[self._ins[j]] = t
        self._steps = []
        self._fps = []               # per body node: (op type, attributes, constants) or None (not memoized)
        # body nodes that view a shape input (or another such view) only for the Shape nodes after them (the pass
        # folds those in, fold_shape_subgraphs.VIEW_OPS): evaluated on the stand-ins, no data made
        standing = set(self._ins[:self._n_shape])
        self._standin = []
        try:
            for name, op_type, ins, outs, attrs in nodes:
                stand = op_type in VIEW_OPS and bool(ins) and ins[0] in standing
                self._standin.append(stand)
                if stand:
                    standing.update(o for o in outs if o)
                fa = _freeze(sorted(attrs.items()))
                fc = _freeze([consts.get(x) for x in ins])
                self._fps.append(None if fa is None or fc is None else (op_type, fa, fc))
                cls = _registry.lookup("", op_type, opset)
                if cls is None:
                    raise OnnxepError(f"ShapeSubgraph node {self.name!r}: no cpu kernel for {op_type} at opset "
                                      f"{opset} (node {name!r})")
                kinfo = KernelInfo(name, op_type, "", opset, dict(attrs), tuple(types.get(x) for x in ins),
                                   tuple(types.get(x) for x in outs),
                                   {j: consts[x] for j, x in enumerate(ins) if x in consts})
                self._steps.append((cls(kinfo), tuple(ins), tuple(outs), name, op_type))
        except BaseException:
            self.release()
            raise
        self._shared = self._shared_cache(opset, consts, types)
        self._cache = self._shared.entries
        fids = {}                    # fingerprint -> a small int (what _schedule compares)
        self._fp_ids = [None if fp is None else fids.setdefault(fp, len(fids)) for fp in self._fps]
        self._schedules = ShapeMemo()     # input pattern -> _schedule's

    def _shared_cache(self, opset, consts, types) -> _Cache:
        """The cache of this body's fingerprint: its nodes with names replaced by first-use order, the attributes and
        constants by value, the inputs' element types; a body with a value that has no fingerprint gets a cache of
        its own."""
        index = {}

        def ix(name):
            return index.setdefault(name, len(index)) if name else -1

        def etype(x):
            vt = types.get(x)
            return None if vt is None else (vt.kind, vt.type_str)
        parts = [opset, self._n_shape, self._data, tuple(ix(x) for x in self._ins),
                 tuple(etype(x) for x in self._ins)]
        for (_, ins, outs, _, op), fp in zip(self._steps, self._fps):
            if fp is None:
                return _Cache()
            parts.append((fp, tuple(ix(x) for x in ins), tuple(ix(x) for x in outs)))
        cf = _freeze([consts.get(x) for x in self._ins])
        if cf is None:
            return _Cache()
        parts.append((tuple(ix(x) for x in self._outs), cf))
        return _SHARED.file(tuple(parts), _Cache())

    def compute(self, ctx):
        values, ins = ctx.values, ctx.ins
        held = ()
        if not self._data:          # (the common case: shapes only)
            key = tuple([values[ins[i]].shape for i in range(self._n_shape)])
        else:
            key, held = self._key(values, ins)
        if key is not None:
            entry = self._cache.get(key)
            if entry is not None:
                # (what set_output does, less its contiguity check: cached arrays are C-contiguous)
                for o, v in zip(ctx.outs, entry[0]):
                    values[o] = v
                return
        outs = self._evaluate(ctx)
        if key is not None:
            self._keep(key, outs, held)
        for i, v in enumerate(outs):
            ctx.set_output(i, v)

    def _key(self, values, ins):
        """(cache key, arrays it names by identity) with data inputs; key None: not cacheable this run."""
        key = [values[ins[i]].shape for i in range(self._n_shape)]
        held = []
        for i in self._data:
            a = values[ins[i]]
            if _CACHED.get(id(a)) is a:
                key.append(id(a))
                held.append(a)
            elif isinstance(a, np.ndarray) and a.nbytes <= KEY_BYTES and a.dtype != object:
                key.append((a.dtype, a.shape, a.tobytes()))
            else:
                return None, ()
        return tuple(key), tuple(held)

    def _evaluate(self, ctx) -> list:
        """The body's outputs for this run's inputs (fresh arrays, C-contiguous)."""
        from onnxep.graph.model import check_size
        limit = _alloc_limit(ctx)

        def alloc(shape, dtype=np.float32):
            check_size(shape, dtype, f"ShapeSubgraph node {self.name!r}", limit)
            return np.empty(shape, dtype)

        env = {}
        ids = {}                    # an input's key (_vkey; a shape input's shape) -> a small int: equal keys, equal ints
        pattern = []
        stand_ins = {}              # (shape, dtype) -> a stand-in: the shape inputs repeat a few shapes
        for i, name in enumerate(self._ins):
            a = ctx.input(i)
            if i < self._n_shape and a.__class__ is np.ndarray:
                k = ("s", a.shape, a.dtype.str)
                b = stand_ins.get(k)
                if b is None:
                    b = stand_ins[k] = np.broadcast_to(np.zeros((), a.dtype), a.shape)  # its shape, not its data
                a = b
            else:
                k = _vkey(a)
            pattern.append(ids.setdefault(k, len(ids)))
            env[name] = a
        pattern = tuple(pattern)
        sched = self._schedules.get(pattern)
        if sched is None:
            sched = self._schedules.keep(pattern, self._schedule(pattern))
        steps, outs_at = sched
        kctx = KernelContext(env, (), (), alloc, ctx.num_threads, (), self.name)
        standin = None
        for kernel, ins, outs, name, op, stand in steps:
            if stand:
                if standin is None:
                    standin = _StandIn(env, (), (), alloc, ctx.num_threads, (), self.name)
                standin.ins, standin.outs, standin.node = ins, outs, name
                _run_body_node(kernel, standin, op, name, self.name, _stand_in)
            else:
                kctx.ins, kctx.outs, kctx.node = ins, outs, name
                _run_body_node(kernel, kctx, op, name, self.name, None)
        out = []
        for o in outs_at:
            v = env[o]
            if isinstance(v, np.ndarray) and not v.flags.c_contiguous:
                v = np.ascontiguousarray(v)
            out.append(v)
        return out

    def _schedule(self, pattern):
        """(the body nodes to run, the names its outputs are read from) for inputs whose equal ones `pattern` marks
        (an int per input, equal for equal inputs): a node is run once per distinct (op, attributes, constants,
        inputs), its repeats -- the exporters' per-layer shape arithmetic on equal past shapes -- read the first
        one's outputs. What it is depends on the pattern only, so a decoder's steps (the same pattern, new shapes)
        reuse it."""
        same = {}                   # a value name -> the name of the equal value it is read from
        first = {}
        for name, k in zip(self._ins, pattern):
            same[name] = first.setdefault(k, name)
        seen = {}                   # (fingerprint id, standing, inputs) -> the first such node's outputs
        steps = []
        for (kernel, ins, outs, name, op), fp, stand in zip(self._steps, self._fp_ids, self._standin):
            ins = tuple(same.get(x, x) for x in ins)
            if fp is not None:
                mk = (fp, stand, ins)
                prev = seen.get(mk)
                if prev is not None:
                    for o, po in zip(outs, prev):
                        if o:
                            same[o] = po
                    continue
                seen[mk] = outs
            steps.append((kernel, ins, outs, name, op, stand))
        return tuple(steps), tuple(same.get(o, o) for o in self._outs)

    def _keep(self, key, outs, held) -> None:
        if not all(isinstance(v, np.ndarray) for v in outs):
            return
        nbytes = sum(v.nbytes for v in outs)
        if nbytes > MAX_BYTES:
            return
        for v in outs:
            v.flags.writeable = False
        shared = self._shared
        with shared.lock:
            cache = shared.entries
            if key in cache:
                return
            while cache and (len(cache) >= MAX_ENTRIES or shared.nbytes + nbytes > MAX_BYTES):
                old = cache.pop(next(iter(cache)))
                shared.nbytes -= sum(v.nbytes for v in old[0])
            cache[key] = (tuple(outs), held)
            shared.nbytes += nbytes
        for v in outs:
            _CACHED[id(v)] = v

    def release(self):
        for step in getattr(self, "_steps", ()):
            step[0].release()
        self._steps = []
        self._schedules = ShapeMemo()
        self._shared = _Cache()
        self._cache = self._shared.entries
