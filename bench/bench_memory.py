"""Memory of onnxep beside onnxruntime (CPUExecutionProvider): peak RSS while running, and the RSS a second session of
the same model adds, with and without a shared PrePackedWeightsContainer. Every number comes from a fresh process.

    python bench/bench_memory.py [MODEL.onnx ...] [--threads 2] [--repeat 3] [--only resnet50 vgg19]
                                 [--weights random|shipped] [--zoo all | --zoo bert.dynamo gpt2.torchscript ...]
                                 [--skip second]

Models: the nine light model-zoo models inside the onnx wheel (onnx/backend/test/data/light), with seeded random
weights of the same shapes written to a temporary folder (onnxep/_light.py; `--weights shipped`: the files' own
ConstantOfShape(0.02), which merge in the weight cache as real weights never do), or the paths given, or the zoo
models named by --zoo (run on the inputs stored in NAME.npz beside each, as any model path with such a file).
Both libraries run with intra_op_num_threads = --threads (default 2). Each cell is the median over --repeat fresh
processes; the processes of one model run one at a time, interleaved between the libraries and modes.

Table 1, peak RSS (one process per library: import the library and numpy, read the RSS -- the baseline --, create
the session, run 5 times on random inputs, read the peak):
  onnxep MB / ort MB    peak RSS of the process since its exec, VmHWM of /proc/self/status (imports included; not
                        ru_maxrss, which a child inherits from the parent that spawned it)
  ratio                 onnxep peak / onnxruntime peak (issue 5's target: <= 1)
  +onnxep MB / +ort MB  peak minus the baseline RSS read right after the imports (what the session and its runs add)
  ratio+                the same ratio on the increases

Table 2, RSS added by a second session of the same model (one process per cell: create session 1, run it 3 times, read
the RSS from /proc/self/statm; create session 2, run it 3 times, read the RSS again). Cells are that increase as a
fraction of the model's weight bytes ("weights MB": initializers plus the outputs of Constant / ConstantOfShape nodes
fed by constants -- the light models make their weights with ConstantOfShape, so their initializers alone are a few
KB):
  ort                   onnxruntime, two plain sessions (its Python API has no pre-packed weights container)
  onnxep                two onnxep sessions, each with its own container (the default)
  onnxep shared         both sessions given one `onnxep.PrePackedWeightsContainer()` (issue 5's target: <= 0.10): they
                        share packed weights, constants and the pool their planned runs borrow activation arenas from
                        (graph/planner.py ArenaPool; onnxruntime's counterpart is session.use_env_allocators)
  +stream               shared, and both sessions created on one `onnxep.Stream()` (the arena pool is then the
                        stream's: the same sharing, through the other owner)
  (trim) columns        the same, with glibc's `malloc_trim(0)` called (after gc.collect()) before each RSS read: what
                        the process still holds, without the freed heap pages glibc keeps for reuse
  act MB                onnxep's activation memory after the runs (shared column): the arena pool the second session
                        draws from (graph/planner.py; shared with the first) plus its pool of blocks allocated
                        outside it (HostBlockPool.pooled: outputs)
Not a test: nothing here is asserted.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # this checkout's onnxep first

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from onnxep._light import light_models  # noqa: E402

CHILD = r"""
import ctypes, gc, json, os, sys
lib, path, threads, mode, root = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
sys.path.insert(0, root)
import numpy as np
if lib == "onnxep":
    import onnxep as rt
else:
    import onnxruntime as rt

PAGE = os.sysconf("SC_PAGE_SIZE")
trim = mode.endswith("-trim")
libc = ctypes.CDLL("libc.so.6") if trim else None

def rss():
    if trim:
        gc.collect()
        libc.malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE

def session(container=None, stream=None):
    so = rt.SessionOptions()
    so.intra_op_num_threads = threads
    if lib == "onnxep":
        return rt.InferenceSession(path, so, prepacked_weights_container=container, stream=stream)
    so.log_severity_level = 3
    return rt.InferenceSession(path, so, providers=["CPUExecutionProvider"])

def feeds(sess):
    npz = os.path.splitext(path)[0] + ".npz"
    if os.path.exists(npz):         # a zoo model: the inputs stored beside it
        with np.load(npz) as z:
            return {k[len("input:"):]: z[k] for k in z.files if k.startswith("input:")}
    rng = np.random.default_rng(0)
    types = {"tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32}
    out = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in (i.shape or [])]
        out[i.name] = rng.standard_normal(shape).astype(types[i.type])
    return out

base = rss()
if mode == "peak":
    s = session()
    f = feeds(s)
    for _ in range(5):
        s.run(None, f)
    with open("/proc/self/status") as f:
        peak = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) * 1024   # kB
    print(json.dumps({"base": base, "peak": peak}))
else:
    c = rt.PrePackedWeightsContainer() if mode.startswith(("shared", "stream")) else None
    st = rt.Stream("shared") if mode.startswith("stream") else None
    s1 = session(c, st)
    f = feeds(s1)
    for _ in range(3):          # onnxep records its first run, then runs from the planned arena
        s1.run(None, f)
    r1 = rss()
    s2 = session(c, st)
    for _ in range(3):
        s2.run(None, f)
    r2 = rss()
    out = {"added": r2 - r1}
    if lib == "onnxep":
        mem = s2._executor.memory
        out["pool"] = s2._pool.pooled + (mem.arena_bytes if mem is not None else 0)
        if c is not None:
            out["container"] = c.nbytes
    print(json.dumps(out))
"""

SECOND_MODES = [("ort", "plain"), ("onnxep", "plain"), ("onnxep", "shared"), ("onnxep", "stream"),
                ("ort", "plain-trim"), ("onnxep", "plain-trim"), ("onnxep", "shared-trim"), ("onnxep", "stream-trim")]


def _child(lib, path, threads, mode) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, lib, path, str(threads), mode, ROOT], capture_output=True,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{lib} {mode} on {path} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def weight_bytes(path) -> int:
    """Initializers plus the outputs of Constant nodes and of ConstantOfShape nodes whose shape is a constant."""
    g = onnx.load(path).graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    total = sum(a.nbytes for a in consts.values())
    for n in g.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    v = numpy_helper.to_array(a.t)
                    consts[n.output[0]] = v
                    total += v.nbytes
        elif n.op_type == "ConstantOfShape" and n.input[0] in consts:
            value = next((numpy_helper.to_array(a.t) for a in n.attribute if a.name == "value"),
                         np.zeros(1, np.float32))
            total += int(np.prod(consts[n.input[0]], dtype=np.int64)) * value.dtype.itemsize
    return total


def _med(rows, key):
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="*", help="model paths (default: the light models inside the onnx wheel)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", nargs="*", help="light model names (e.g. resnet50 vgg19)")
    ap.add_argument("--zoo", nargs="*", default=[],
                    help="zoo model names (bert.dynamo ...; 'all': every one) from $ONNXEP_ZOO or ~/.cache/onnxep/zoo, "
                         "run on the inputs stored beside them (NAME.npz); with --zoo, the light models only with "
                         "--only")
    ap.add_argument("--skip", nargs="*", default=[], choices=["peak", "second"])
    ap.add_argument("--weights", choices=["random", "shipped"], default="random",
                    help="the light models' weights (default: seeded random ones of the same shapes)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="onnxep-bench-memory-") as tmp:
        models = list(args.models)
        if args.zoo:
            zoo_dir = os.environ.get("ONNXEP_ZOO", os.path.join(os.path.expanduser("~"), ".cache", "onnxep", "zoo"))
            names = args.zoo
            if names == ["all"]:
                names = sorted(f[:-5] for f in os.listdir(zoo_dir) if f.endswith(".onnx"))
            models += [os.path.join(zoo_dir, f"{n}.onnx") for n in names]
        if not models or (args.zoo and args.only):
            zoo = models
            models = light_models()
            if args.only:
                models = [p for p in models if any(os.path.basename(p) in (f"light_{n}.onnx", n, f"{n}.onnx")
                                                   for n in args.only)]
            if args.weights == "random":
                models = _write_random(models, tmp)
            models = models + (zoo if args.zoo else [])
        _tables(args, models)


def _write_random(paths, folder) -> list:
    """The random-weight copies, written by a child process, so that this one stays small (the files are ~0.8 GB)."""
    out = [os.path.join(folder, os.path.basename(p)) for p in paths]
    code = ("import sys, onnx; sys.path.insert(0, sys.argv[1]); from onnxep._light import light_model\n"
            "for src, dst in zip(sys.argv[2::2], sys.argv[3::2]): onnx.save(light_model(src), dst)")
    subprocess.run([sys.executable, "-c", code, ROOT, *[x for pair in zip(paths, out) for x in pair]], check=True)
    return out


def _tables(args, models):
    import onnxruntime
    import onnxep
    from onnxep import _kernels
    mb = 1e6
    print(f"onnxep {onnxep.__version__} (ISA {_kernels.ISA}) vs onnxruntime {onnxruntime.__version__}; "
          f"{args.threads} thread(s); median of {args.repeat} fresh processes per cell; MB = 1e6 bytes"
          f"{'' if args.models else f'; light models with {args.weights} weights'}")
    if "peak" not in args.skip:
        print("\npeak RSS (create + 5 runs); + = increase over the RSS right after the imports")
        print(f"{'model':<30}{'onnxep MB':>10}{'ort MB':>9}{'ratio':>7}{'+onnxep MB':>12}{'+ort MB':>9}{'ratio+':>8}")
        ratios = []
        for path in models:
            rows = {"onnxep": [], "ort": []}
            for _ in range(args.repeat):
                for lib in rows:
                    rows[lib].append(_child(lib, path, args.threads, "peak"))
            for r in rows["onnxep"] + rows["ort"]:
                r["inc"] = r["peak"] - r["base"]
            po, pr = _med(rows["onnxep"], "peak"), _med(rows["ort"], "peak")
            io, ir = _med(rows["onnxep"], "inc"), _med(rows["ort"], "inc")
            name = os.path.splitext(os.path.basename(path))[0]
            print(f"{name:<30}{po / mb:>10.1f}{pr / mb:>9.1f}{po / pr:>7.2f}{io / mb:>12.1f}{ir / mb:>9.1f}"
                  f"{io / ir:>8.2f}", flush=True)
            ratios.append((po / pr, name))
        if len(ratios) > 1:
            worst = max(ratios)
            print(f"peak ratio over 1.00 on {sum(r > 1 for r, _ in ratios)} of {len(ratios)} models; largest "
                  f"{worst[0]:.2f} ({worst[1]})")
    if "second" not in args.skip:
        print("\nRSS added by a second session of the same model (create + 3 runs), / weight bytes; (trim): after "
              "gc.collect() + malloc_trim(0)")
        print(f"{'model':<30}{'weights MB':>11}{'ort':>7}{'onnxep':>8}{'shared':>8}{'+stream':>8}{'ort(trim)':>11}"
              f"{'onnxep(trim)':>14}{'shared(trim)':>14}{'+stream(trim)':>15}{'act MB':>9}{'container MB':>14}")
        for path in models:
            w = weight_bytes(path)
            rows = {m: [] for m in SECOND_MODES}
            for _ in range(args.repeat):
                for lib, mode in SECOND_MODES:
                    rows[(lib, mode)].append(_child(lib, path, args.threads, mode))
            f = [_med(rows[m], "added") / w for m in SECOND_MODES]
            pool = _med(rows[("onnxep", "shared")], "pool")
            cont = _med(rows[("onnxep", "shared")], "container")
            name = os.path.splitext(os.path.basename(path))[0]
            print(f"{name:<30}{w / mb:>11.1f}{f[0]:>7.2f}{f[1]:>8.2f}{f[2]:>8.2f}{f[3]:>8.2f}{f[4]:>11.2f}"
                  f"{f[5]:>14.2f}{f[6]:>14.2f}{f[7]:>15.2f}{pool / mb:>9.1f}{cont / mb:>14.1f}", flush=True)


if __name__ == "__main__":
    main()
