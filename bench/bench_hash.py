"""XXH64 throughput: onnxep's nogil Cython xxh64 beside the xxhash package's, side by side in one run.

    python bench/bench_hash.py [--repeat N] [--isa all|avx512|avx2|generic]

For each size (100 MB, 1 MB, 4 KB) prints the GB/s of both (median over `repeat` timed rounds after a warm-up;
rounds alternate between the two so machine noise hits both alike) and their ratio onnxep / xxhash (> 1: onnxep
faster). Every result is checked equal to xxhash's first. Not a test: no assertion on speed.
"""
import argparse
import importlib
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's onnxep first

import xxhash  # noqa: E402

from onnxep import _kernels  # noqa: E402

SIZES = [("100 MB", 100 * 10**6), ("1 MB", 10**6), ("4 KB", 4096)]


def _time_round(fn, data, calls):
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(data)
    return (time.perf_counter() - t0) / calls


def bench(variants, repeat):
    rng = np.random.default_rng(0)
    print(f"onnxep {_kernels.__file__}  default ISA {_kernels.ISA}; xxhash {xxhash.VERSION}")
    print(f"{'size':>7} {'impl':>16} {'GB/s':>8} {'ratio':>7}")
    ratios = {}
    for label, n in SIZES:
        data = rng.integers(0, 256, n, dtype=np.uint8)
        want = xxhash.xxh64_intdigest(data)
        fns = {"xxhash": xxhash.xxh64_intdigest}
        for isa, mod in variants.items():
            fns[f"onnxep[{isa}]"] = mod.xxh64
        for name, fn in fns.items():
            if fn(data) != want:
                raise SystemExit(f"{name} disagrees with xxhash.xxh64_intdigest on {label}")
        calls = max(1, int(2e8 // n))           # ~0.2 GB hashed per timed round and implementation
        for fn in fns.values():                  # warm-up (page faults, caches, clocks)
            _time_round(fn, data, calls)
        times = {name: [] for name in fns}
        for _ in range(repeat):
            for name, fn in fns.items():
                times[name].append(_time_round(fn, data, calls))
        base = statistics.median(times["xxhash"])
        for name in fns:
            med = statistics.median(times[name])
            ratio = base / med
            ratios[(label, name)] = ratio
            print(f"{label:>7} {name:>16} {n / med / 1e9:8.2f} {ratio:7.3f}")
    return ratios


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7, help="timed rounds per size and implementation (median)")
    ap.add_argument("--isa", default=None, help="'all' or one variant; default: the variant chosen at import")
    args = ap.parse_args(argv)
    if args.isa == "all":
        names = list(_kernels.AVAILABLE)
    else:
        names = [args.isa or _kernels.ISA]
    variants = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in names}
    bench(variants, args.repeat)


if __name__ == "__main__":
    main()
