"""bf16 onnxep (session config onnxep.compute_precision=bf16) against onnxruntime's fp32 time on the zoo models, and
OpenVINO's bf16 (INFERENCE_PRECISION_HINT=bf16) when openvino is installed; cosine of each run's first output against
fp32 onnxep. Issue 29's must-show: at 2 threads, geomean bf16 onnxep / ort fp32 <= 0.5, cosine >= 0.999.

    python bench/zoo/bf16.py --threads 2 --repeat 20 --only resnet mobilenet_v2 convnext vit bert minilm_sentence

Alternating rounds of 5 runs (onnxep fp32, onnxep bf16, ort fp32[, openvino bf16]), each after a settle (_bench.py
_alternate), medians. bf16 runs in bf16 only where the CPU has AVX512_BF16 (vdpbf16ps); elsewhere the option falls
back to fp32 (printed)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from onnxep._bench import _alternate
from onnxep._zoo import DEFAULT_DIR, load_case, openvino_runner, ort_session, read_index, select


def _cos(a, b) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / d) if d else float(a.size == b.size and np.array_equal(a, b))


def _onnxep(path, threads, precision):
    import onnxep
    so = onnxep.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    so.add_session_config_entry("onnxep.compute_precision", precision)
    return onnxep.InferenceSession(str(path), so)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--only", nargs="+", metavar="NAME")
    ap.add_argument("--exporter", choices=("dynamo", "torchscript"))
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    from onnxep import _kernels
    folder = args.dir.expanduser()
    entries = [e for e in select(read_index(folder), args.only, args.exporter) if e["status"] == "ok"]
    print(f"bf16 kernel: {_kernels.bgemm_kernel() if _kernels.bgemm_hw() else 'none (option falls back to fp32)'}; "
          f"{args.threads} thread(s), {args.repeat} runs, medians\n")
    print("| model | bf16 ms | fp32 ms | ort fp32 ms | bf16/ort | fp32/ort | cos bf16 vs fp32 | openvino bf16/ort |")
    print("|---|---|---|---|---|---|---|---|")
    ratios = []
    for e in entries:
        path, feeds, _ = load_case(folder, e)
        runners = {"fp32": _onnxep(path, args.threads, "fp32"), "bf16": _onnxep(path, args.threads, "bf16")}
        runners = {k: (lambda f, s=s: s.run(None, f)) for k, s in runners.items()}
        o = ort_session(path, args.threads)
        runners["ort"] = lambda f: o.run(None, f)
        ov = openvino_runner(path, args.threads, "bf16")
        if ov is not None:
            runners["ov"] = ov
        first = {k: r(feeds)[0] for k, r in runners.items()}
        # alternating rounds after a settle (onnxep/_bench.py _alternate): a call right after another library's
        # leaves it a core short while that library's workers still spin
        med = _alternate([lambda r=r: r(feeds) for r in runners.values()], 3, args.repeat, 5, 0.05)
        ms = {k: 1e3 * t for k, t in zip(runners, med)}
        ratios.append(ms["bf16"] / ms["ort"])
        ovr = f"{ms['ov'] / ms['ort']:.2f} (cos {_cos(first['ov'], first['fp32']):.5f})" if "ov" in ms else "-"
        print(f"| {e['name']} | {ms['bf16']:.2f} | {ms['fp32']:.2f} | {ms['ort']:.2f} | {ms['bf16'] / ms['ort']:.2f} "
              f"| {ms['fp32'] / ms['ort']:.2f} | {_cos(first['bf16'], first['fp32']):.6f} | {ovr} |", flush=True)
    if ratios:
        print(f"\ngeomean bf16 onnxep / ort fp32: {float(np.exp(np.mean(np.log(ratios)))):.2f} over {len(ratios)} "
              f"models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
