"""Where onnxep's time goes, beside onnxruntime's own profile of the same model (`python -m onnxep profile`).

    python -m onnxep profile MODEL [--threads N] [--runs R] [--warmup W] [--dim NAME=VALUE ...] [--no-ort]
                                   [--top K] [--json OUT] [--trace-dir DIR] [--config KEY=VALUE ...]
                                   [--decode [--past P]]

MODEL is an ONNX file, or the short name of a light model of the onnx wheel ("resnet50": onnxep/_light.py, seeded
random weights). Inputs are random data of each declared input's type (onnxep/_bench.py random_feeds); a symbolic dim
is 1 unless `--dim name=value` sets it; `--config key=value` adds an onnxep session config entry (e.g.
onnxep.fallback_op_types=Softmax). Both libraries run the same model (unnamed nodes named `<op>_<index>`, as
onnxep names them) with `enable_profiling`, W warm-up runs then R timed runs, one after the other, each with its own
profiler; both traces (onnxruntime's JSON format, onnxep's written by InferenceSession.end_profiling) are parsed the
same way (parse_trace): the "model_run" events are the runs, the first W dropped; the "Node" events
("<node>_kernel_time") starting inside a run are its kernels. Printed (and written by --json OUT as the same tables):

(a) wall time per run (median of the R "model_run" durations) and the kernels' time per run (median of the per-run
    sums of the kernel events);
(b) a per-op-type table, onnxep and onnxruntime side by side: kernels, microseconds per run (the sum of that op's
    kernel events over the R runs, divided by R) and share of the run (that over the mean run wall time);
(c) onnxep's top-K kernels by time, with op, input / output shapes and provider (cpu or reference);
(d) the time outside kernels: per run, wall time minus the sum of its kernel events (median): dispatch, the memory
    plan, output copies;
(e) how many model nodes run on the reference fallback (onnx.reference), from the session's node assignment.

`--decode`: MODEL is a decoder exported with its key / value cache (inputs past_key_values.*, outputs present.* and
logits), and the runs are a greedy decoding loop (onnxep/_bench.py decode_start / decode_next, as
bench/bench_decode.py runs it): each run one step, its present outputs fed back as the next step's past, its argmax
token as the next input, so every run is a new input signature as in a user's generation loop. The first step is the
--inputs NPZ, else the NPZ stored beside MODEL (bench/zoo's) with `--past` tokens (default 128) of seeded random past.
Both libraries start from the same feeds; each follows its own tokens.

Mapping optimized kernels back to the model's ops (map_kernels). Both libraries run an optimized graph: onnxruntime's
is saved with SessionOptions.optimized_model_filepath, onnxep's is its compiled plans' steps (names, op types, input
and output tensor names). Each kernel of that graph is mapped to the nodes of the original model it computes:

1. A tensor of the optimized graph stands for an original tensor when it has that name; a tensor a kernel computes
   also when its name is an original one plus "_suffix" parts (onnxep's NHWC tensors are "<original>_nhwc"), or when
   it is the one output of a kernel named so (onnxruntime's NCHWc kernels are "<original output>_nchwc"). Not the
   output of a kernel named like a model node: onnxruntime names a Gemm fused from MatMul + Add "<MatMul name>/
   MatMulAddFusion", and its output is not the MatMul's.
2. Kernels linked by tensors that stand for nothing original (onnxruntime's reshapes around a Gemm, its ReorderInput)
   form one group. A group's nodes are those found walking the original graph backwards from the original tensors the
   group produces, stopping at the tensors it reads, at tensors another group produces, at initializers, graph inputs
   and tensors computed from constants alone (folded), then keeping those downstream of a tensor the group reads (or
   computed from constants only).
   A group that only converts a tensor it also reads (ReorderOutput, a layout Transpose) covers nothing.
3. Within a group the nodes go to its kernels: a kernel whose name refers to a covered node gets it ("k_mm_11/
   MatMulAddFusion", onnxep's "q_mm_5_fused", "r2_nchwc" -> the producer of r2); a kernel still without a node of
   its own op type gets one if one is left; every other covered node goes to the kernel that has its producer (else its
   consumer): Conv -> BatchNormalization -> Relu all land on the Conv kernel that fused them. A node two groups both
   cover goes to the kernel that computes its input (else the first); so does a node a kernel of a model op type
   covers before its own node (a kernel fuses what follows its op, not what precedes it).
4. A kernel's time counts under one op type of the model: the covered nodes' op type if they all have one; else the
   kernel's own op type if it is among them; else the first present of ANCHORS (Conv, MatMul, Gemm, ... -- the op a
   fusion is built around: a Gemm from MatMul + Add counts as MatMul); else the kernel's own op type (Gelu,
   SkipLayerNormalization, a LayerNormalization fused from ReduceMean / Sub / Pow ...). Its other covered nodes are
   listed as fused into it. A kernel that covers no model node shows under its own op type with a "*" (a layout
   conversion, a reshape onnxruntime adds around a Gemm). Without an optimized graph (onnxruntime's file could not be
   written), kernels count under the op type their events name.

Nodes under an onnxruntime If / Loop / Scan have events of their own beside their parent's; only the main graph's
kernels are counted when the optimized graph is known (the others are reported as skipped)."""
from __future__ import annotations

import collections
import bisect
import json
import os
import statistics
import sys
import tempfile

import numpy as np
import onnx

#: the op a fusion is built around, in order of preference: a kernel covering several op types counts under the first
ANCHORS = ("Conv", "ConvTranspose", "QLinearConv", "ConvInteger", "MatMul", "Gemm", "QLinearMatMul", "MatMulInteger",
           "MatMulNBits", "Einsum", "LSTM", "GRU", "RNN", "Attention", "MultiHeadAttention", "LayerNormalization",
           "BatchNormalization", "InstanceNormalization", "GroupNormalization", "RMSNormalization", "Softmax",
           "MaxPool", "AveragePool", "GlobalAveragePool", "Resize", "Gather", "DequantizeLinear")

#: a name is compared to the model's node / tensor names after dropping up to this many "_suffix" parts
_MAX_STRIP = 4


# ---------------------------------------------------------------------------------------------- traces
def parse_trace(trace, skip_runs=0) -> dict:
    """A profile in onnxruntime's format (path or list of events) -> {"runs": [{"wall_us", "kernel_us", "ts",
    "kernels": {name: us}}],
    "kernels": {name: {"op", "provider", "node_index", "inputs", "outputs", "us", "calls"}}, "events": n}.

    Runs are the "model_run" events (cat "Session") after the first `skip_runs`; a kernel event ("Node", name
    "<node>_kernel_time") belongs to the run its start falls in, and events outside the kept runs are dropped. "us" is
    the sum of the node's kernel events over the kept runs, "calls" their count; a run's "kernel_us" is the sum of its
    kernel events."""
    if isinstance(trace, (str, os.PathLike)):
        with open(trace) as f:
            trace = json.load(f)
    events = [e for e in trace if isinstance(e, dict) and e.get("ph", "X") == "X"]
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])[skip_runs:]
    spans = [(int(r["ts"]), int(r["ts"]) + int(r["dur"])) for r in runs]
    starts = [s for s, _ in spans]
    out_runs = [{"ts": s, "wall_us": float(e - s), "kernel_us": 0.0, "kernels": {}} for s, e in spans]
    kernels = {}
    for e in events:
        name = e.get("name", "")
        if e.get("cat") != "Node" or not name.endswith("_kernel_time"):
            continue
        ts = int(e["ts"])
        k = bisect.bisect_right(starts, ts) - 1
        if k < 0 or ts > spans[k][1] + 1:
            continue
        node = name[:-len("_kernel_time")]
        dur = float(e["dur"])
        run = out_runs[k]
        run["kernel_us"] += dur
        run["kernels"][node] = run["kernels"].get(node, 0.0) + dur
        args = e.get("args", {})
        rec = kernels.get(node)
        if rec is None:
            rec = kernels[node] = {"op": args.get("op_name", "?"), "provider": args.get("provider", ""),
                                   "node_index": args.get("node_index", ""),
                                   "inputs": args.get("input_type_shape", []),
                                   "outputs": args.get("output_type_shape", []), "us": 0.0, "calls": 0}
        rec["us"] += dur
        rec["calls"] += 1
    return {"runs": out_runs, "kernels": kernels, "events": len(events)}


def summarize(parsed, keys=None, fused=None, only=None) -> dict:
    """Tables of one parsed trace: run / kernel / outside-kernel medians per run (us), per-op rows and the kernels
    sorted by time. `keys`: kernel name -> op type to count it under (default: its event's op name); `only`: the
    kernel names to count (the others' time is reported as skipped); `fused`: map_kernels' fused-node counts."""
    runs = parsed["runs"]
    n = max(len(runs), 1)
    walls = [r["wall_us"] for r in runs] or [0.0]
    ksums = [r["kernel_us"] for r in runs] or [0.0]
    kernels = parsed["kernels"]
    skipped = {}
    if only is not None:
        skipped = {k: v for k, v in kernels.items() if k not in only}
        kernels = {k: v for k, v in kernels.items() if k in only}
        # the skipped (nested) kernels ran inside a counted one: not part of the run's own kernel sum
        ksums = [sum(us for k, us in r["kernels"].items() if k in only) for r in runs] or [0.0]
    mean_wall = statistics.fmean(walls) if walls else 0.0
    ops = {}
    for name, k in kernels.items():
        key = (keys or {}).get(name, k["op"])
        row = ops.setdefault(key, {"op": key, "kernels": 0, "us_per_run": 0.0})
        row["kernels"] += 1
        row["us_per_run"] += k["us"] / n
    for row in ops.values():
        row["share"] = row["us_per_run"] / mean_wall if mean_wall else 0.0
    rows = sorted(ops.values(), key=lambda r: -r["us_per_run"])
    top = sorted(({"node": name, "op": k["op"], "key": (keys or {}).get(name, k["op"]), "us_per_run": k["us"] / n,
                   "share": (k["us"] / n / mean_wall) if mean_wall else 0.0, "provider": _short_provider(k["provider"]),
                   "inputs": k["inputs"], "outputs": k["outputs"], "calls_per_run": k["calls"] / n}
                  for name, k in kernels.items()), key=lambda r: -r["us_per_run"])
    outside = [w - s for w, s in zip(walls, ksums)]
    return {"runs": len(runs), "run_us_median": statistics.median(walls), "run_us_mean": mean_wall,
            "kernel_us_median": statistics.median(ksums), "outside_kernels_us_median": statistics.median(outside),
            "kernels": len(kernels), "ops": rows, "nodes": top, "fused": fused or {},
            "skipped_kernels": len(skipped), "skipped_us_per_run": sum(v["us"] for v in skipped.values()) / n}


def _short_provider(p: str) -> str:
    return {"OnnxepExecutionProvider": "cpu", "OnnxReferenceExecutionProvider": "reference",
            "CPUExecutionProvider": "cpu"}.get(p, p)


# ---------------------------------------------------------------------------------------------- mapping
class Kernel:
    """One kernel of an optimized graph: its name (as its profile events name it), op type, input / output tensor
    names, and `refs`: names of the model's nodes it is known to run (onnxep's reference plans)."""

    __slots__ = ("name", "op", "inputs", "outputs", "refs")

    def __init__(self, name, op, inputs, outputs, refs=()):
        self.name, self.op = name, op
        self.inputs, self.outputs = tuple(x for x in inputs if x), tuple(outputs)
        self.refs = tuple(refs)


def name_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose unnamed main-graph nodes are named "<op>_<index>" (as onnxep names them), so both
    libraries' events and optimized graphs name the same nodes alike."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    used = {n.name for n in m.graph.node if n.name}
    for i, n in enumerate(m.graph.node):
        if not n.name:
            name = f"{n.op_type}_{i}"
            while name in used:
                name += "_"
            n.name = name
            used.add(name)
    return m


def onnxep_kernels(sess) -> list:
    """The kernels of an onnxep session as its profile names them: a cpu plan's steps (name, op, inputs, outputs), any
    other plan (the reference fallback) as one kernel named as StepTrace names it, whose refs are its nodes."""
    ex = sess._executor
    out = []
    for plan, names, nodes in zip(ex.plans, ex.trace_names(), ex.plan_nodes):
        steps = getattr(plan, "steps", None)
        if steps is not None and ex.backends[plan.backend_name].records_steps:
            out.extend(Kernel(s[5], s[6], s[1], s[2]) for s in steps)
        else:
            for name, op, _, _ in names:
                out.append(Kernel(name, op, plan.inputs, plan.outputs, [n for n, _, _ in nodes]))
    return out


def ort_kernels(path) -> list:
    """The main-graph nodes of onnxruntime's saved optimized model."""
    g = onnx.load(path, load_external_data=False).graph
    return [Kernel(n.name, n.op_type, n.input, n.output) for n in g.node]


def _candidates(name: str, slash=True):
    """`name`, its part before a "/" (`slash`), then each with trailing "_suffix" parts dropped one by one."""
    seen = []
    for base in dict.fromkeys((name, name.split("/")[0]) if slash else (name,)):
        cur = base
        for _ in range(_MAX_STRIP + 1):
            if cur and cur not in seen:
                seen.append(cur)
            if "_" not in cur:
                break
            cur = cur.rsplit("_", 1)[0]
    return seen


def map_kernels(model: onnx.ModelProto, kernels) -> dict:
    """Each kernel's share of the original model (see the module docstring): {"keys": kernel name -> op type it counts
    under, "covers": kernel name -> [model node names], "fused": {op type: {op type it counts under: count}} for the
    covered nodes that are not their kernel's own, "not_run": {op type: count} of model nodes no kernel covers
    (folded to constants, removed)}."""
    g = model.graph
    nodes = list(g.node)
    prod, by_name, cons = {}, {}, collections.defaultdict(list)
    for i, n in enumerate(nodes):
        by_name.setdefault(n.name, i)
        for t in n.output:
            if t:
                prod[t] = i
        for t in n.input:
            if t:
                cons[t].append(i)
    # stop tensors: initializers, graph inputs, and what is computed from constants alone (Constant nodes, the light
    # models' ConstantOfShape weights: a runtime folds them, no kernel of a later node runs them)
    folded = {t.name for t in g.initializer}
    for n in nodes:       # (graph order is topological)
        ins = [x for x in n.input if x]
        if n.op_type == "Constant" or (ins and all(x in folded for x in ins)):
            folded.update(t for t in n.output if t)
    consts = folded | {t.name for t in g.input}
    original = set(prod) | consts

    def ref(name):
        """The model node a kernel's name refers to (index), or None."""
        for c in _candidates(name):
            if c in by_name:
                return by_name[c]
            if c in prod:
                return prod[c]
        return None

    kernels = list(kernels)
    made_by = {}
    for j, k in enumerate(kernels):
        for t in k.outputs:
            if t:
                made_by.setdefault(t, j)

    def alias(t):
        if t in original:
            return t
        j = made_by.get(t)
        if j is None:          # (a constant of the optimized graph: "ctx_28_new_shape" is not ctx_28)
            return None
        for c in _candidates(t, slash=False):
            if c in prod:
                return c
        k = kernels[j]
        if len(k.outputs) == 1:
            for c in _candidates(k.name, slash=False):
                if c in prod:
                    return c
        return None

    aliases = {}
    for k in kernels:
        for t in (*k.inputs, *k.outputs):
            if t and t not in aliases:
                aliases[t] = alias(t)
    # groups: kernels linked by tensors that stand for nothing of the model
    parent = list(range(len(kernels)))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for j, k in enumerate(kernels):
        for t in k.inputs:
            if aliases.get(t) is None and t in made_by:
                a, b = find(j), find(made_by[t])
                if a != b:
                    parent[a] = b
    groups = collections.defaultdict(list)
    for j in range(len(kernels)):
        groups[find(j)].append(j)
    claimed = collections.defaultdict(set)       # model tensor -> groups producing it
    for root, members in groups.items():
        for j in members:
            for t in kernels[j].outputs:
                a = aliases.get(t)
                if a is not None:
                    claimed[a].add(root)
    owner = {}                                   # kernel index -> set of model node indices
    for root, members in groups.items():
        outs = {aliases[t] for j in members for t in kernels[j].outputs if aliases.get(t) is not None}
        ins = {aliases[t] for j in members for t in kernels[j].inputs if aliases.get(t) is not None}
        stop = ins | consts
        cover, stack = set(), [prod[t] for t in outs - ins if t in prod]
        while stack:
            i = stack.pop()
            if i in cover or nodes[i].op_type == "Constant":
                continue
            cover.add(i)
            for x in nodes[i].input:
                if x and x in prod and x not in stop and not (claimed.get(x, set()) - {root}):
                    stack.append(prod[x])
        # keep what lies downstream of the tensors the group reads (or computes from constants only): a name that
        # says less than the kernel does must not pull in a branch computed elsewhere
        keep = set()
        grew = True
        while grew:
            grew = False
            for i in sorted(cover - keep):
                xs = [x for x in nodes[i].input if x]
                made = {t for k in keep for t in nodes[k].output}
                if any(x in ins or x in made for x in xs) or all(x in folded for x in xs):
                    keep.add(i)
                    grew = True
        cover = keep
        assigned = {j: set() for j in members}
        left = set(cover)
        for j in members:
            k = kernels[j]
            hits = {by_name[r] for r in k.refs if r in by_name}
            r = ref(k.name)
            if r is not None:
                hits.add(r)
            hits &= left
            assigned[j] |= hits
            left -= hits
        for j in members:
            if not any(nodes[i].op_type == kernels[j].op for i in assigned[j]):
                same = sorted(i for i in left if nodes[i].op_type == kernels[j].op)
                if same:
                    assigned[j].add(same[0])
                    left.discard(same[0])
        if len(members) == 1:
            assigned[members[0]] |= left
            left = set()
        where = {i: j for j, s in assigned.items() for i in s}
        changed = True
        while left and changed:
            changed = False
            for i in sorted(left):
                near = [where[prod[x]] for x in nodes[i].input if x in prod and prod[x] in where]
                if not near:
                    near = [where[c] for t in nodes[i].output for c in cons.get(t, ()) if c in where]
                if near:
                    assigned[near[0]].add(i)
                    where[i] = near[0]
                    left.discard(i)
                    changed = True
        if left:
            j = next((j for j in members if assigned[j]), members[0])
            assigned[j] |= left
        for j, s in assigned.items():
            owner[j] = owner.get(j, set()) | s
    # a node two groups both claim (a name older than a later fusion: onnxruntime's "r33_nchwc" also computes the Sum
    # and Relu after r33) goes to the kernel that computes its input, else to the first claimant
    claims = collections.defaultdict(list)
    for j in sorted(owner):
        for i in owner[j]:
            claims[i].append(j)
    for i in sorted(i for i, js in claims.items() if len(js) > 1):
        ups = [claims[prod[x]][0] for x in nodes[i].input if x in prod and len(claims.get(prod[x], ())) == 1]
        keep = ups[0] if ups else claims[i][0]
        for j in claims[i]:
            owner[j].discard(i)
        owner.setdefault(keep, set()).add(i)
        claims[i] = [keep]
    # a kernel of a model op type (an NCHWc AveragePool) does not fuse what comes before its own node: such covered
    # nodes (the Sum and Relu onnxruntime's preceding Conv computes, under a name older than that fusion) go to the
    # kernel that computes their input
    where = {i: js[0] for i, js in claims.items()}
    for j in sorted(owner):
        own = {i for i in owner[j] if nodes[i].op_type == kernels[j].op}
        if not own or len(own) == len(owner[j]):
            continue
        before = set()
        for i in sorted(owner[j] - own, reverse=True):     # (reverse graph order: consumers first)
            outs = set(nodes[i].output)
            if any(x in outs for a in own | before for x in nodes[a].input):
                before.add(i)
        for i in sorted(before):
            ups = [where[prod[x]] for x in nodes[i].input if x in prod and where.get(prod[x], j) != j]
            if ups:
                owner[j].discard(i)
                owner[ups[0]].add(i)
                where[i] = ups[0]
    keys, covers = {}, {}
    fused = collections.defaultdict(lambda: collections.defaultdict(int))
    covered = set()
    for j, k in enumerate(kernels):
        s = sorted(owner.get(j, ()))
        covered.update(s)
        covers[k.name] = [nodes[i].name for i in s]
        types = [nodes[i].op_type for i in s]
        if not types:
            key = f"{k.op}*"
        elif len(set(types)) == 1:
            key = types[0]
        elif k.op in types:
            key = k.op
        else:
            key = next((a for a in ANCHORS if a in types), k.op)
        keys[k.name] = key
        own = False
        for t in types:
            if t == key and not own:
                own = True
                continue
            fused[t][key] += 1
    not_run = collections.Counter(n.op_type for i, n in enumerate(nodes) if i not in covered
                                  and n.op_type != "Constant")
    return {"keys": keys, "covers": covers, "fused": {t: dict(v) for t, v in fused.items()},
            "not_run": dict(not_run)}


# ---------------------------------------------------------------------------------------------- running
def make_feeds(sess, dims=None, seed=0) -> dict:
    """Random inputs for `sess`'s declared inputs (onnxep/_bench.py random_feeds), symbolic dims from `dims`
    (name -> value) else 1."""
    from onnxep._bench import random_feeds

    dims = dims or {}

    class _Arg:
        def __init__(self, a):
            self.name, self.type = a.name, a.type
            self.shape = [d if isinstance(d, int) else int(dims.get(d, 1)) if isinstance(d, str) else 1
                          for d in (a.shape or [])]

    class _Shim:
        def get_inputs(self):
            return [_Arg(a) for a in sess.get_inputs()]

    return random_feeds(_Shim(), seed)


def _run_profiled(sess, feeds, warmup, runs, decode=False) -> str:
    """warmup + runs runs of `feeds`, or with `decode` of a greedy loop from them (each run's outputs fed back,
    onnxep/_bench.py decode_next); the trace file."""
    step = None
    if decode:
        from onnxep._bench import decode_next
        step = decode_next(sess)
    for _ in range(warmup + runs):
        outputs = sess.run(None, feeds)
        if step is not None:
            feeds, _ = step(feeds, outputs)
    return sess.end_profiling()


def load_feeds(path) -> dict:
    """Inputs from an .npz: its arrays by name; keys "input:<name>" (bench/zoo's files) give <name>."""
    with np.load(path) as data:
        return {(k.split(":", 1)[1] if k.startswith("input:") else k): data[k] for k in data.files
                if k.startswith("input:") or ":" not in k}


def profile(model, threads=0, runs=10, warmup=3, dims=None, use_ort=True, top=10, trace_dir=None,
            config=None, feeds=None, decode=False, past=128) -> dict:
    """Profile `model` (path, light model name or ModelProto) with onnxep and, if `use_ort` and importable,
    onnxruntime; returns the report (see the module docstring): {"model", "inputs", "threads", "runs", "warmup",
    "onnxep": summary, "onnxruntime": summary or None, "ort_version", "fallback_nodes", "traces"}. `trace_dir` keeps
    the raw traces (and onnxruntime's optimized model) there; else they go to a temporary directory, removed after.
    `config`: onnxep session config entries (e.g. {"onnxep.fallback_op_types": "Softmax"}). `feeds`: the inputs (else
    random ones, make_feeds). `decode`: the runs are a greedy decoding loop from `feeds` (else from decode_start's
    first step with `past` tokens of past), see the module docstring."""
    import onnxep

    label = model if isinstance(model, str) else getattr(getattr(model, "graph", None), "name", "model")
    path = model if isinstance(model, str) and os.path.isfile(model) else None
    if isinstance(model, str):
        if os.path.isfile(model):
            model = onnx.load(model)
        else:
            from onnxep._light import light_model
            model = light_model(model)
    model = name_nodes(model)
    data = model.SerializeToString()
    threads = threads or os.cpu_count() or 1
    tmp = None
    if trace_dir is None:
        tmp = tempfile.TemporaryDirectory(prefix="onnxep_profile_")
        trace_dir = tmp.name
    os.makedirs(trace_dir, exist_ok=True)
    try:
        so = onnxep.SessionOptions()
        so.intra_op_num_threads = threads
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(trace_dir, "onnxep")
        for k, v in (config or {}).items():
            so.add_session_config_entry(k, str(v))
        sess = onnxep.InferenceSession(data, so)
        if feeds is None and decode:
            from onnxep._bench import decode_start
            feeds = decode_start(sess, path, past)
        if feeds is None:
            feeds = make_feeds(sess, dims)
        if decode:
            outs = {o.name for o in sess.get_outputs()}
            if "logits" not in outs or not any(x.name.startswith("past_key_values") for x in sess.get_inputs()):
                raise ValueError(f"--decode: {label} is no decoder with past: it needs a logits output and "
                                 f"past_key_values.* inputs (fed from present.* outputs)")
        fallback = sum(1 for b in sess.node_assignment.values() if b != "cpu")
        fallback_ops = dict(collections.Counter(
            op for n, op, _ in (x for nodes in sess._executor.plan_nodes for x in nodes)
            if sess.node_assignment.get(n, "cpu") != "cpu"))
        mapping = map_kernels(model, onnxep_kernels(sess))
        path = _run_profiled(sess, feeds, warmup, runs, decode)
        del sess
        ours = summarize(parse_trace(path, warmup), mapping["keys"], mapping["fused"])
        ours["not_run"] = mapping["not_run"]
        ours["fallback_nodes"] = fallback
        ours["fallback_ops"] = fallback_ops
        report = {"model": label, "threads": threads, "runs": runs, "warmup": warmup, "decode": bool(decode),
                  "inputs": {k: f"{_dtype_name(v)}{list(np.shape(v))}" for k, v in feeds.items()},
                  "onnxep_version": onnxep.__version__, "onnxep": ours, "onnxruntime": None, "ort_version": None,
                  "traces": {"onnxep": path}}
        ort = None
        if use_ort:
            try:
                import onnxruntime as ort
            except ImportError:
                ort = None
        if ort is not None:
            oso = ort.SessionOptions()
            oso.intra_op_num_threads = threads
            oso.log_severity_level = 3
            oso.enable_profiling = True
            oso.profile_file_prefix = os.path.join(trace_dir, "ort")
            opt_path = os.path.join(trace_dir, "ort_optimized.onnx")
            oso.optimized_model_filepath = opt_path
            theirs = ort.InferenceSession(data, oso, providers=["CPUExecutionProvider"])
            opath = _run_profiled(theirs, feeds, warmup, runs, decode)
            del theirs
            keys = fused = only = None
            not_run = {}
            if os.path.isfile(opath) and os.path.isfile(opt_path):
                try:
                    kernels = ort_kernels(opt_path)
                except Exception:      # (an optimized model onnx cannot read: count events as they are)
                    kernels = None
                if kernels is not None:
                    m = map_kernels(model, kernels)
                    keys, fused, not_run = m["keys"], m["fused"], m["not_run"]
                    only = {k.name for k in kernels}
            theirs_summary = summarize(parse_trace(opath, warmup), keys, fused, only)
            theirs_summary["not_run"] = not_run
            report["onnxruntime"] = theirs_summary
            report["ort_version"] = ort.__version__
            report["traces"]["onnxruntime"] = opath
            report["traces"]["onnxruntime_optimized"] = opt_path if os.path.isfile(opt_path) else None
        report["onnxep"]["nodes"] = report["onnxep"]["nodes"][:top] if top is not None else report["onnxep"]["nodes"]
        if report["onnxruntime"] is not None:
            report["onnxruntime"]["nodes"] = report["onnxruntime"]["nodes"][:top]
        if tmp is not None:
            report["traces"] = None
        return report
    finally:
        if tmp is not None:
            tmp.cleanup()


def _dtype_name(v) -> str:
    return getattr(getattr(v, "dtype", None), "name", type(v).__name__)


# ---------------------------------------------------------------------------------------------- printing
def _shapes(ts) -> str:
    return ",".join(f"{t}{list(s)}".replace(" ", "") for d in ts for t, s in d.items())


def print_report(r, out=None) -> None:
    out = out or sys.stdout
    ep, ort = r["onnxep"], r["onnxruntime"]
    p = lambda *a: print(*a, file=out)       # noqa: E731
    p(f"onnxep {r['onnxep_version']} profile of {r['model']}: {r['threads']} thread(s), {r['runs']} runs after "
      f"{r['warmup']} warm-up; onnxruntime {r['ort_version'] or '(not run)'}")
    if r.get("decode"):
        p("a greedy decoding loop: each run one step, its present outputs fed back as the next step's past")
    shown = [f"{k} {v}" for k, v in r["inputs"].items()]
    if len(shown) > 8:          # (a decoder's key / value inputs: the JSON keeps them all)
        shown = shown[:6] + [f"... {len(shown) - 6} more"]
    p(("first step's inputs: " if r.get("decode") else "inputs: ") + ", ".join(shown))
    p("")
    hdr = f"{'':<30}{'onnxep':>14}{'onnxruntime':>14}"
    p(hdr)

    def ms(v):
        return f"{v / 1e3:>11.3f} ms"

    def both(label, key):
        p(f"{label:<30}{ms(ep[key])}{ms(ort[key]) if ort else '':>14}")

    both("(a) run, median", "run_us_median")
    both("    kernels, median", "kernel_us_median")
    both("(d) outside kernels, median", "outside_kernels_us_median")
    p(f"{'    kernels per run':<30}{ep['kernels']:>14}{(ort['kernels'] if ort else ''):>14}")
    p(f"{'(e) nodes on the reference':<30}{ep['fallback_nodes']:>14}"
      + (f"   ({', '.join(f'{k} {v}' for k, v in sorted(ep['fallback_ops'].items()))})" if ep["fallback_ops"] else ""))
    if ort and ort.get("skipped_kernels"):
        p(f"    onnxruntime: {ort['skipped_kernels']} kernel(s) inside subgraphs not counted "
          f"({ort['skipped_us_per_run']:.1f} us per run, within their parent's time)")
    p("")
    p("(b) per op type of the model: kernels, us per run (mean), share of the mean run   "
      "(* = a kernel covering no model node)")
    rows = {x["op"]: [x, None] for x in ep["ops"]}
    for x in (ort["ops"] if ort else []):
        rows.setdefault(x["op"], [None, None])[1] = x
    order = sorted(rows, key=lambda k: -max((rows[k][0] or {}).get("us_per_run", 0.0),
                                            (rows[k][1] or {}).get("us_per_run", 0.0)))
    hdr = f"{'op type':<28}{'onnxep':>8}{'us/run':>12}{'share':>8}   {'ort':>6}{'us/run':>12}{'share':>8}"
    p(hdr)
    p("-" * len(hdr))

    def cells(x, w):
        if x is None:
            return f"{'':>{w}}{'':>12}{'':>8}"
        return f"{x['kernels']:>{w}}{x['us_per_run']:>12.1f}{x['share'] * 100:>7.1f}%"

    for k in order:
        a, b = rows[k]
        p(f"{k[:27]:<28}{cells(a, 8)}   {cells(b, 6) if ort else ''}")
    for lib, s in (("onnxep", ep), ("onnxruntime", ort)):
        if s and s["fused"]:
            p(f"  fused into another op's kernel ({lib}): " + ", ".join(
                f"{t} x{c} -> {k}" for t, into in sorted(s["fused"].items()) for k, c in sorted(into.items())))
    for lib, s in (("onnxep", ep), ("onnxruntime", ort)):
        if s and s.get("not_run"):
            p(f"  no kernel (folded or removed) ({lib}): " + ", ".join(
                f"{t} x{c}" for t, c in sorted(s["not_run"].items())))
    p("")
    p(f"(c) onnxep's top {len(ep['nodes'])} kernels")
    hdr = f"{'us/run':>10}{'share':>8}  {'provider':<10}{'op (counted as)':<30}{'node':<32}inputs -> outputs"
    p(hdr)
    p("-" * len(hdr))
    for x in ep["nodes"]:
        op = x["op"] if x["op"] == x["key"] else f"{x['op']} ({x['key']})"
        p(f"{x['us_per_run']:>10.1f}{x['share'] * 100:>7.1f}%  {x['provider']:<10}{op[:29]:<30}{x['node'][:31]:<32}"
          f"{_shapes(x['inputs'])} -> {_shapes(x['outputs'])}")


def main(args) -> int:
    def pairs(items, what, conv):
        out = {}
        for d in items or ():
            name, sep, value = d.partition("=")
            if not sep:
                raise SystemExit(f"{what} wants NAME=VALUE, got {d!r}")
            out[name] = conv(value)
        return out

    r = profile(args.model, threads=args.threads, runs=args.runs, warmup=args.warmup,
                dims=pairs(args.dim, "--dim", int), use_ort=not args.no_ort, top=args.top, trace_dir=args.trace_dir,
                config=pairs(args.config, "--config", str), feeds=load_feeds(args.inputs) if args.inputs else None,
                decode=args.decode, past=args.past)
    print_report(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(r, f, indent=1)
    return 0
