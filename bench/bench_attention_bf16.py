"""The fused attention kernel alone, fp32 against bf16 operands (onnxep.compute_precision=bf16: _native/attention.h
onnxep_atb_rows), 1 thread, thread CPU time per call (median of alternating rounds after a warm-up), by shape class:
queries = keys = S, H heads of head dim Dh read in place from (S, H * Dh) rows as exported models lay them out, no
mask / an additive key-padding mask / a causal bool mask. Prints the ratio bf16 / fp32 and the bf16 GFLOP/s.

    python bench/bench_attention_bf16.py [--seq 16 32 ...] [--dh 32 64 ...] [--heads 12] [--rounds 7]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's onnxep first
from onnxep import _kernels  # noqa: E402


def _offs(n, step):
    return np.arange(n, dtype=np.int64) * step


def case(S, H, Dh, mask, rng):
    q, k, v = (rng.standard_normal((S, H, Dh)).astype(np.float32) for _ in range(3))
    y = np.empty((S, H, Dh), np.float32)
    offs = [_offs(H, Dh)] * 4
    masks, kinds = (), []
    if mask == "pad":
        m = np.where(rng.uniform(size=S) < 0.2, -1e4, 0.0).astype(np.float32)
        masks, kinds = (m,), [(0, 1)]
        offs.append(np.zeros(H * S, np.int64))
    elif mask == "causal":
        m = np.tril(np.ones((S, S), bool))
        masks, kinds = (m,), [(1, 1)]
        offs.append(np.tile(_offs(S, S), H))
    st = H * Dh
    params = [H, S, S, Dh, Dh, st, 1, 1, st, st, 1, st, 1, 0, len(masks), 0]
    for kind, cs in kinds:
        params += [kind, cs]
    fparams = np.array([Dh ** -0.5] + [-np.inf] * len(masks), np.float32)
    offs = np.concatenate(offs)

    def run(bf16):
        params[15] = int(bf16)
        p = np.array(params, np.int64)
        _kernels.attention_masked_f32(q, k, v, y, offs, masks, p, fparams, 1)
    return run


def timed(fn, reps):
    t0 = time.thread_time()
    for _ in range(reps):
        fn()
    return (time.thread_time() - t0) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seq", type=int, nargs="+", default=[16, 32, 64, 128, 197, 256, 512])
    ap.add_argument("--dh", type=int, nargs="+", default=[32, 64, 80, 128])
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--masks", nargs="+", default=["none", "pad", "causal"])
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"isa {_kernels.__name__} bgemm {_kernels.bgemm_kernel()} dp_ratio {_kernels.bgemm_dp_ratio():.2f}")
    print(f"{'S':>4} {'Dh':>4} {'mask':>6} {'fp32 us':>9} {'bf16 us':>9} {'bf16/fp32':>9} {'bf16 GF/s':>9}")
    for S in a.seq:
        for Dh in a.dh:
            for mask in a.masks:
                run = case(S, a.heads, Dh, mask, rng)
                flops = 4.0 * a.heads * S * S * Dh
                reps = max(1, int(2e8 / flops))
                run(False), run(True)
                tf, tb = [], []
                for _ in range(a.rounds):
                    tf.append(timed(lambda: run(False), reps))
                    tb.append(timed(lambda: run(True), reps))
                f, b = float(np.median(tf)), float(np.median(tb))
                print(f"{S:4d} {Dh:4d} {mask:>6} {f * 1e6:9.1f} {b * 1e6:9.1f} {b / f:9.3f} {flops / b / 1e9:9.1f}",
                      flush=True)


if __name__ == "__main__":
    main()
