"""Run every model of the zoo cache (bench/zoo/export.py) with onnxep and compare with the stored onnxruntime outputs.

Needs onnxep, onnx and numpy only (no torch): run it in the project's venv. Per model, a session is first created with
the reference fallback OFF (session config ``session.disable_cpu_ep_fallback=1``): when that works the model runs on
onnxep's own kernels alone. When it fails with NotImplemented, a second session with the fallback on shows which op
types went to the reference backend (``session.plans``: backend_name / op_types). The outputs of whichever session
could be made are compared with onnxruntime's, stored with the model: max |onnxep - ort| / max |ort| over the outputs,
against the tolerance in the index.

    python bench/zoo/check.py                       # the default cache, ~/.cache/onnxep/zoo
    python bench/zoo/check.py --dir /tmp/zoo --only bert gpt2_past
    python bench/zoo/check.py --repeat 20           # also median run time of onnxep and onnxruntime (alternating
                                                    # rounds of 5 after 3 warm-up runs each), and the ratio
    python bench/zoo/check.py --json results.json

Prints one markdown table (model, exporter, nodes, fallback-off ok?, ops missing natively, rel err, verdict) and the
union of the op types that are missing natively, with the number of models and nodes that need each. Exit status 1
when a model's outputs are off by more than its tolerance (a wrong answer, not a missing op).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

DEFAULT_DIR = Path(os.environ.get("ONNXEP_ZOO", Path.home() / ".cache" / "onnxep" / "zoo"))
DISABLE_FALLBACK = "session.disable_cpu_ep_fallback"


def rel_err(got, want) -> float:
    """max |got - want| / max |want| (max |got - want| when want is all zeros); inf on a shape mismatch."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return float("inf")
    if want.size == 0:
        return 0.0
    if want.dtype.kind not in "fc":
        return 0.0 if np.array_equal(got, want) else float("inf")
    g, w = got.astype(np.float64), want.astype(np.float64)
    if not (np.isfinite(g) == np.isfinite(w)).all():
        return float("inf")
    fin = np.isfinite(w)
    diff = float(np.max(np.abs(g[fin] - w[fin]), initial=0.0))
    scale = float(np.max(np.abs(w[fin]), initial=0.0))
    return diff / scale if scale > 0 else diff


def load_case(folder: Path, entry: dict):
    """(model path, {input: array}, {output: array}) of one index entry."""
    data = np.load(folder / entry["data"])
    feeds = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}
    want = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("output:")}
    return folder / entry["file"], feeds, want


def reference_ops(sess) -> Counter:
    """Op type -> number of nodes the session placed on the reference backend."""
    ops = Counter()
    for plan in sess.plans:
        if plan.backend_name == "reference":
            ops.update(plan.op_types)
    n_ref = sum(1 for b in sess.node_assignment.values() if b == "reference")
    if sum(ops.values()) != n_ref:
        ops["?"] += n_ref - sum(ops.values())
    return ops


def _alternating_ms(fns, repeat, block=5, warmup=3, pause=0.05):
    """Median ms per run of each function, timed in alternating rounds of `block` runs (one function's round, a pause
    for the other library's spinning threads to settle, the next one's round, ...) after `warmup` runs of each, so a
    slow or fast phase of the machine falls on all of them alike."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    ts = [[] for _ in fns]
    while len(ts[0]) < repeat:
        for fn, t in zip(fns, ts):
            time.sleep(pause)
            for _ in range(min(block, repeat - len(t))):
                t0 = time.perf_counter()
                fn()
                t.append(time.perf_counter() - t0)
    return [1e3 * float(np.median(t)) for t in ts]


def check_model(folder: Path, entry: dict, repeat: int = 0, threads: int = 0) -> dict:
    import onnxep
    from onnxep.errors import NotImplemented as OnnxepNotImplemented
    path, feeds, want = load_case(folder, entry)
    res = dict(name=entry["name"], arch=entry["arch"], exporter=entry["exporter"], nodes=entry.get("nodes"),
               tolerance=entry.get("tolerance", 1e-4), native=False, missing={}, rel_err=None, error="")

    def options(fallback):
        so = onnxep.SessionOptions()
        if threads:
            so.intra_op_num_threads = threads
        if not fallback:
            so.add_session_config_entry(DISABLE_FALLBACK, "1")
        return so

    sess = None
    try:
        sess = onnxep.InferenceSession(str(path), options(False))
        res["native"] = True
    except OnnxepNotImplemented as e:
        res["native_error"] = str(e)[:300]
    except Exception as e:  # noqa: BLE001 -- recorded in the table
        res["error"] = f"create (fallback off): {type(e).__name__}: {str(e)[:300]}"
        return res
    if sess is None:
        try:
            sess = onnxep.InferenceSession(str(path), options(True))
        except Exception as e:  # noqa: BLE001
            res["error"] = f"create (fallback on): {type(e).__name__}: {str(e)[:300]}"
            return res
        res["missing"] = dict(reference_ops(sess))
    res["reference_nodes"] = sum(1 for b in sess.node_assignment.values() if b == "reference")
    names = [o.name for o in sess.get_outputs()]
    try:
        got = sess.run(None, feeds)
    except Exception as e:  # noqa: BLE001
        res["error"] = f"run: {type(e).__name__}: {str(e)[:300]}"
        return res
    errs = [rel_err(g, want[n]) if n in want else float("inf") for n, g in zip(names, got)]
    res["rel_err"] = max(errs) if errs else 0.0
    res["worst_output"] = names[int(np.argmax(errs))] if errs else None
    if repeat:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.log_severity_level = 3
        if threads:
            so.intra_op_num_threads = threads
        ref = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        res["ort_ms"], res["onnxep_ms"] = _alternating_ms((lambda: ref.run(None, feeds),
                                                           lambda: sess.run(None, feeds)), repeat)
    return res


def verdict(r) -> str:
    if r["error"]:
        return "ERROR"
    if r["rel_err"] is None:
        return "?"
    return "ok" if r["rel_err"] <= r["tolerance"] else "WRONG"


def _missing_text(missing: dict, limit=6) -> str:
    items = sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{k}" + (f"x{v}" if v > 1 else "") for k, v in items[:limit])
    return text + (f", +{len(items) - limit} more" if len(items) > limit else "")


def table(results, skipped, timed) -> str:
    head = ["model", "exporter", "nodes", "fallback off", "ops missing natively (nodes)", "rel err", "verdict"]
    if timed:
        head += ["onnxep ms", "ort ms", "onnxep/ort"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for r in results:
        off = ("yes" if not r["error"] else "created, run fails") if r["native"] else "no"
        miss = _missing_text(r["missing"]) if r["missing"] else ("" if r["native"] else "-")
        if r["error"]:
            miss = (miss + "; " if miss and miss != "-" else "") + r["error"][:90].replace("|", "/")
        err = "-" if r["rel_err"] is None else f"{r['rel_err']:.1e}"
        row = [r["arch"], r["exporter"], str(r["nodes"]), off, miss, err, verdict(r)]
        if timed:
            if "onnxep_ms" in r:
                row += [f"{r['onnxep_ms']:.2f}", f"{r['ort_ms']:.2f}", f"{r['onnxep_ms'] / r['ort_ms']:.1f}"]
            else:
                row += ["-", "-", "-"]
        lines.append("| " + " | ".join(row) + " |")
    for e in skipped:
        row = [e["arch"], e["exporter"], "-", "-", f"not exported ({e.get('stage', '?')}): "
               + e.get("error", "")[:90].replace("|", "/"), "-", "-"]
        if timed:
            row += ["-", "-", "-"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def union(results) -> str:
    models, nodes = Counter(), Counter()
    for r in results:
        for op, n in r["missing"].items():
            models[op] += 1
            nodes[op] += n
    if not models:
        return "no op type is missing natively"
    lines = ["| op type | models | nodes |", "|---|---|---|"]
    for op in sorted(models, key=lambda o: (-models[o], -nodes[o], o)):
        lines.append(f"| {op} | {models[op]} | {nodes[op]} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"the zoo cache (default {DEFAULT_DIR})")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these architectures (or arch.exporter) only")
    ap.add_argument("--exporter", choices=("dynamo", "torchscript"), help="one exporter only")
    ap.add_argument("--repeat", type=int, default=0, help="time N runs of onnxep and onnxruntime (median)")
    ap.add_argument("--threads", type=int, default=0, help="intra_op_num_threads for both (0: library default)")
    ap.add_argument("--json", type=Path, help="write the per-model results here")
    args = ap.parse_args(argv)
    folder = args.dir.expanduser()
    index = folder / "index.json"
    if not index.exists():
        print(f"no zoo in {folder}: run bench/zoo/export.py first (zoo extra, torch venv)", file=sys.stderr)
        return 2
    meta = json.loads(index.read_text())
    entries = [e for e in meta["models"]
               if (not args.only or e["arch"] in args.only or e["name"] in args.only)
               and (not args.exporter or e["exporter"] == args.exporter)]
    import onnxep
    results, skipped = [], []
    t0 = time.perf_counter()
    for e in entries:
        if e["status"] != "ok":
            skipped.append(e)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                r = check_model(folder, e, args.repeat, args.threads)
            except Exception as exc:  # noqa: BLE001 -- one model's failure is a row, not the end of the table
                r = dict(name=e["name"], arch=e["arch"], exporter=e["exporter"], nodes=e.get("nodes"),
                         tolerance=e.get("tolerance", 1e-4), native=False, missing={}, rel_err=None,
                         error=f"{type(exc).__name__}: {str(exc)[:300]}")
        results.append(r)
        print(f"  {r['name']:30} {verdict(r):5} {'native' if r['native'] else 'fallback'}", file=sys.stderr,
              flush=True)
    native = sum(r["native"] for r in results)
    good = sum(verdict(r) == "ok" for r in results)
    print(f"onnxep zoo check: {len(results)} models from {folder} (exported with torch {meta.get('torch')}, "
          f"transformers {meta.get('transformers')}; oracle onnxruntime {meta.get('onnxruntime')}, stored); "
          f"onnxep {getattr(onnxep, '__version__', '?')}\n")
    print(table(results, skipped, bool(args.repeat)))
    print(f"\n{native}/{len(results)} run with the fallback off; {good}/{len(results)} within tolerance; "
          f"{len(skipped)} not exported; {time.perf_counter() - t0:.0f}s\n")
    ratios = [r["onnxep_ms"] / r["ort_ms"] for r in results if r.get("onnxep_ms") and r.get("ort_ms")]
    if ratios:
        geo = float(np.exp(np.mean(np.log(ratios))))
        print(f"onnxep / onnxruntime time ({args.threads or 'default'} thread(s)): geometric mean {geo:.2f} over "
              f"{len(ratios)} models, {min(ratios):.2f} to {max(ratios):.2f}, {sum(x <= 1.0 for x in ratios)} at or "
              f"under 1.0\n")
    print("Op types missing natively (models that need each, nodes in all):\n")
    print(union(results))
    if args.json:
        args.json.write_text(json.dumps(dict(results=results, skipped=skipped), indent=1, default=str))
    return 1 if any(verdict(r) in ("WRONG",) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
