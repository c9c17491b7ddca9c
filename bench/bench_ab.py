"""A/B of two onnxep versions on the same models, in alternating rounds (issue 25: "no light or zoo model slower than
before").

Each version runs in a resident worker process of its own (two versions of one package cannot share a process), with
its checkout first on sys.path: `--base DIR` (e.g. a `git worktree add /tmp/base <ref>` with its extensions built or
copied in) and `--new DIR` (default: this checkout). Per model, both workers create their session and warm up; then
the driver alternates timed blocks, base then new, then new then base, each after the same pause, so both versions
see the same machine in turn -- the way the other benches alternate onnxep and onnxruntime. Reported per model: the
median of each version's block medians and new / base; at the end the geomean and the models whose ratio exceeds
--slower (default 1.05: the run-to-run spread of a 2-vCPU VM).

    python bench/bench_ab.py --base /work/wt-base --suite light --threads 2
    python bench/bench_ab.py --base /work/wt-base --suite zoo --only resnet bert --threads 1
    python bench/bench_ab.py --base /work/wt-base --suite decode --past 500 --steps 30 --rounds 10

`--suite decode`: the decoders with past of `--dir` (default ~/.cache/onnxep/zoo-full, bench/zoo/export.py --full)
run bench_decode.py's greedy loop (its `_start` and `_loop`; a worker imports the bench package its sys.path finds
first: the version's own checkout's, else this one's). A block is `--steps` steps from seeded `--past` tokens (at
most the model's max_positions - steps - 1), each round from a shorter past than the last (bench_decode.round_pasts:
no length twice), its figure the median step after the first 6. Also printed
per model: the median of the rounds' new / base ratios (a decoding step swings with the host's memory speed, which
the two blocks of a round share) and whether both versions picked the same tokens.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = r"""
import json, sys, time
import numpy as np
import onnxep
sess = feeds = None
print(json.dumps({"version": onnxep.__file__}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    try:
        if cmd["op"] == "load":
            so = onnxep.SessionOptions()
            so.intra_op_num_threads = cmd["threads"]
            for k, v in cmd.get("config", {}).items():
                so.add_session_config_entry(k, v)
            sess = onnxep.InferenceSession(cmd["model"], so)
            if cmd["feeds"]:
                feeds = dict(np.load(cmd["feeds"]))
                for _ in range(cmd["warmup"]):
                    sess.run(None, feeds)
            out = {"ok": True}
        elif cmd["op"] == "decode":
            if cmd["bench"] not in sys.path:
                sys.path.append(cmd["bench"])      # (after the version's own checkout: onnxep stays the worker's)
            from bench.bench_decode import _loop, _start
            ts, toks = _loop(sess, _start(sess, cmd["model"], cmd["past"], 0), cmd["steps"])
            out = {"ok": True, "median": float(np.median(ts[cmd["skip"]:])), "tokens": toks}
        elif cmd["op"] == "time":
            ts = []
            for _ in range(cmd["runs"]):
                t = time.perf_counter()
                sess.run(None, feeds)
                ts.append(time.perf_counter() - t)
            out = {"ok": True, "median": float(np.median(ts))}
        else:
            break
    except Exception as e:
        out = {"ok": False, "error": f"{type(e).__name__}: {e}"}
    print(json.dumps(out), flush=True)
"""


class Worker:
    def __init__(self, root):
        env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.p = subprocess.Popen([sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env=env, cwd=tempfile.gettempdir())
        self.version = self._read()["version"]
        if not self.version.startswith(os.path.abspath(root)):
            raise SystemExit(f"the worker for {root} imported onnxep from {self.version}")

    def _read(self):
        line = self.p.stdout.readline()
        if not line:
            raise SystemExit("a worker died")
        return json.loads(line)

    def ask(self, **cmd):
        self.p.stdin.write(json.dumps(cmd) + "\n")
        self.p.stdin.flush()
        return self._read()

    def close(self):
        try:
            self.p.stdin.write(json.dumps({"op": "quit"}) + "\n")
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait(timeout=30)


def _cases(args, tmp):
    """(name, model path, feeds .npz path) per model of the suite (or per --model file, seeded random feeds)."""
    import numpy as np
    if args.model:
        import onnxep
        from onnxep._bench import random_feeds
        out = []
        for path in args.model:
            name = os.path.splitext(os.path.basename(path))[0]
            feeds = os.path.join(tmp, f"{name}.npz")
            np.savez(feeds, **random_feeds(onnxep.InferenceSession(path)))
            out.append((name, os.path.abspath(path), feeds))
        return out
    if args.suite == "light":
        import onnx

        import onnxep
        from onnxep._bench import random_feeds
        from onnxep._light import light_model, light_names
        out = []
        for name in (args.only or light_names()):
            path = os.path.join(tmp, f"{name}.onnx")
            onnx.save(light_model(name, "random"), path)
            feeds = os.path.join(tmp, f"{name}.npz")
            np.savez(feeds, **random_feeds(onnxep.InferenceSession(path)))
            out.append((name, path, feeds))
        return out
    from pathlib import Path
    if args.suite == "decode":
        from bench.bench_decode import decoders
        folder = os.path.expanduser(args.dir or "~/.cache/onnxep/zoo-full")
        return [(os.path.basename(p)[:-5], os.path.abspath(p), None) for p in decoders(folder, args.only)]

    from onnxep._zoo import DEFAULT_DIR, load_case, read_index, select
    folder = Path(args.dir or os.environ.get("ONNXEP_ZOO", DEFAULT_DIR)).expanduser()
    out = []
    for e in select(read_index(folder), args.only, args.exporter):
        if e.get("error") or not e.get("file"):
            continue
        path, feeds, _ = load_case(folder, e)
        fpath = os.path.join(tmp, f"{e['name']}.npz")
        np.savez(fpath, **feeds)
        out.append((e["name"], str(path), fpath))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="checkout of the version to compare against (importable onnxep)")
    ap.add_argument("--new", default=os.path.dirname(HERE), help="checkout of the new version (default: this one)")
    ap.add_argument("--suite", choices=("light", "zoo", "decode"), default="light")
    ap.add_argument("--past", type=int, default=500, help="decode: tokens of past at the first step")
    ap.add_argument("--steps", type=int, default=30, help="decode: steps per block")
    ap.add_argument("--only", nargs="*", help="model names (light) or architectures / arch.exporter names (zoo)")
    ap.add_argument("--exporter", choices=("dynamo", "torchscript"))
    ap.add_argument("--model", nargs="*", help="ONNX files instead of a suite (seeded random feeds)")
    ap.add_argument("--dir", help="zoo folder (default ~/.cache/onnxep/zoo or $ONNXEP_ZOO)")
    ap.add_argument("--threads", type=int, default=0, help="intra-op threads (default: onnxep's, all cores)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=5, help="timed runs per block")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.1, help="seconds before each block")
    ap.add_argument("--slower", type=float, default=1.05, help="new / base above this is listed as slower")
    ap.add_argument("--json", help="write the per-model results here")
    ap.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                    help="session config entries for both versions (e.g. onnxep.compute_precision=bf16)")
    args = ap.parse_args(argv)
    if args.suite == "decode":
        sys.path.insert(0, os.path.dirname(HERE))       # (bench.bench_decode: this checkout's)
        from bench.bench_decode import _max_positions, round_pasts
    base, new = Worker(os.path.abspath(args.base)), Worker(os.path.abspath(args.new))
    block = (f"{args.steps} decoding steps from {args.past} tokens of past" if args.suite == "decode"
             else f"{args.runs} runs")
    print(f"onnxep A/B: base {base.version}, new {new.version}; {args.suite}, {args.threads or 'default'} thread(s); "
          f"median of {args.rounds} alternating blocks of {block} (pause {args.pause} s before each; the order "
          f"alternates)"
          + (f"; config {' '.join(args.config)}" if args.config else ""))
    print(f"{'model':<34}{'base ms':>9}{'new ms':>9}{'new/base':>10}")
    results = []
    try:
        with tempfile.TemporaryDirectory(prefix="onnxep-ab-") as tmp:
            for name, path, feeds in _cases(args, tmp):
                load = dict(op="load", model=path, feeds=feeds, threads=args.threads, warmup=args.warmup,
                            config=dict(c.split("=", 1) for c in args.config))
                got = [w.ask(**load) for w in (base, new)]
                if not all(g["ok"] for g in got):
                    print(f"{name:<34}  not compared: " + "; ".join(g.get("error", "") for g in got if not g["ok"]))
                    continue
                times = {"base": [], "new": []}
                tokens = {}
                ask = dict(op="time", runs=args.runs)
                pasts = None
                if args.suite == "decode":
                    limit = _max_positions(path) - args.steps - 1
                    pasts = round_pasts(min(args.past, limit), args.steps, args.rounds, limit)
                    ask = dict(op="decode", model=path, steps=args.steps, skip=min(6, args.steps - 1),
                               bench=os.path.dirname(HERE))
                for rnd in range(args.rounds):
                    if pasts is not None:       # (no length twice: bench_decode.round_pasts)
                        ask["past"] = pasts[rnd]
                    # (the order alternates: a block right after the other version's may see the machine otherwise)
                    for tag, w in ((("base", base), ("new", new)) if rnd % 2 == 0 else (("new", new), ("base", base))):
                        time.sleep(args.pause)
                        r = w.ask(**ask)
                        if not r["ok"]:
                            raise SystemExit(f"{name}: {tag}: {r['error']}")
                        times[tag].append(r["median"])
                        tokens[tag] = r.get("tokens")
                b, n = (sorted(times[k])[len(times[k]) // 2] for k in ("base", "new"))
                results.append({"model": name, "base_ms": b * 1e3, "new_ms": n * 1e3, "ratio": n / b})
                extra = ""
                if args.suite == "decode":
                    rr = sorted(x / y for x, y in zip(times["new"], times["base"]))
                    results[-1]["round_ratio"] = rr[len(rr) // 2]
                    extra = f"  rounds' median {rr[len(rr) // 2]:.3f}; same tokens {tokens['base'] == tokens['new']}"
                print(f"{name:<34}{b * 1e3:>9.3f}{n * 1e3:>9.3f}{n / b:>10.2f}{extra}", flush=True)
    finally:
        base.close()
        new.close()
    if results:
        geo = math.exp(sum(math.log(r["ratio"]) for r in results) / len(results))
        slower = [r for r in results if r["ratio"] > args.slower]
        print(f"geomean new / base {geo:.3f} over {len(results)} models; {len(slower)} above {args.slower}"
              + (": " + ", ".join(f"{r['model']} {r['ratio']:.2f}" for r in slower) if slower else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
