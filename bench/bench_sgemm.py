"""SGEMM throughput: onnxep's sgemm against numpy.matmul (OpenBLAS), side by side in one run.

    python bench/bench_sgemm.py [--threads 1 2] [--rounds 3] [--shapes 256 512 3136x576x64 ...] [--isa avx512]

Shapes are M x K x N:  C (M x N) = A (M x K) @ B (K x N).  A square n means n x n x n.
- Squares: A stored M x K (row-major), as Gemm / MatMul pass it.
- CNN shapes (3136x576x64: a 3x3 conv over 64 channels at 56x56; 196x4608x512: 3x3 over 512 channels at 14x14):
  A stored K x M (the im2col buffer, as onnxep's conv passes it: trans_a), for both libraries (numpy gets the
  transposed view A.T, which OpenBLAS reads as a transposed operand).
Columns:
- onnxep packed: sgemm_packed_f32 with B pre-packed once (as the ops run with a constant weight).
- onnxep f32:    sgemm_f32, packing B inside every call.
- OB-SkylakeX:   numpy.matmul with OPENBLAS_CORETYPE=SkylakeX (AVX-512 kernels) and OPENBLAS_NUM_THREADS=threads.
- OB-default:    numpy.matmul with numpy's bundled OpenBLAS left to detect the CPU itself.
Every library runs in its own subprocess (the environment must be set before numpy loads OpenBLAS), one after another
with a pause between them (OpenBLAS and OpenMP workers spin for a while after a call). Shape by shape, each round runs
every library once, so the libraries of one row see the same machine load; the reported time is the median over the
rounds of each run's per-call median (after warm-up).
GFLOP/s = 2*M*N*K / time. Ratios are onnxep packed / OpenBLAS.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SHAPES = ["256", "512", "1024", "2048", "3136x576x64", "196x4608x512"]
CNN_SHAPES = {"3136x576x64", "196x4608x512"}


def parse_shape(s):
    parts = [int(x) for x in s.lower().split("x")]
    if len(parts) == 1:
        parts *= 3
    M, K, N = parts
    return M, K, N


def _time(fn, flops, budget=0.4):
    """Median seconds per call after warm-up; enough calls for ~budget seconds, at least 5."""
    fn()
    fn()
    t0 = time.perf_counter()
    fn()
    est = max(time.perf_counter() - t0, 1e-6)
    reps = max(5, min(200, int(budget / est)))
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def worker(lib, threads, shapes, isa):
    """Runs in a subprocess: prints {shape: seconds} as JSON."""
    import numpy as np

    rng = np.random.default_rng(0)
    out = {}
    if lib.startswith("onnxep"):
        sys.path.insert(0, ROOT)
        import importlib
        from onnxep import _kernels
        mod = importlib.import_module(f"onnxep._kernels_{isa or _kernels.ISA}")
    for s in shapes:
        M, K, N = parse_shape(s)
        trans_a = s in CNN_SHAPES
        A = rng.uniform(-1, 1, (K, M) if trans_a else (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        C = np.empty((M, N), np.float32)
        if lib == "onnxep-packed":
            bp = np.empty(mod.sgemm_pack_b_size(K, N), np.float32)
            mod.sgemm_pack_b(B, False, bp)
            fn = lambda: mod.sgemm_packed_f32(trans_a, 1.0, A, bp, N, 0.0, C, nthreads=threads)  # noqa: E731
        elif lib == "onnxep-f32":
            fn = lambda: mod.sgemm_f32(trans_a, False, 1.0, A, B, 0.0, C, threads)  # noqa: E731
        else:
            Aop = A.T if trans_a else A
            fn = lambda: np.matmul(Aop, B, out=C)  # noqa: E731
        out[s] = _time(fn, 2.0 * M * N * K)
    print(json.dumps(out))


LIBS = {
    # name: environment overrides (OPENBLAS_NUM_THREADS is set per run)
    "onnxep-packed": {},
    "onnxep-f32": {},
    "OB-SkylakeX": {"OPENBLAS_CORETYPE": "SkylakeX"},
    "OB-default": {},
}


def run(lib, threads, shapes, isa):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.update(LIBS[lib])
    env["OPENBLAS_NUM_THREADS"] = str(threads if lib.startswith("OB") else 1)
    env["OMP_NUM_THREADS"] = str(threads)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", lib, "--threads", str(threads),
           "--shapes", *shapes] + (["--isa", isa] if isa else [])
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    if res.returncode != 0:
        raise RuntimeError(f"{lib} worker failed:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--shapes", nargs="+", default=DEFAULT_SHAPES)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pause", type=float, default=0.5, help="seconds between libraries")
    ap.add_argument("--isa", default=None, help="onnxep variant (default: the one chosen at import)")
    ap.add_argument("--libs", nargs="+", default=list(LIBS))
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.threads[0], args.shapes, args.isa)
        return
    for th in args.threads:
        print(f"\nthreads={th}  GFLOP/s (median of {args.rounds} rounds)   shapes M x K x N")
        head = f"{'shape':>14}" + "".join(f"{lib:>15}" for lib in args.libs)
        ratio_cols = [lib for lib in ("OB-SkylakeX", "OB-default") if lib in args.libs and "onnxep-packed" in args.libs]
        head += "".join(f"{'packed/' + lib[3:]:>18}" for lib in ratio_cols)
        print(head, flush=True)
        for s in args.shapes:  # one shape at a time, libraries interleaved: all see the same machine load
            times = {lib: [] for lib in args.libs}
            for _ in range(args.rounds):
                for lib in args.libs:
                    times[lib].append(run(lib, th, [s], args.isa)[s])
                    time.sleep(args.pause)
            M, K, N = parse_shape(s)
            g = {lib: 2.0 * M * N * K / statistics.median(times[lib]) / 1e9 for lib in args.libs}
            row = f"{s:>14}" + "".join(f"{g[lib]:>15.1f}" for lib in args.libs)
            row += "".join(f"{g['onnxep-packed'] / g[lib]:>18.3f}" for lib in ratio_cols)
            print(row, flush=True)


if __name__ == "__main__":
    main()
