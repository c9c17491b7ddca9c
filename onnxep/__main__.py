"""onnxep command line.

    python -m onnxep bench [MODEL ...]   latency beside onnxruntime (default: the light models inside the onnx wheel,
                                         with seeded random weights; --weights shipped for the files' own)
    python -m onnxep bench --suite models   the same for a BERT-like encoder and an MLP built in memory
    python -m onnxep bench --suite zoo      the real exported models of the zoo cache (bench/zoo), beside
                                         onnxruntime and OpenVINO when installed; --json OUT for every figure
    python -m onnxep profile MODEL       where the time goes: per op type and per node, beside onnxruntime's profile
    python -m onnxep run MODEL           run once on random inputs, print the outputs' shapes and the latency
    python -m onnxep check MODEL         which backend runs each node
    python -m onnxep info                the kernel variant and thread pool chosen on this machine
"""
from __future__ import annotations

import argparse
import collections
import sys
import time


def main(argv=None) -> int:
    from onnxep import _profile

    p = argparse.ArgumentParser(prog="python -m onnxep", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd")
    b = sub.add_parser("bench", help="latency beside onnxruntime")
    b.add_argument("models", nargs="*", help="ONNX files (default: the light models shipped inside the onnx wheel)")
    b.add_argument("--threads", type=int, default=0, help="intra-op threads for both (default: all cores)")
    b.add_argument("--warmup", type=int, default=3)
    b.add_argument("--repeat", type=int, default=10)
    b.add_argument("--no-ort", action="store_true", help="time onnxep only")
    b.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                   help="onnxep's onnxep.compute_precision (bf16: GEMMs on bf16 operands where the CPU has "
                        "AVX512_BF16); onnxruntime stays fp32. bench/zoo/bf16.py adds the cosine vs fp32")
    b.add_argument("--weights", choices=("random", "shipped"), default="random",
                   help="the light models' weights: seeded random ones of the same shapes (default), or the files' "
                        "own ConstantOfShape(0.02), whose logits are one repeated number")
    b.add_argument("--suite", choices=("light", "models", "zoo"), default="light",
                   help="light: the model-zoo models in the onnx wheel (default); models: the synthetic BERT-like "
                        "encoder and MLPs of onnxep/_models.py, timed in alternating rounds (--repeat: runs of each); "
                        "zoo: the real exported models of the zoo cache (bench/zoo/export.py), beside onnxruntime "
                        "and OpenVINO when it is installed")
    b.add_argument("--dir", help="--suite zoo: the zoo cache (default ~/.cache/onnxep/zoo or $ONNXEP_ZOO)")
    b.add_argument("--only", nargs="+", metavar="NAME",
                   help="--suite zoo: these architectures (or arch.exporter names) only")
    b.add_argument("--exporter", choices=("dynamo", "torchscript"), help="--suite zoo: one exporter only")
    b.add_argument("--json", metavar="OUT", help="also write every figure to OUT as JSON, with the machine, ISA and "
                                                 "versions")
    b.add_argument("--plot", metavar="PNG", help="also draw the ratios against onnxruntime (and OpenVINO) per model "
                                                 "to PNG (needs the plot extra: matplotlib)")
    f = sub.add_parser("profile", help="where the time goes, beside onnxruntime's profile",
                       description=_profile.__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    f.add_argument("model", help="ONNX file, or a light model's short name (resnet50, ...)")
    f.add_argument("--threads", type=int, default=0, help="intra-op threads for both (default: all cores)")
    f.add_argument("--runs", type=int, default=10, help="profiled runs after the warm-up (default 10)")
    f.add_argument("--warmup", type=int, default=3, help="runs left out of the tables (default 3)")
    f.add_argument("--dim", action="append", metavar="NAME=VALUE",
                   help="value of a symbolic input dim (repeatable; default 1)")
    f.add_argument("--inputs", metavar="NPZ", help="inputs from an .npz (arrays by input name, or 'input:<name>' as "
                                                 "bench/zoo stores them) instead of random ones")
    f.add_argument("--no-ort", action="store_true", help="profile onnxep only")
    f.add_argument("--top", type=int, default=10, help="how many of onnxep's kernels to list (default 10)")
    f.add_argument("--json", metavar="OUT", help="also write the tables to OUT as JSON")
    f.add_argument("--trace-dir", metavar="DIR", help="keep the raw traces (and onnxruntime's optimized model) in DIR")
    f.add_argument("--config", action="append", metavar="KEY=VALUE",
                   help="onnxep session config entry (repeatable), e.g. onnxep.fallback_op_types=Softmax")
    f.add_argument("--decode", action="store_true",
                   help="the runs are a greedy decoding loop of a decoder with past (each step's present outputs "
                        "fed back)")
    f.add_argument("--past", type=int, default=128,
                   help="--decode without --inputs: tokens of seeded random past at the first step (default 128)")
    r = sub.add_parser("run", help="run a model on random inputs")
    r.add_argument("model")
    r.add_argument("--repeat", type=int, default=1)
    c = sub.add_parser("check", help="show which backend runs each node")
    c.add_argument("model")
    sub.add_parser("info", help="kernel variant and threads")
    args = p.parse_args(argv)
    cmd = args.cmd or "bench"
    if cmd == "bench":
        if getattr(args, "precision", "fp32") != "fp32":
            from onnxep import _bench
            _bench.SESSION_CONFIG["onnxep.compute_precision"] = args.precision
        suite = getattr(args, "suite", "light")
        if suite == "models":
            from onnxep._bench import bench_models
            rows = bench_models(threads=args.threads, warmup=args.warmup, repeat=args.repeat)
        elif suite == "zoo":
            from onnxep._zoo import bench_zoo
            try:
                rows = bench_zoo(args.dir, args.only, args.exporter, threads=args.threads, warmup=args.warmup,
                                 repeat=args.repeat)
            except FileNotFoundError as e:
                print(e, file=sys.stderr)
                return 2
        else:
            from onnxep._bench import bench
            rows = bench(getattr(args, "models", None) or None, threads=getattr(args, "threads", 0),
                         warmup=getattr(args, "warmup", 3), repeat=getattr(args, "repeat", 10),
                         use_ort=not getattr(args, "no_ort", False), weights=getattr(args, "weights", "random"))
        if getattr(args, "json", None) or getattr(args, "plot", None):
            doc = _bench_doc(suite, args, rows)
            if args.json:
                _write_json(args.json, doc)
            if args.plot:
                from onnxep._report import plot
                print(f"plot: {plot(doc, args.plot)}")
        return 1 if any(r.get("check", "").startswith(("MISMATCH", "ERROR")) for r in rows) else 0
    if cmd == "profile":
        return _profile.main(args)
    import onnxep
    if cmd == "info":
        onnxep.show_config()
        return 0
    if cmd == "run":
        from onnxep._bench import random_feeds
        sess = onnxep.InferenceSession(args.model)
        feeds = random_feeds(sess)
        for _ in range(max(args.repeat, 1)):
            t0 = time.perf_counter()
            outs = sess.run(None, feeds)
            dt = time.perf_counter() - t0
        for o, v in zip(sess.get_outputs(), outs):
            print(f"{o.name}: {getattr(v, 'dtype', type(v).__name__)} {getattr(v, 'shape', '')}")
        print(f"latency {dt * 1e3:.2f} ms")
        return 0
    if cmd == "check":
        sess = onnxep.InferenceSession(args.model)
        counts = collections.Counter(sess.node_assignment.values())
        print(", ".join(f"{k}: {v} nodes" for k, v in sorted(counts.items())))
        for plan in sess.plans:
            print(f"  {plan.backend_name:<10} {plan.describe()}")
        return 0
    p.print_help()
    return 2


def _bench_doc(suite, args, rows) -> dict:
    """The bench rows with what produced them: versions, ISA, CPU, threads, run counts."""
    import platform

    import numpy as np

    import onnxep
    from onnxep import _kernels
    try:
        import onnxruntime
        ort_version = onnxruntime.__version__
    except ImportError:
        ort_version = None
    doc = {"suite": suite, "onnxep": onnxep.__version__, "isa": _kernels.ISA, "onnxruntime": ort_version,
           "numpy": np.__version__, "python": platform.python_version(), "machine": platform.machine(),
           "cpu": _cpu_name(), "cores": __import__("os").cpu_count(), "threads": args.threads,
           "warmup": args.warmup, "repeat": args.repeat, "rows": rows}
    if any("openvino_ms" in r for r in rows):
        import openvino
        doc["openvino"] = openvino.__version__.split("-")[0]
    return doc


def _write_json(path, doc) -> None:
    import json

    with open(path, "w") as f:
        json.dump(doc, f, indent=1, default=str)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor()


if __name__ == "__main__":
    sys.exit(main())
