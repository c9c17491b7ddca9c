"""Side-by-side latency of onnxep and onnxruntime on ONNX models (the `python -m onnxep bench` command).

Default models: the nine light model-zoo models shipped inside the onnx wheel (onnx/backend/test/data/light), with
seeded random weights in place of the files' ConstantOfShape(0.02) ones (onnxep/_light.py; `weights="shipped"` keeps
the files' own). The check compares the tensor feeding the final Softmax, added as an extra graph output, against
onnxruntime: max |diff| / max |ort| <= 1e-5.

`--suite models`: the synthetic models of onnxep/_models.py (a BERT-like encoder, an MLP), built in memory; the check
compares the model output against onnxruntime. Both tables time the two libraries in alternating rounds (_alternate)."""
from __future__ import annotations

import gc
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import helper

from onnxep._light import light_model, light_names
from onnxep._zoo import rel_err  # noqa: F401 -- also this module's public name

#: max |onnxep - onnxruntime| / max |onnxruntime| a light model's logits may show
REL_ERR = 1e-5


#: extra session config entries for onnxep's sessions in every bench here and in _zoo (python -m onnxep bench
#: --precision bf16 sets onnxep.compute_precision; onnxruntime's sessions stay fp32)
SESSION_CONFIG: dict = {}
#: with bf16 compute the check is issue 29's: cosine against onnxruntime's fp32 output at least this
BF16_MIN_COSINE = 0.999


def check_text(ours, theirs, tol):
    """The bench's check column: ok / MISMATCH by max |diff| / max |ort| <= tol (fp32), or by cosine >= 0.999 when
    SESSION_CONFIG asks for bf16 compute."""
    err = rel_err(ours, theirs)
    if SESSION_CONFIG.get("onnxep.compute_precision", "fp32") == "bf16":
        a, b = np.asarray(ours, np.float64).ravel(), np.asarray(theirs, np.float64).ravel()
        cos = float(a @ b / max(np.linalg.norm(a) * np.linalg.norm(b), 1e-300))
        return f"{'ok' if cos >= BF16_MIN_COSINE else 'MISMATCH'} (cos vs ort fp32 {cos:.6f}, max diff / max |ort| " \
               f"= {err:.1e})"
    ok = err <= tol and np.asarray(ours).dtype == np.asarray(theirs).dtype
    return f"{'ok' if ok else 'MISMATCH'} (max diff / max |ort| = {err:.1e})"


def with_presoftmax_output(model: onnx.ModelProto):
    """A copy of `model` whose last Softmax input is also a graph output; returns (model, that name or None)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    soft = [n for n in m.graph.node if n.op_type == "Softmax"]
    if not soft:
        return m, None
    name = soft[-1].input[0]
    if name not in {o.name for o in m.graph.output}:
        m.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return m, name


def random_feeds(sess, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in (i.shape or [])]
        t = i.type
        if "float" in t or "double" in t:
            dt = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16}.get(
                t, np.float32)
            feeds[i.name] = rng.standard_normal(shape).astype(dt)
        elif "int" in t:
            feeds[i.name] = rng.integers(0, 4, shape).astype(np.int64 if "64" in t else np.int32)
        elif "bool" in t:
            feeds[i.name] = rng.integers(0, 2, shape).astype(bool)
        else:
            raise ValueError(f"cannot make a random value for input {i.name!r} of type {t}")
    return feeds


def decode_start(sess, path, past, seed=0) -> dict:
    """A decoder's first step of a greedy loop (bench/bench_decode.py, `onnxep profile --decode`): the NPZ stored beside
    `path` (bench/zoo's "input:<name>" arrays) gives each input's shape and value where it has one, else the declared
    shape with its symbolic dims at 1; every input that a `present.*` output feeds back (`past_key_values.*`) gets
    `past` seeded random rows along dim 2, attention_mask `past` + 1 ones a row, position_ids `past` (the batch: the
    NPZ's input_ids rows, else 1)."""
    from onnxep._profile import load_feeds
    shapes = {}
    npz = path[:-5] + ".npz" if path and path.endswith(".onnx") else None
    stored = load_feeds(npz) if npz and os.path.exists(npz) else {}
    for i in sess.get_inputs():
        value = stored.get(i.name)
        if value is not None:
            shapes[i.name] = (list(value.shape), value.dtype, value)
        else:
            dims = [d if isinstance(d, int) else 1 for d in i.shape]
            shapes[i.name] = (dims, np.float32 if "float" in i.type else np.int64, None)
    rng = np.random.default_rng(seed)
    feeds = {}
    grown = {o.name.replace("present", "past_key_values") for o in sess.get_outputs()}
    ids = shapes.get("input_ids") or shapes.get("decoder_input_ids")
    batch = ids[0][0] if ids is not None and ids[0] else 1
    for name, (dims, dt, value) in shapes.items():
        if name in grown:
            dims = list(dims)
            dims[2] = past
            feeds[name] = rng.standard_normal(dims).astype(np.float32)
        elif name == "attention_mask":
            feeds[name] = np.ones((batch, past + 1), np.int64)
        elif name == "position_ids":
            feeds[name] = np.full((batch, 1), past, np.int64)
        elif value is not None:
            feeds[name] = value
        else:
            feeds[name] = np.ones(dims, dt)
    return feeds


def decode_next(sess):
    """next(feeds, outputs) -> (the next step's feeds, the token picked: an int, a tuple of one a row for a batch):
    per batch row the argmax of its last logits row as input_ids (a seq2seq decoder's decoder_input_ids), the
    attention mask one longer (position_ids its last index), each `present.*` output fed back as the
    `past_key_values.*` input of the same name; any other input (a seq2seq decoder's encoder keys / values) stays."""
    outs = [o.name for o in sess.get_outputs()]
    ins = {i.name for i in sess.get_inputs()}
    ids = "decoder_input_ids" if "decoder_input_ids" in ins else "input_ids"
    fed = [(name, name.replace("past_key_values", "present")) for name in ins if name.startswith("past_key_values")]

    def step(feeds, outputs):
        res = dict(zip(outs, outputs))
        logits = res["logits"]
        batch = feeds[ids].shape[0] if ids in feeds and feeds[ids].ndim else 1
        toks = np.argmax(logits.reshape(batch, -1, logits.shape[-1])[:, -1], axis=-1).astype(np.int64)
        nxt = dict(feeds)
        nxt[ids] = toks.reshape(batch, 1)
        if "attention_mask" in ins:
            n = feeds["attention_mask"].shape[1] + 1
            nxt["attention_mask"] = np.ones((batch, n), np.int64)
            if "position_ids" in ins:
                nxt["position_ids"] = np.full((batch, 1), n - 1, np.int64)
        for name, present in fed:
            if present in res:
                nxt[name] = res[present]
        return nxt, int(toks[0]) if batch == 1 else tuple(int(t) for t in toks)
    return step


def decode_loop(sess, feeds, steps):
    """A greedy loop of `steps` steps from `feeds` (decode_start): (each step's seconds, the tokens picked)."""
    step = decode_next(sess)
    times, tokens = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        outputs = sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
        feeds, tok = step(feeds, outputs)
        tokens.append(tok)
    return times, tokens


def _settle(pause, slice_s=0.01, idle=0.05, limit=1.0) -> float:
    """Collect garbage, sleep `pause`, then go on sleeping in `slice_s` slices until two slices in a row show this
    process idle (its threads together used at most `idle` of one core; at most `limit` seconds). Returns the seconds
    waited. Why: a library's idle workers spin after a parallel call -- onnxruntime's intra-op threads burned CPU for
    ~100 ms after a 2-thread round on this 2-vCPU VM (measured with time.process_time() slices), onnxep's for up to
    ONNXEP_SPIN_US (2 ms) -- and a spinning worker of the library timed last takes a core from the library timed
    next: onnxep's 2-thread SqueezeNet read 1.42x onnxruntime's behind a 100 ms pause, 0.83-0.91x behind 150 ms."""
    t0 = time.perf_counter()
    gc.collect()
    time.sleep(pause)
    quiet = 0
    while quiet < 2 and time.perf_counter() - t0 < limit:
        c0, w0 = time.process_time(), time.perf_counter()
        time.sleep(slice_s)
        quiet = quiet + 1 if time.process_time() - c0 <= idle * (time.perf_counter() - w0) else 0
    return time.perf_counter() - t0


def _alternate(fns, warmup, repeat, round_size, pause) -> list:
    """Median seconds per call of each function (one run of one library's session each), all warmed up, then timed
    in alternating rounds of `round_size` calls (one function's round, settle, the next one's, settle, ...) until
    each has `repeat` timed calls, so the machine's slow and fast phases (minutes long on a shared VM) hit every
    library alike. Before each round _settle collects garbage (no collection of the other library's garbage inside a
    timed call), waits `pause` and then until no thread of the process uses the CPU any more: the other library's
    workers, spinning after its round, would otherwise take a core from this one (_settle says what was measured)."""
    times = [[] for _ in fns]
    for fn in fns:
        for _ in range(warmup):
            fn()
        _settle(pause)
    while len(times[-1]) < repeat:
        for ts, fn in zip(times, fns):
            for _ in range(min(round_size, repeat - len(ts))):
                t0 = time.perf_counter()
                fn()
                ts.append(time.perf_counter() - t0)
            _settle(pause)
    return [statistics.median(ts) for ts in times]


def bench(models=None, threads=0, warmup=3, repeat=10, use_ort=True, out=sys.stdout, round_size=5,
          pause=0.1, weights="random") -> list:
    """The light-model table: per model both sessions are created and their pre-softmax outputs compared, then both
    are timed in alternating rounds (_alternate); the table shows the median run of each library. `models`: ONNX
    files (run as they are) or light model names ("resnet50"); default the nine light models. Light models get
    `weights` "random" (seeded, onnxep/_light.py) or "shipped"."""
    import onnxep

    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    if not use_ort:
        ort = None
    models = models or light_names()
    threads = threads or os.cpu_count() or 1
    rows = []
    print(f"onnxep {onnxep.__version__} (ISA {_isa()}) vs onnxruntime "
          f"{ort.__version__ if ort else '(not installed)'}; {threads} thread(s), median of {repeat} runs after "
          f"{warmup} warm-up, alternating rounds of {round_size}"
          f"; light models with {weights} weights", file=out)
    hdr = f"{'model':<22}{'onnxep ms':>11}{'ort ms':>10}{'ratio':>8}  {'fallback':>8}  check"
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    for path in models:
        is_file = os.path.isfile(path)
        name = os.path.splitext(os.path.basename(path))[0] if is_file else f"light_{path}"
        model, pre = with_presoftmax_output(onnx.load(path) if is_file else light_model(path, weights))
        data = model.SerializeToString()
        so = onnxep.SessionOptions()
        so.intra_op_num_threads = threads
        for k, v in SESSION_CONFIG.items():
            so.add_session_config_entry(k, v)
        t0 = time.perf_counter()
        ours = onnxep.InferenceSession(data, so)
        init_s = time.perf_counter() - t0
        feeds = random_feeds(ours)
        fallback = sum(1 for b in ours.node_assignment.values() if b != "cpu")
        names = [pre] if pre else None
        res_ours = ours.run(names, feeds)
        sessions = [ours]
        check = "-"
        if ort is not None:
            oso = ort.SessionOptions()
            oso.intra_op_num_threads = threads
            oso.log_severity_level = 3
            theirs = ort.InferenceSession(data, oso, providers=["CPUExecutionProvider"])
            res_ort = theirs.run(names, feeds)
            sessions.append(theirs)
            check = check_text(res_ours[0], res_ort[0], REL_ERR)
        medians = _alternate([lambda s=s: s.run(None, feeds) for s in sessions], warmup, repeat, round_size, pause)
        del sessions, ours
        t_ours, t_ort = medians[0], (medians[1] if ort is not None else None)
        ratio = t_ours / t_ort if t_ort else None
        rows.append({"model": name, "onnxep_ms": t_ours * 1e3, "ort_ms": t_ort * 1e3 if t_ort else None,
                     "ratio": ratio, "fallback_nodes": fallback, "check": check, "init_s": init_s})
        print(f"{name:<22}{t_ours * 1e3:>11.2f}{(t_ort * 1e3 if t_ort else float('nan')):>10.2f}"
              f"{(ratio if ratio else float('nan')):>8.2f}  {fallback:>8}  {check}", file=out, flush=True)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    if ratios:
        gm = float(np.exp(np.mean(np.log(ratios))))
        print(f"{'geometric mean ratio':<43}{gm:>8.2f}   (onnxep time / onnxruntime time; < 1 is faster)",
              file=out)
    return rows


def bench_models(threads=0, warmup=3, repeat=20, round_size=5, pause=0.1, out=sys.stdout, names=None) -> list:
    """The `--suite models` table: for each model of onnxep._models.suite() both sessions are created, their outputs
    compared (max |diff| / max |ort| <= 1e-4), both warmed up, then timed in alternating rounds of `round_size` runs
    (onnxep, pause, onnxruntime, pause, ...) until each has `repeat` timed runs, so machine noise hits both alike;
    the table shows the median run of each library."""
    import onnxep
    import onnxruntime as ort

    from onnxep import _models

    threads = threads or os.cpu_count() or 1
    print(f"onnxep {onnxep.__version__} (ISA {_isa()}) vs onnxruntime {ort.__version__}; {threads} thread(s), "
          f"median of {repeat} runs after {warmup} warm-up, alternating rounds of {round_size}", file=out)
    hdr = f"{'model':<22}{'onnxep ms':>11}{'ort ms':>10}{'ratio':>8}  {'fallback':>8}  check"
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    rows = []
    for name, model, feeds in _models.suite():
        if names and name not in names:
            continue
        data = model.SerializeToString()
        so = onnxep.SessionOptions()
        so.intra_op_num_threads = threads
        for k, v in SESSION_CONFIG.items():
            so.add_session_config_entry(k, v)
        ours = onnxep.InferenceSession(data, so)
        fallback = sum(1 for b in ours.node_assignment.values() if b != "cpu")
        oso = ort.SessionOptions()
        oso.intra_op_num_threads = threads
        oso.log_severity_level = 3
        theirs = ort.InferenceSession(data, oso, providers=["CPUExecutionProvider"])
        check = check_text(ours.run(None, feeds)[0], theirs.run(None, feeds)[0], 1e-4)
        t_ours, t_ort = _alternate([lambda s=s: s.run(None, feeds) for s in (ours, theirs)], warmup, repeat,
                                   round_size, pause)
        del ours, theirs
        rows.append({"model": name, "onnxep_ms": t_ours * 1e3, "ort_ms": t_ort * 1e3, "ratio": t_ours / t_ort,
                     "fallback_nodes": fallback, "check": check})
        print(f"{name:<22}{t_ours * 1e3:>11.2f}{t_ort * 1e3:>10.2f}{t_ours / t_ort:>8.2f}  {fallback:>8}  {check}",
              file=out, flush=True)
    return rows


def _isa():
    from onnxep import _kernels
    return _kernels.ISA
