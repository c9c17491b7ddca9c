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
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from onnxep._zoo import DEFAULT_DIR, main_check, read_index, select, verdict

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
    try:
        meta = read_index(folder)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    entries = select(meta, args.only, args.exporter)
    import onnxep
    t0 = time.perf_counter()
    results = main_check(folder, entries, args.repeat, args.threads)
    skipped = [e for e in entries if e["status"] != "ok"]
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
