"""Session creation: cold (load, optimize, pack, hash) vs reloading the EPContext model (seed 003), fresh processes.

    python bench/bench_epcontext.py [--repeat 5] [--only resnet50 vgg19] [--weights random|shipped]

For each light model (seeded random weights of the same shapes by default, onnxep/_light.py; `--weights shipped`: the
files' own ConstantOfShape(0.02)): the EPContext model is written once per embed mode (0: side file, 1: embedded) into
a temporary folder; then `repeat` rounds, each timing InferenceSession(...) alone in a fresh process for: onnxruntime
on the original model, onnxep on the original model (cold), on the embed_mode=0 model and on the embed_mode=1 model --
interleaved, so machine noise hits all alike. Prints the median of each, the reload / cold ratio (issue 5's target:
<= 0.2) and each onnxep time over onnxruntime's. Not a test: nothing about speed is asserted.
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
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--only", nargs="*", default=["resnet50", "vgg19"])
    ap.add_argument("--weights", choices=["random", "shipped"], default="random")
    args = ap.parse_args()
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


if __name__ == "__main__":
    main()
