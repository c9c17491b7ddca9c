"""The Python side of the plugin EP's compile path (issue 28; the native side is onnxep/_k_ort_plugin.pxi).

With the EP option ``compile=1`` (``onnxep.ort.session_options(compile=1)``) onnxruntime hands onnxep's GetCapability
the graph; the plugin describes its nodes (op, domain, since-version, attributes, value types) and asks
:func:`capability` which nodes to fuse. OrtEp::Compile then describes each fused OrtGraph the same way and builds a
:class:`Partition`: an onnx ModelProto of the partition run by an onnxep InferenceSession (onnxep's own graph passes,
channel-last conv chains, fused attention / LayerNorm, its compiled run loop, on onnxep's own thread pool).

Design (measured, issue 28): Compute takes the GIL once per run, wraps the fused node's input OrtValues as ndarrays
(no copy), runs the partition's onnxep session (its compiled C run loop releases the GIL inside) and copies the
outputs into the buffers KernelContext_GetOutput gives. That costs what onnxep's own session.run costs: light
ResNet-50 at 2 threads 102.8 ms through onnxruntime vs 101.8 ms onnxep alone; the zoo's efficientnet 0.71 vs 0.62
ms (the ~0.1 ms is the GIL, the Python run call and the output copy). A GIL-free Compute (the run loop's Program
patched with the OrtValues' pointers) would save that ~0.1 ms on sub-millisecond models only; not done yet.
Initializers of at least INPLACE_MIN_BYTES are used in place: the partition's model declares them without data and
its onnxep session takes views of onnxruntime's OrtValues (SessionOptions.add_initializer; onnxep packs most of them
and drops the view); the first run checks onnxruntime hands the fused node that same memory (else the partition is
built again on the run's). Smaller ones are copied.
EPContext (ep.context_enable=1): :func:`compile_partition` also exports each partition as onnxep's own EPContext model
(graph/epcontext.py) and returns the EPContext node OrtEp::Compile hands onnxruntime; on reload the node is claimed
alone (:func:`capability`) and :meth:`Partition.from_context` loads it without passes or packing.
Compute runs on the thread onnxruntime calls it on; the partition's work runs on onnxep's own pool (EP option
``threads``; onnxruntime's intra-op pool stays idle while a partition runs).

Policy (measured, issue 28): lone nodes lose to onnxruntime's CPU EP, which fuses Conv+Act, MatMul+Add; a partition
is claimed only when it holds real compute (Conv, MatMul, Gemm, attention / normalization) -- tiny islands
(shape arithmetic, a lone activation) stay on the CPU EP.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading

import numpy as np

# Ops whose presence makes a partition worth compiling (the heavy kernels onnxep plans as a whole).
HEAVY_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "LayerNormalization", "Attention",
                       "MultiHeadAttention", "BatchNormalization", "Einsum", "LSTM", "GRU"})
# Ops never claimed: onnxruntime keeps control flow and ops whose outputs feed shape logic cheaply.
NEVER = frozenset({"If", "Loop", "Scan", "SequenceConstruct", "SequenceAt", "SplitToSequence", "ConcatFromSequence"})
_ALLOWED_TYPES = (1, 6, 7, 9)   # float32 data (first); int32 / int64 / bool for shapes and indices
CONTEXT_OP, CONTEXT_DOMAIN, CONTEXT_SOURCE = "EPContext", "com.microsoft", "onnxep"


def _domain(d: str) -> str:
    return "" if d in ("", "ai.onnx") else d


def node_supported(desc: dict, values: dict) -> bool:
    """onnxep runs this node natively: its op registry has a kernel at the node's version, every attribute could be
    read, and its float values are float32 (the other dtypes allowed are shape / index integers and bool: the shape
    arithmetic between two float nodes stays inside the partition instead of splitting it)."""
    from onnxep.ops import _registry

    if desc["attrs"] is None or desc["op"] in NEVER:
        return False
    dom = _domain(desc["domain"])
    if dom not in ("",):
        return False
    if _registry.lookup(dom, desc["op"], int(desc["since"])) is None:
        return False
    for name in desc["inputs"] + desc["outputs"]:
        if not name:
            continue
        v = values.get(name)
        if v is None or v[1] == 0:
            return False
        if v[1] not in _ALLOWED_TYPES:
            return False
    return True


def _toposort(descs: list, ok: list) -> list:
    """A topological order that keeps supported nodes together: Kahn's algorithm taking a ready node of the same
    kind (supported / not) as the last one while there is one."""
    producer = {}
    for i, d in enumerate(descs):
        for o in d["outputs"]:
            if o:
                producer[o] = i
    preds = [set() for _ in descs]
    succs = [set() for _ in descs]
    for i, d in enumerate(descs):
        for x in d["inputs"]:
            p = producer.get(x)
            if p is not None and p != i:
                preds[i].add(p)
                succs[p].add(i)
    indeg = [len(p) for p in preds]
    ready = [i for i in range(len(descs)) if indeg[i] == 0]
    order = []
    last = True
    while ready:
        pick = next((r for r in ready if ok[r] == last), None)
        if pick is None:
            pick = ready[0]
        ready.remove(pick)
        last = ok[pick]
        order.append(pick)
        for s in sorted(succs[pick]):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return order, preds


def is_own_context(desc: dict) -> bool:
    """An EPContext node (com.microsoft) that onnxep wrote (source "onnxep")."""
    return (desc["op"] == CONTEXT_OP and desc["domain"] == CONTEXT_DOMAIN
            and (desc["attrs"] or {}).get("source") == CONTEXT_SOURCE)


def capability(descs: list, values: dict) -> list:
    """Groups of node indices (into descs) to fuse: each a convex, connected set of supported nodes (a run of a
    topological order split into connected components) holding at least one heavy op; and each of onnxep's own
    EPContext nodes alone (Compile rebuilds its partition from the blob)."""
    own = [[i] for i, d in enumerate(descs) if is_own_context(d)]
    ok = [node_supported(d, values) for d in descs]
    order, preds = _toposort(descs, ok)
    runs, cur = [], []
    for i in order:
        if ok[i]:
            cur.append(i)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    groups = []
    for run in runs:
        members = set(run)
        parent = {i: i for i in run}

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for i in run:
            for p in preds[i]:
                if p in members:
                    parent[find(i)] = find(p)
        comps = {}
        for i in run:
            comps.setdefault(find(i), []).append(i)
        for comp in comps.values():
            if any(descs[i]["op"] in HEAVY_OPS for i in comp):
                groups.append(sorted(comp))
    return own + groups


def _value_info(name, v):
    from onnx import helper

    shape = None
    if v is not None and v[2] is not None:
        shape = [d if d >= 0 else f"d_{name}_{k}" for k, d in enumerate(v[2])]
    return helper.make_tensor_value_info(name, v[1] if v is not None else 1, shape)


#: initializers of at least this many bytes are used in place (views of onnxruntime's memory, see Partition);
#: None: every initializer is copied (the behaviour before; kept for measurements)
INPLACE_MIN_BYTES = 64 * 1024


def build_model(descs: list, values: dict, fused: dict, inplace_min_bytes=None):
    """(ModelProto, feed names, {name: array used in place}) of one fused partition: its nodes, its initializers,
    its inputs = the fused node's non-initializer inputs, its outputs = the fused node's outputs. Initializers of at
    least `inplace_min_bytes` are declared without data (name, type, dims) and returned as the arrays given (views of
    onnxruntime's memory); the others are copied into the model."""
    import onnx
    from onnx import helper, numpy_helper

    nodes, opsets, inits = [], {}, {}
    for k, d in enumerate(descs):
        dom = _domain(d["domain"])
        opsets[dom] = max(opsets.get(dom, 1), int(d["since"]))
        nodes.append(helper.make_node(d["op"], d["inputs"], d["outputs"], name=d["name"] or f"n{k}",
                                      domain=dom, **(d["attrs"] or {})))
        for x in d["inputs"]:
            v = values.get(x)
            if x and v is not None and v[3] is not None:
                inits[x] = v[3]
    produced = {o for d in descs for o in d["outputs"] if o}
    feed_names = []
    for x in fused["inputs"]:
        if x and x not in inits and x not in produced and x not in feed_names:
            feed_names.append(x)
    # inputs a node of the partition reads that onnxruntime did not list on the fused node (defensive)
    for d in descs:
        for x in d["inputs"]:
            if x and x not in inits and x not in produced and x not in feed_names:
                feed_names.append(x)
    tensors, inplace = [], {}
    for n, a in inits.items():
        if inplace_min_bytes is not None and a.nbytes >= inplace_min_bytes and a.dtype.kind in "fiub" \
                and a.flags.c_contiguous:
            t = onnx.TensorProto()       # name, type and dims only: the data is onnxruntime's (SessionOptions)
            t.name = n
            t.data_type = helper.np_dtype_to_tensor_dtype(a.dtype)
            t.dims.extend(a.shape)
            tensors.append(t)
            inplace[n] = a
        else:
            tensors.append(numpy_helper.from_array(np.array(a, order="C"), name=n))    # a copy
    graph = helper.make_graph(
        nodes, "onnxep_partition",
        [_value_info(x, values.get(x)) for x in feed_names],
        [_value_info(o, values.get(o)) for o in fused["outputs"]], tensors)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    model.ir_version = min(model.ir_version, 8)
    return model, feed_names, inplace


def _session_options(nthreads, precision):
    import onnxep

    so = onnxep.SessionOptions()
    if nthreads:
        so.intra_op_num_threads = int(nthreads)
    if precision and precision != "fp32":
        so.add_session_config_entry("onnxep.compute_precision", precision)
    return so


class Partition:
    """One compiled partition: an onnxep InferenceSession on the partition's model. ``feed_index`` lists
    (kernel-context input index, feed name) pairs; :meth:`run` returns the outputs in the fused node's order.

    ``export`` ({"embed", "ctx_path", "model_path", "name"}, from ep.context_*): the session also writes onnxep's own
    EPContext model of the partition (graph/epcontext.py: the optimized graph, packed weights, the precision record).
    embed 1: that model, its blobs embedded, is kept as bytes in ``context`` (for ep_cache_context); embed 0: it is
    written next to onnxruntime's EPContext model, its blobs in side files beside it, and ``context_file`` holds its
    relative name (the reload then reads each blob once, straight into onnxep's aligned buffer)."""

    def __init__(self, descs, values, fused, nthreads=0, precision="fp32", export=None):
        import onnxep

        self.model, feeds, inplace = build_model(descs, values, fused, INPLACE_MIN_BYTES)
        self._rebuild_args = (descs, values, fused, nthreads, precision) if inplace else None
        so = _session_options(nthreads, precision)
        self._inplace = {}
        if inplace:
            from onnxep.ortvalue import OrtValue

            for n, a in inplace.items():
                so.add_initializer(n, OrtValue.ortvalue_from_numpy(a))
                self._inplace[n] = a.ctypes.data
        self.context = self.context_file = None
        self.moved = 0
        if export is None:
            self.session = onnxep.InferenceSession(self.model.SerializeToString(), so)
        elif int(export["embed"]) == 1:
            tmp = tempfile.mkdtemp(prefix="onnxep_ctx_")
            try:
                path = os.path.join(tmp, "partition_ctx.onnx")
                self.session = onnxep.InferenceSession(self.model.SerializeToString(), _export(so, path, "1"))
                with open(path, "rb") as f:
                    self.context = f.read()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        elif int(export["embed"]) == 0:
            out = context_path(export["ctx_path"], export["model_path"])
            if not out:
                raise ValueError("ep.context_embed_mode=0 with a model given as bytes: set ep.context_file_path to "
                                 "where the EPContext model goes (the side files go next to it)")
            self.context_file = _side_name(out, export["name"])
            path = os.path.join(os.path.dirname(out), self.context_file)
            if os.path.isfile(path):   # left by an earlier compile to the same EPContext model path: ours to replace
                os.remove(path)
            self.session = onnxep.InferenceSession(self.model.SerializeToString(), _export(so, path, "0"))
        else:
            raise ValueError(f"ep.context_embed_mode must be 0 or 1, got {export['embed']}")
        self.model = None         # (the session holds what it needs; the message is not kept)
        self._bind(feeds, fused)
        self.nodes = len(descs)
        self.precision = precision

    def _bind(self, feeds, fused):
        pos = {x: i for i, x in enumerate(fused["inputs"])}
        self.feed_names = list(feeds)
        self.feed_index = self._feed_index = [(pos[x], x) for x in feeds if x in pos]
        missing = [x for x in feeds if x not in pos]
        if missing:
            raise ValueError(f"partition inputs not on the fused node: {missing}")
        self.output_names = list(fused["outputs"])
        self._lock = threading.Lock()
        # The initializers used in place are views of the memory the OrtGraph showed at Compile. onnxruntime passes
        # the same initializers to the fused node on every run: the first run reads them too (Compute wraps every
        # pair of feed_index) and checks they are where Compile saw them. If onnxruntime moved them, the partition
        # is built again on the run's ones (the memory onnxruntime keeps for the session).
        check = [(pos[n], n) for n in getattr(self, "_inplace", {}) if n in pos]
        self._checking = bool(check)
        if check:
            self.feed_index = self._feed_index + check

    def _first_run(self, feeds):
        with self._lock:
            if not self._checking:
                return
            moved = {n: feeds[n] for n, p in self._inplace.items() if n in feeds and feeds[n].ctypes.data != p}
            if moved:
                descs, values, fused, nthreads, precision = self._rebuild_args
                values = {k: (v if k not in moved else (v[0], v[1], v[2], moved[k])) for k, v in values.items()}
                fresh = Partition(descs, values, fused, nthreads, precision)
                self.session, self._inplace = fresh.session, fresh._inplace
                self.moved = len(moved)
            self._rebuild_args = None
            self.feed_index = self._feed_index
            self._checking = False

    @classmethod
    def from_context(cls, desc, cache, fused, model_path, nthreads=0, precision="fp32"):
        """The partition of one of onnxep's EPContext nodes, rebuilt from its blob: onnxep loads the blob's
        optimized graph and packed weights as they are (no passes, no packing; graph/epcontext.py refuses a blob
        made for another ISA, packing format or precision). A node written by another onnxep version is refused."""
        import onnxep

        attrs = desc["attrs"] or {}
        where = f"EPContext node {desc['name']!r}"
        version = attrs.get("ep_sdk_version", "")
        if version != onnxep.__version__:
            raise ValueError(f"{where} was compiled by onnxep {version or '(unknown)'}, this is onnxep "
                             f"{onnxep.__version__}: compile the model again with this onnxep")
        if int(attrs.get("main_context", 1)) != 1:
            raise ValueError(f"{where}: main_context={attrs.get('main_context')}; onnxep writes and reads "
                             f"main_context=1 only")
        embed = int(attrs.get("embed_mode", 1))
        if cache is None:
            raise ValueError(f"{where}: no ep_cache_context attribute")
        if embed == 0:
            src = _side_file(cache, model_path, where)     # onnxep's EPContext model, its blobs beside it
        elif embed == 1:
            src = cache                                    # onnxep's EPContext model, its blobs embedded
        else:
            raise ValueError(f"{where}: embed_mode must be 0 or 1, got {embed}")
        self = cls.__new__(cls)
        self._inplace = {}
        self.model = None
        self.context = self.context_file = None
        self.moved = 0
        self.precision = precision
        self.session = onnxep.InferenceSession(src, _session_options(nthreads, precision))
        self._bind([i.name for i in self.session.get_inputs()], fused)
        self.nodes = 1
        return self

    def run(self, feeds: dict) -> list:
        if self._checking:
            self._first_run(feeds)
        if len(feeds) > len(self._feed_index):   # a run that read the in-place initializers too
            feeds = {x: feeds[x] for _, x in self._feed_index if x in feeds}
        return self.session.run(self.output_names, feeds)


def compile_partition(descs, values, fused, cache, model_path, opts):
    """OrtEp::Compile for one fused graph: (Partition, EPContext node spec or None). One of onnxep's own EPContext
    nodes is rebuilt from its blob; any other fused graph is compiled, and with ep.context_enable=1 also exported
    (opts: nthreads, precision, ctx_enable, embed, ctx_path)."""
    nthreads, precision = opts["nthreads"], opts["precision"]
    if len(descs) == 1 and is_own_context(descs[0]):
        if opts["ctx_enable"]:
            raise ValueError("ep.context_enable=1 on a model that already holds onnxep EPContext nodes "
                             f"({descs[0]['name']!r}): compile from the original model")
        return Partition.from_context(descs[0], cache, fused, model_path, nthreads, precision), None
    if not opts["ctx_enable"]:
        return Partition(descs, values, fused, nthreads, precision), None
    export = {"embed": opts["embed"], "ctx_path": opts["ctx_path"], "model_path": model_path,
              "name": fused["name"] or "onnxep_partition"}
    part = Partition(descs, values, fused, nthreads, precision, export)
    return part, context_node_spec(part, fused)


def _export(so, path, embed):
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", embed)
    so.add_session_config_entry("ep.context_file_path", path)
    return so


def _side_name(ctx_path: str, node_name: str) -> str:
    stem = os.path.splitext(os.path.basename(ctx_path))[0]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{stem}_{node_name}.onnxep.onnx")


def context_path(ctx_path: str, model_path: str) -> str:
    """Where onnxruntime writes the EPContext model: ep.context_file_path, else <model>_ctx.onnx next to the model."""
    if ctx_path:
        return os.path.abspath(ctx_path)
    if not model_path:
        return ""
    return os.path.splitext(os.path.abspath(model_path))[0] + "_ctx.onnx"


def context_node_spec(part: Partition, fused: dict):
    """(name, inputs, outputs, attributes) of the EPContext node for a partition compiled with ``export``,
    attributes as onnxruntime's com.microsoft EPContext schema. ep_cache_context holds onnxep's EPContext model of the
    partition (embed_mode 1) or its file name relative to onnxruntime's EPContext model (embed_mode 0). Inputs are the
    partition's feeds only (its weights live in the blobs, packed)."""
    import onnxep
    from onnxep import _kernels

    if part.context is None and part.context_file is None:
        raise ValueError("the partition was compiled without export")
    embed = 1 if part.context is not None else 0
    cache = part.context if embed == 1 else part.context_file.encode()
    name = fused["name"] or "onnxep_partition"
    attrs = {"main_context": 1, "ep_cache_context": cache, "embed_mode": embed,
             "ep_sdk_version": onnxep.__version__.encode(), "source": CONTEXT_SOURCE.encode(),
             "partition_name": name.encode(), "hardware_architecture": _kernels.ISA.encode(),
             "notes": f"compute_precision={part.precision}".encode()}
    return name, list(part.feed_names), list(fused["outputs"]), attrs


def _side_file(cache: bytes, model_path: str, where: str) -> str:
    """The path of the file an embed_mode=0 node names: a relative file name inside the EPContext model's folder."""
    try:
        ref = cache.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{where}: ep_cache_context (embed_mode=0) is not a file name") from None
    if not model_path:
        raise ValueError(f"{where}: embed_mode=0 names a side file ({ref!r}) but the model was given as bytes: "
                         f"load the EPContext model from its path")
    parts = re.split(r"[\\/]", ref)
    if not ref or "\x00" in ref or os.path.isabs(ref) or ".." in parts:
        raise ValueError(f"{where}: side file {ref!r} must be a relative file name inside the model's folder")
    root = os.path.realpath(os.path.dirname(os.path.abspath(model_path)))
    full = os.path.realpath(os.path.join(root, ref))
    if os.path.commonpath([full, root]) != root:
        raise ValueError(f"{where}: side file {ref!r} resolves outside the model's folder {root!r}")
    if not os.path.isfile(full):
        raise ValueError(f"{where}: side file {ref!r} not found in {root!r}")
    return full
