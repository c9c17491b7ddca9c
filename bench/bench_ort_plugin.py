"""onnxep as an onnxruntime plugin EP (issue 28): each model in onnxruntime with the plugin and with the CPU EP alone.

Per model: max |plugin - cpu| / max |cpu| over the outputs, both sessions timed in alternating rounds (medians, ms),
the ratio plugin / CPU EP alone, and onnxruntime's own profiler share of node time per provider (a separate
profiled session). Light models: seeded random-weight copies (onnxep/_light.py) with random inputs; zoo models
(``zoo:ARCH.EXPORTER``): the cache's stored inputs (~/.cache/onnxep/zoo). Geomean of the ratios at the end.

    python bench/bench_ort_plugin.py --threads 2 --repeat 20
    python bench/bench_ort_plugin.py resnet50 zoo:resnet.dynamo --threads 1
    python bench/bench_ort_plugin.py -o compile=0 --threads 2      # the kernel-registry path (default: compile)
    python bench/bench_ort_plugin.py --creation --repeat 5          # session creation: original vs its _ctx.onnx

``--creation``: per model, the time to create a plugin session on the original model (onnxruntime's passes, then
onnxep compiles and packs each partition) and on the EPContext model an ep.context_enable=1 session wrote (``--embed``
0, onnxruntime's default: side files; 1: blobs inside the model; each partition rebuilt from its blob, no packing),
in rounds, medians; the CPU EP alone for reference.
"""

import argparse
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402

from onnxep import ort as onnxep_ort  # noqa: E402
from onnxep._bench import _alternate  # noqa: E402
from onnxep._light import light_model  # noqa: E402
from onnxep._profile import parse_trace  # noqa: E402

ZOO = os.path.expanduser("~/.cache/onnxep/zoo")
DEFAULT = ["resnet50", "squeezenet", "inception_v1", "zoo:resnet.dynamo", "zoo:mobilenet_v2.dynamo",
           "zoo:regnet.dynamo", "zoo:efficientnet.dynamo", "zoo:convnext.dynamo", "zoo:bert.dynamo", "zoo:vit.dynamo",
           "zoo:gpt2.dynamo", "zoo:distilbert.dynamo"]
_NP = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32}


def _load(spec):
    """(model bytes, feeds) of a light model name or zoo:ARCH.EXPORTER."""
    if spec.startswith("zoo:"):
        base = os.path.join(ZOO, spec[4:])
        m = onnx.load(base + ".onnx")
        data = np.load(base + ".npz")
        feeds = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}
    else:
        m = light_model(spec)
        rng = np.random.default_rng(0)
        inits = {i.name for i in m.graph.initializer}
        feeds = {}
        for vi in m.graph.input:
            if vi.name in inits:
                continue
            t = vi.type.tensor_type
            shape = [d.dim_value if d.dim_value > 0 else 1 for d in t.shape.dim]
            feeds[vi.name] = rng.standard_normal(shape).astype(_NP.get(t.elem_type, np.float32))
    m.ir_version = min(m.ir_version, 10)
    return m.SerializeToString(), feeds


def _session(mb, threads, plugin, profile=False, **ep_options):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if profile:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "onnxep_plugin_bench")
    if plugin:
        so = onnxep_ort.session_options(so, **ep_options)
    return ort.InferenceSession(mb, sess_options=so, providers=None if plugin else ["CPUExecutionProvider"])


def provider_share(mb, feeds, threads, runs=5, **ep_options):
    """{provider: fraction of node kernel time} from onnxruntime's profiler over `runs` runs (after one warm-up)."""
    s = _session(mb, threads, True, profile=True, **ep_options)
    s.run(None, feeds)
    for _ in range(runs):
        s.run(None, feeds)
    path = s.end_profiling()
    kernels = parse_trace(path)["kernels"]
    os.remove(path)
    tot = {}
    for k in kernels.values():
        tot[k["provider"] or "?"] = tot.get(k["provider"] or "?", 0) + k["us"]
    s_all = sum(tot.values()) or 1
    return {p: v / s_all for p, v in sorted(tot.items(), key=lambda kv: -kv[1])}


def bench(spec, threads, repeat, **ep_options):
    mb, feeds = _load(spec)
    cpu = _session(mb, threads, False)
    plug = _session(mb, threads, True, **ep_options)
    ref = cpu.run(None, feeds)
    out = plug.run(None, feeds)
    err = max(float(np.abs(np.asarray(o, np.float64) - r).max() / max(np.abs(r).max(), 1e-30))
              for o, r in zip(out, ref))
    # alternating rounds of 5 with _settle between them, as the other benches time two libraries: run by run, the
    # CPU EP session's workers, spinning ~100 ms after a 2-thread run, took a core from the plugin run timed next
    # (light SqueezeNet read 1.72x the CPU EP that way, 0.9-1.0x settled)
    tc, tp = _alternate([lambda: cpu.run(None, feeds), lambda: plug.run(None, feeds)], 3, repeat, 5, 0.05)
    mc, mp = tc * 1e3, tp * 1e3
    share = provider_share(mb, feeds, threads, **ep_options)
    return err, mc, mp, share


def creation(spec, threads, repeat, embed="1", **ep_options):
    """(ms to create the CPU EP alone, the plugin on the original, the plugin on its _ctx.onnx), medians."""
    import shutil
    import time

    mb, feeds = _load(spec)
    tmp = tempfile.mkdtemp(prefix="onnxep_ctx_bench_")
    try:
        src = os.path.join(tmp, "model.onnx")
        with open(src, "wb") as f:
            f.write(mb)
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so = onnxep_ort.session_options(so, **ep_options)
        so.add_session_config_entry("ep.context_enable", "1")
        so.add_session_config_entry("ep.context_embed_mode", embed)
        ort.InferenceSession(src, so).run(None, feeds)
        ctx = os.path.join(tmp, "model_ctx.onnx")
        ctx_bytes = sum(os.path.getsize(os.path.join(tmp, f)) for f in os.listdir(tmp) if f != "model.onnx")

        def timed(fn):
            t = time.perf_counter()
            fn()
            return time.perf_counter() - t

        runs = {"cpu": [], "orig": [], "ctx": []}
        for _ in range(repeat):
            runs["cpu"].append(timed(lambda: _session(mb, threads, False)))
            runs["orig"].append(timed(lambda: _session(mb, threads, True, **ep_options)))
            runs["ctx"].append(timed(lambda: ort.InferenceSession(ctx, sess_options=_plugin_so(threads, ep_options))))
        return (float(np.median(runs["cpu"])) * 1e3, float(np.median(runs["orig"])) * 1e3,
                float(np.median(runs["ctx"])) * 1e3, len(mb), ctx_bytes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _plugin_so(threads, ep_options):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return onnxep_ort.session_options(so, **ep_options)


def main_creation(a, ep_options):
    print(f"onnxruntime {ort.__version__}, {a.threads} thread(s), session creation, {a.repeat} rounds, medians, "
          f"ep.context_embed_mode={a.embed}, EP options {ep_options}")
    print(f"{'model':28s} {'cpu EP ms':>9s} {'plugin ms':>9s} {'ctx ms':>8s} {'ctx/plugin':>10s}  model -> ctx MB "
          f"(all files)")
    for spec in a.models:
        try:
            c, o, x, n0, n1 = creation(spec, a.threads, a.repeat, a.embed, **ep_options)
        except Exception as e:  # report and go on with the next model
            print(f"{spec:28s} FAILED: {type(e).__name__}: {str(e)[:200]}")
            continue
        print(f"{spec:28s} {c:9.1f} {o:9.1f} {x:8.1f} {x / o:10.2f}  {n0 / 1e6:.1f} -> {n1 / 1e6:.1f}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", default=DEFAULT, help="light model names or zoo:ARCH.EXPORTER")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--ep-option", "-o", action="append", default=[], metavar="KEY=VALUE",
                    help="an option of onnxep's EP, e.g. -o compile=0 (kernel-registry path) or -o threads=2; repeatable")
    ap.add_argument("--embed", default="0", choices=["0", "1"], help="--creation: ep.context_embed_mode")
    ap.add_argument("--creation", action="store_true",
                    help="time session creation on the original model vs its EPContext model instead of runs")
    a = ap.parse_args()
    ep_options = dict(kv.split("=", 1) for kv in a.ep_option)
    onnxep_ort.register()
    if a.creation:
        return main_creation(a, ep_options)
    print(f"onnxruntime {ort.__version__}, {a.threads} thread(s), {a.repeat} alternating rounds, medians, "
          f"EP options {ep_options}")
    print(f"{'model':28s} {'rel err':>9s} {'cpu ms':>8s} {'plugin ms':>9s} {'ratio':>6s}  provider share")
    ratios = []
    for spec in a.models:
        try:
            err, mc, mp, share = bench(spec, a.threads, a.repeat, **ep_options)
        except Exception as e:  # report and go on with the next model
            print(f"{spec:28s} FAILED: {type(e).__name__}: {str(e)[:200]}")
            continue
        ratios.append(mp / mc)
        sh = " ".join(f"{p.replace('ExecutionProvider', '')}={v:.0%}" for p, v in share.items())
        print(f"{spec:28s} {err:9.1e} {mc:8.2f} {mp:9.2f} {mp / mc:6.2f}  {sh}", flush=True)
    if ratios:
        print(f"geomean ratio plugin / CPU EP alone: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")


if __name__ == "__main__":
    main()
