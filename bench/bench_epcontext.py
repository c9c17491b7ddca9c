"""Session creation: cold (load, optimize, pack, hash) vs reloading the EPContext model (seed 003), fresh processes.

    python bench/bench_epcontext.py [--repeat 5] [--only resnet50 vgg19] [--weights random|shipped]

For each light model (seeded random weights of the same shapes by default, onnxep/_light.py; `--weights shipped`: the
files' own ConstantOfShape(0.02)): the EPContext model is written once per embed mode (0: side file, 1: embedded) into
a temporary folder; then `repeat` rounds, each timing InferenceSession(...) alone in a fresh process for: onnxruntime
on the original model, onnxep on the original model (cold), on the embed_mode=0 model and on the embed_mode=1 model --
interleaved, so machine noise hits all alike. Prints the median of each, the reload / cold ratio (issue 5's target:
<= 0.2) and each onnxep time over onnxruntime's. Not a test: nothing about speed is asserted.

    python bench/bench_epcontext.py --vs-ort [--only ...] [--zoo bert.dynamo gpt2.torchscript ...] [--dir FOLDER]
                                    [--stages] [--cpu]

Cold creation beside onnxruntime in one process (issue 25 item 5): per model, InferenceSession(path) of each library
(default options; onnxruntime: CPUExecutionProvider), alternated, the best of --repeat (default 3) each after a warm-up
creation of both; prints both times and onnxep / onnxruntime, then the geomean and the largest ratio. Light models
(random weights, written once into --dir, default a temporary folder) and the zoo models named by --zoo (from
$ONNXEP_ZOO or ~/.cache/onnxep/zoo). --stages adds, per model, where onnxep's best creation went: load, shape
inference, graph building, each pass, partition, compile (of which packing, weight hashing, constant sharing).
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's onnxep first

import onnx  # noqa: E402

import onnxep  # noqa: E402
from onnxep._light import light_model  # noqa: E402

CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[2])
if sys.argv[3] == "ort":
    import onnxruntime
    so = onnxruntime.SessionOptions()
    so.log_severity_level = 3
    t = time.perf_counter()
    s = onnxruntime.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
else:
    import onnxep
    t = time.perf_counter()
    s = onnxep.InferenceSession(sys.argv[1])
print(time.perf_counter() - t)
"""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _create_seconds(path, lib) -> float:
    r = subprocess.run([sys.executable, "-c", CHILD, path, ROOT, lib], capture_output=True, text=True, check=True)
    return float(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--weights", choices=["random", "shipped"], default="random")
    ap.add_argument("--vs-ort", action="store_true", help="cold creation beside onnxruntime, same process")
    ap.add_argument("--zoo", nargs="*", default=[], help="zoo model names (with --vs-ort)")
    ap.add_argument("--dir", default=None, help="folder for the light models' random-weight files (with --vs-ort)")
    ap.add_argument("--stages", action="store_true", help="per-stage times of onnxep's creation (with --vs-ort)")
    ap.add_argument("--cpu", action="store_true",
                    help="(with --vs-ort) the process's CPU time (time.process_time, every thread) instead of wall "
                         "time: on a machine other processes load, what each library spent rather than what it waited")
    args = ap.parse_args()
    if args.vs_ort:
        return vs_ort(args)
    args.repeat = args.repeat or 5
    args.only = args.only if args.only is not None else ["resnet50", "vgg19"]
    from onnxep import _kernels
    print(f"onnxep {onnxep.__version__} (ISA {_kernels.ISA}); InferenceSession() time in fresh processes, median of "
          f"{args.repeat} interleaved rounds; light models with {args.weights} weights; ort = onnxruntime")
    print(f"{'model':<10}{'ort ms':>9}{'cold ms':>10}{'ctx0 ms':>10}{'ctx1 ms':>10}{'ctx0/cold':>11}{'ctx1/cold':>11}"
          f"{'cold/ort':>10}{'ctx0/ort':>10}  blob MB")
    for name in args.only:
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, f"{name}.onnx")
            onnx.save(light_model(name, args.weights), src)
            paths = {"ort": src, "cold": src}
            for embed in ("0", "1"):
                so = onnxep.SessionOptions()
                so.add_session_config_entry("ep.context_enable", "1")
                so.add_session_config_entry("ep.context_embed_mode", embed)
                so.add_session_config_entry("ep.context_file_path", os.path.join(d, f"{name}_ctx{embed}.onnx"))
                onnxep.InferenceSession(src, so)
                paths[f"ctx{embed}"] = os.path.join(d, f"{name}_ctx{embed}.onnx")
            blob_mb = os.path.getsize(paths["ctx1"]) / 1e6
            times = {k: [] for k in paths}
            for _ in range(args.repeat):
                for k, p in paths.items():
                    times[k].append(_create_seconds(p, "ort" if k == "ort" else "onnxep"))
            med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
            print(f"{name:<10}{med['ort']:>9.1f}{med['cold']:>10.1f}{med['ctx0']:>10.1f}{med['ctx1']:>10.1f}"
                  f"{med['ctx0'] / med['cold']:>11.3f}{med['ctx1'] / med['cold']:>11.3f}"
                  f"{med['cold'] / med['ort']:>10.2f}{med['ctx0'] / med['ort']:>10.2f}  {blob_mb:.0f}", flush=True)
            for k, v in times.items():
                print(f"    {k}: {[round(t * 1e3, 1) for t in v]}")


def _stage_timers():
    """Wraps the creation pipeline's functions with timers; returns (times dict, restore())."""
    import functools
    import time
    from onnxep import session as S
    import importlib
    C = importlib.import_module("onnxep.contracts.compile")
    from onnxep.contracts import weight_cache as W
    from onnxep.backends.cpu import device as D
    from onnxep.graph import model as M
    from onnxep.graph import passes as P
    times = {}
    undo = []

    def timed(key, f):
        @functools.wraps(f)
        def g(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                times[key] = times.get(key, 0.0) + time.perf_counter() - t
        return g

    def wrap(owner, name, key):
        f = getattr(owner, name)
        undo.append((owner, name, f))
        setattr(owner, name, timed(key, f))

    wrap(M, "load_model", "load")
    wrap(M, "_without_weight_data", "shape inference")
    wrap(M.onnx.shape_inference, "infer_shapes", "shape inference")
    wrap(M, "complete_types", "shape inference")
    wrap(M, "build_graph", "build_graph (with shape inference)")
    old_passes = list(P.PASSES)
    P.PASSES[:] = [(lvl, timed(f"pass {fn.__name__}", fn)) for lvl, fn in old_passes]
    wrap(S, "make_partitions", "partition")
    wrap(S, "compile_partitions", "compile")
    wrap(D, "prepack_kernel", "  compile: prepack (pack + hash + share)")
    wrap(C, "SharedPrePackedWeightCache", "  compile: cache objects")
    wrap(W, "content_hash", "  compile: weight hashing")
    W.PrePackedWeightsContainer.hash_function = staticmethod(W.content_hash)
    wrap(W.PrePackedWeightsContainer, "share_constant", "  compile: share_constant (hash + verify)")
    wrap(S, "ArenaPlanner", "plan")
    wrap(S, "Executor", "plan")

    def restore():
        for owner, name, f in reversed(undo):
            setattr(owner, name, f)
        W.PrePackedWeightsContainer.hash_function = staticmethod(W.content_hash)
        P.PASSES[:] = old_passes
    return times, restore


def vs_ort(args):
    import gc
    import math
    import time

    import onnxruntime
    repeat = args.repeat or 3
    zoo_dir = os.environ.get("ONNXEP_ZOO", os.path.join(os.path.expanduser("~"), ".cache", "onnxep", "zoo"))
    from onnxep._light import light_names
    names = args.only if args.only is not None else light_names()
    tmp = None
    folder = args.dir
    if folder is None:
        tmp = tempfile.TemporaryDirectory(prefix="onnxep-creation-")
        folder = tmp.name
    os.makedirs(folder, exist_ok=True)
    models = []
    for name in names:
        path = os.path.join(folder, f"{name}_{args.weights}.onnx")
        if not os.path.exists(path):
            onnx.save(light_model(name, args.weights), path)
        models.append((name, path))
    models += [(z, os.path.join(zoo_dir, f"{z}.onnx")) for z in args.zoo]

    def ort_create(path):
        so = onnxruntime.SessionOptions()
        so.log_severity_level = 3
        return onnxruntime.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    clock = time.process_time if args.cpu else time.perf_counter

    def best(fn, path):
        gc.collect()
        time.sleep(0.1)
        t = clock()
        s = fn(path)
        dt = clock() - t
        del s
        return dt

    print(f"onnxep {onnxep.__version__} vs onnxruntime {onnxruntime.__version__}: InferenceSession(path) in one "
          f"process, best of {repeat} alternated (after one warm-up each); light models with {args.weights} weights"
          f"{'; CPU time' if args.cpu else ''}")
    print(f"{'model':<26}{'ort ms':>9}{'onnxep ms':>11}{'ratio':>8}")
    ratios = []
    for name, path in models:
        best(ort_create, path)
        best(onnxep.InferenceSession, path)
        to, te = [], []
        stage_runs = []
        for _ in range(repeat):
            to.append(best(ort_create, path))
            if args.stages:
                times, restore = _stage_timers()
                try:
                    te.append(best(onnxep.InferenceSession, path))
                finally:
                    restore()
                stage_runs.append((te[-1], times))
            else:
                te.append(best(onnxep.InferenceSession, path))
        r = min(te) / min(to)
        ratios.append(r)
        print(f"{name:<26}{min(to) * 1e3:>9.1f}{min(te) * 1e3:>11.1f}{r:>8.2f}", flush=True)
        if args.stages:
            total, times = min(stage_runs, key=lambda x: x[0])
            for k, v in times.items():
                if v >= 0.0005:
                    print(f"      {k:<44}{v * 1e3:>9.1f} ms {v / total * 100:>5.1f}%")
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"geomean onnxep / onnxruntime {geo:.2f}; largest {max(ratios):.2f} ({models[ratios.index(max(ratios))][0]})")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
