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
Initializers are copied out of onnxruntime's OrtValues once, at Compile (onnxep packs most weights anyway).
Compute runs on the thread onnxruntime calls it on; the partition's work runs on onnxep's own pool (EP option
``threads``; onnxruntime's intra-op pool stays idle while a partition runs).

Policy (measured, issue 28): lone nodes lose to onnxruntime's CPU EP, which fuses Conv+Act, MatMul+Add; a partition
is claimed only when it holds real compute (Conv, MatMul, Gemm, attention / normalization) -- tiny islands
(shape arithmetic, a lone activation) stay on the CPU EP.
"""

from __future__ import annotations

import threading

import numpy as np

# Ops whose presence makes a partition worth compiling (the heavy kernels onnxep plans as a whole).
HEAVY_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "LayerNormalization", "Attention",
                       "MultiHeadAttention", "BatchNormalization", "Einsum", "LSTM", "GRU"})
# Ops never claimed: onnxruntime keeps control flow and ops whose outputs feed shape logic cheaply.
NEVER = frozenset({"If", "Loop", "Scan", "SequenceConstruct", "SequenceAt", "SplitToSequence", "ConcatFromSequence"})
_ALLOWED_TYPES = (1, 6, 7, 9)   # float32 data (first); int32 / int64 / bool for shapes and indices


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


def capability(descs: list, values: dict) -> list:
    """Groups of node indices (into descs) to fuse: each a convex, connected set of supported nodes (a run of a
    topological order split into connected components) holding at least one heavy op."""
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
    return groups


def _value_info(name, v):
    from onnx import helper

    shape = None
    if v is not None and v[2] is not None:
        shape = [d if d >= 0 else f"d_{name}_{k}" for k, d in enumerate(v[2])]
    return helper.make_tensor_value_info(name, v[1] if v is not None else 1, shape)


def build_model(descs: list, values: dict, fused: dict):
    """The onnx ModelProto of one fused partition: its nodes, its initializers (copied out of onnxruntime's
    OrtValues), its inputs = the fused node's non-initializer inputs, its outputs = the fused node's outputs."""
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
    graph = helper.make_graph(
        nodes, "onnxep_partition",
        [_value_info(x, values.get(x)) for x in feed_names],
        [_value_info(o, values.get(o)) for o in fused["outputs"]],
        [numpy_helper.from_array(np.array(a, order="C"), name=n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    model.ir_version = min(model.ir_version, 8)
    return model, feed_names


class Partition:
    """One compiled partition: an onnxep InferenceSession on the partition's model. ``feed_index`` lists
    (kernel-context input index, feed name) pairs; :meth:`run` returns the outputs in the fused node's order."""

    def __init__(self, descs, values, fused, nthreads=0):
        import onnxep

        self.model, feeds = build_model(descs, values, fused)
        so = onnxep.SessionOptions()
        if nthreads:
            so.intra_op_num_threads = int(nthreads)
        self.session = onnxep.InferenceSession(self.model.SerializeToString(), so)
        pos = {x: i for i, x in enumerate(fused["inputs"])}
        self.feed_index = [(pos[x], x) for x in feeds if x in pos]
        missing = [x for x in feeds if x not in pos]
        if missing:
            raise ValueError(f"partition inputs not on the fused node: {missing}")
        self.output_names = list(fused["outputs"])
        self.nodes = len(descs)
        self._lock = threading.Lock()

    def run(self, feeds: dict) -> list:
        return self.session.run(self.output_names, feeds)
