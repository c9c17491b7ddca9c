"""Encoders fed inputs of varying length beside onnxruntime: what a sentence-embedding service runs, one query at a
time, each of its own length and with its own token ids.

    python bench/bench_lengths.py                                 # the --full zoo's encoders, 2 threads
    python bench/bench_lengths.py --only minilm_l6 --lengths 8-128 --calls 200 --threads 1

Each round makes `--calls` calls per library (onnxruntime's CPU provider and onnxep, both with intra_op_num_threads =
--threads, the order alternating between rounds, a settle before each as in bench_threads.py) with the same inputs:
random token ids (a new draw each call), an attention mask of ones and token types of zeros, of lengths drawn from
--lengths; a round's figure is the mean call time after `--warmup` calls, the table the median over rounds and
onnxep / onnxruntime. Three length patterns, one table row each:

  fixed     every call at the middle length (new ids each call);
  cycle     --cycle lengths in turn (a service whose queries repeat a few lengths);
  random    uniform over --lengths (most calls a length not seen for a while).

onnxep plans and compiles a run per input signature (graph/planner.py); a signature is the feeds' shapes and dtypes
(token ids are data), so the three patterns show what its first runs of a shape cost against the compiled ones.
Models: `--dir` (default ~/.cache/onnxep/zoo-full, bench/zoo/export.py --full) files whose inputs are input_ids
[, attention_mask, token_type_ids] of shape (1, sequence).
"""
from __future__ import annotations

import argparse
import glob
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's onnxep first

import numpy as np  # noqa: E402

from bench.bench_threads import alternating as _alternating  # noqa: E402
from bench.bench_threads import geomean_line as _geomean_line  # noqa: E402
from bench.bench_threads import make as _session  # noqa: E402  (a library's session, intra-op threads set)


def _feeds(names, length, rng):
    out = {"input_ids": rng.integers(1000, 2000, (1, length)).astype(np.int64)}
    if "attention_mask" in names:
        out["attention_mask"] = np.ones((1, length), np.int64)
    if "token_type_ids" in names:
        out["token_type_ids"] = np.zeros((1, length), np.int64)
    return out


def _lengths(pattern, lo, hi, cycle, calls, seed):
    rng = np.random.default_rng(seed)
    if pattern == "fixed":
        return [(lo + hi) // 2] * calls
    if pattern == "cycle":
        ring = sorted(rng.choice(np.arange(lo, hi + 1), size=min(cycle, hi - lo + 1), replace=False).tolist())
        return [ring[(i * 7) % len(ring)] for i in range(calls)]
    return rng.integers(lo, hi + 1, calls).tolist()


def _encoder(path) -> bool:
    import onnx
    m = onnx.load(path, load_external_data=False)
    names = {i.name for i in m.graph.input} - {t.name for t in m.graph.initializer}
    return "input_ids" in names and names <= {"input_ids", "attention_mask", "token_type_ids"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/onnxep/zoo-full"))
    ap.add_argument("--only", nargs="*", help="architectures (minilm_l6, bert_base)")
    ap.add_argument("--model", nargs="*", help="ONNX encoder files instead of --dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lengths", default="8-128", help="lo-hi, token counts")
    ap.add_argument("--cycle", type=int, default=17, help="distinct lengths of the cycle pattern")
    ap.add_argument("--calls", type=int, default=120)
    ap.add_argument("--warmup", type=int, default=40, help="calls of each round left out of its mean")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.15)
    args = ap.parse_args(argv)
    lo, hi = (int(x) for x in args.lengths.split("-"))
    paths = args.model or sorted(p for p in glob.glob(os.path.join(args.dir, "*.onnx"))
                                 if (not args.only or os.path.basename(p).split(".")[0] in args.only)
                                 and _encoder(p))
    if not paths:
        print(f"no encoder fed input_ids in {args.dir}: make them with bench/zoo/export.py --full", file=sys.stderr)
        return 1
    print(f"{args.calls} calls of lengths {lo}-{hi}, {args.threads} thread(s); mean call time after {args.warmup} "
          f"calls, median over {args.rounds} alternating rounds; a fresh session per library and pattern")
    print(f"{'model':26s} {'pattern':8s} {'onnxep ms':>10s} {'ort ms':>10s} {'ep/ort':>7s}")
    ratios = []
    for path in paths:
        for pattern in ("fixed", "cycle", "random"):
            sess = {lib: _session(lib, path, args.threads) for lib in ("onnxep", "onnxruntime")}
            names = {i.name for i in sess["onnxep"].get_inputs()}

            def measure(lib, r):
                rng = np.random.default_rng(100 + r)
                calls = [_feeds(names, n, rng) for n in _lengths(pattern, lo, hi, args.cycle, args.calls, seed=r)]
                times = []
                for feeds in calls:
                    t0 = time.perf_counter()
                    sess[lib].run(None, feeds)
                    times.append(time.perf_counter() - t0)
                return statistics.mean(times[args.warmup:]) * 1e3

            ep, ort = _alternating(args.rounds, args.pause, measure)
            ratios.append(ep / ort)
            print(f"{os.path.basename(path)[:-5]:26s} {pattern:8s} {ep:10.2f} {ort:10.2f} {ep / ort:7.2f}")
    print(_geomean_line(ratios, "row(s)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
