"""Conv latency: onnxep beside onnxruntime on single-node Conv models, side by side in one run.

    python bench/bench_conv.py [--threads 1 2] [--repeat 5] [--runs 20] [--only NAME ...]

Each model is one Conv node built with onnx.helper, weights and bias as initializers (so both libraries pre-pack).
For every thread count and shape: both sessions are created, checked to agree with each other, warmed up, then timed in
alternating rounds (onnxep, pause, onnxruntime, pause, ...) so machine noise hits both alike; a round is the median
latency of `runs` calls after a few untimed ones (more calls where `runs` would last under 20 ms: on a 2-vCPU VM
the first milliseconds after a pause run slow, for both libraries -- 20 calls of a 0.1 ms depthwise conv measured
1.1-1.3x where 200 measured 0.69x), and the table shows the median over `repeat` rounds. A short pause between libraries lets
OpenMP / onnxruntime worker threads stop spinning. Not a test: nothing about speed is asserted.
Columns: onnxep ms, ort ms, ratio onnxep/ort (< 1: onnxep faster), GFLOP/s of each (2 * MACs / time).
"""
import argparse
import math
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's onnxep first

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnxep  # noqa: E402
from onnxep import _kernels  # noqa: E402

# name, x shape, w shape, attributes
SHAPES = [
    ("conv3x3 1x64x56x56->64 p1", (1, 64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("dw3x3 1x128x56x56 p1", (1, 128, 56, 56), (128, 1, 3, 3), {"group": 128, "pads": [1, 1, 1, 1]}),
    ("dw3x3 s2 1x128x56x56 p1", (1, 128, 56, 56), (128, 1, 3, 3),
     {"group": 128, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ("conv1x1 1x256x56x56->64", (1, 256, 56, 56), (64, 256, 1, 1), {}),
    ("conv7x7 s2 1x3x224x224->64 p3", (1, 3, 224, 224), (64, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    # the zoo's tiny convnets (64x64 inputs): a 16-channel stem (direct path: one AVX-512 vector of output channels
    # per k, bench/NOTES.md "Tiny zoo convnets"), and 16 against 32 output channels at one K (the auto path)
    ("tiny stem7x7 s2 1x3x64x64->16 p3", (1, 3, 64, 64), (16, 3, 7, 7), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ("tiny conv3x3 1x64x16x16->16 p1", (1, 64, 16, 16), (16, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("tiny conv3x3 1x64x16x16->32 p1", (1, 64, 16, 16), (32, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
]
PAUSE = 0.15  # seconds between libraries: onnxruntime 1.32 workers were seen spinning ~45 ms after a run
MIN_ROUND_S = 0.02   # seconds of calls per round, at least (runs grows for short convs, the same for both)


def conv_out_shape(xs, ws, attrs):
    """(N, Cout, *spatial) of a Conv with explicit pads and strides (what the models here use)."""
    nsp = len(xs) - 2
    pads = attrs.get("pads", [0] * 2 * nsp)
    strides = attrs.get("strides", [1] * nsp)
    return [xs[0], ws[0]] + [(i + pads[k] + pads[k + nsp] - ws[2 + k]) // strides[k] + 1
                             for k, i in enumerate(xs[2:])]


def conv_model(xs, ws, attrs):
    rng = np.random.default_rng(0)
    W = rng.uniform(-1, 1, ws).astype(np.float32)
    B = rng.uniform(-1, 1, ws[0]).astype(np.float32)
    node = helper.make_node("Conv", ["X", "W", "B"], ["Y"], name="conv", **attrs)
    g = helper.make_graph([node], "conv", [helper.make_tensor_value_info("X", TensorProto.FLOAT, xs)],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, conv_out_shape(xs, ws, attrs))],
                          [numpy_helper.from_array(W, "W"), numpy_helper.from_array(B, "B")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(m)
    return m.SerializeToString()


def conv_flops(xs, ws, ys):
    """2 * multiply-adds: every output element takes Cin/group * kernel-size of them."""
    return 2.0 * np.prod(ys) * np.prod(ws[1:])


def _round(sess, feeds, runs, warm=5):
    """Median latency of `runs` calls, after `warm` untimed ones: the pause before a round lets the machine cool
    (idle vCPUs halt, clocks drop, a library's sleeping workers need a wake-up), and both libraries get the same
    re-warm."""
    for _ in range(warm):
        sess.run(None, feeds)
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def measure(name, xs, ws, attrs, threads, repeat, runs):
    model = conv_model(xs, ws, attrs)
    feeds = {"X": np.random.default_rng(1).uniform(-1, 1, xs).astype(np.float32)}
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = threads
    ep = onnxep.InferenceSession(model, so)
    oso = ort.SessionOptions()
    oso.intra_op_num_threads = threads
    oso.inter_op_num_threads = 1
    oso.log_severity_level = 3
    rt = ort.InferenceSession(model, oso, providers=["CPUExecutionProvider"])
    y_ep = ep.run(None, feeds)[0]
    y_rt = rt.run(None, feeds)[0]
    if y_ep.shape != y_rt.shape or not np.allclose(y_ep, y_rt, rtol=1e-4, atol=1e-3 * np.abs(y_rt).max()):
        raise SystemExit(f"{name}: onnxep and onnxruntime disagree (max |diff| {np.abs(y_ep - y_rt).max()})")
    fallback = [n for n, b in ep.node_assignment.items() if b != "cpu"]
    warm = []
    for _ in range(3):                         # warm-up: page faults, caches, clocks, thread pools
        warm.append(_round(ep, feeds, max(2, runs // 4)))
        warm.append(_round(rt, feeds, max(2, runs // 4)))
    # a round lasts at least MIN_ROUND_S for both libraries (the same number of calls): after the pause a 2-vCPU VM
    # takes milliseconds to run at speed again, which 20 calls of a 0.1 ms conv do not outlast
    runs = max(runs, math.ceil(MIN_ROUND_S / max(min(warm), 1e-6)))
    t_ep, t_rt = [], []
    for _ in range(repeat):
        t_ep.append(_round(ep, feeds, runs))
        time.sleep(PAUSE)
        t_rt.append(_round(rt, feeds, runs))
        time.sleep(PAUSE)
    fl = conv_flops(xs, ws, y_ep.shape)
    a, b = statistics.median(t_ep), statistics.median(t_rt)
    return a, b, fl, fallback


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=5, help="timed rounds per library (median)")
    ap.add_argument("--runs", type=int, default=20, help="calls per round (median)")
    ap.add_argument("--only", nargs="*", default=None, help="substrings of shape names to run")
    args = ap.parse_args(argv)
    print(f"onnxep {onnxep.__file__} ISA {_kernels.ISA}; onnxruntime {ort.__version__}")
    print(f"{'shape':<32} {'thr':>3} {'onnxep ms':>10} {'ort ms':>9} {'ratio':>6} {'ep GF/s':>8} {'ort GF/s':>9}")
    for threads in args.threads:
        for name, xs, ws, attrs in SHAPES:
            if args.only and not any(s in name for s in args.only):
                continue
            a, b, fl, fallback = measure(name, xs, ws, attrs, threads, args.repeat, args.runs)
            note = f"  (fallback: {fallback})" if fallback else ""
            print(f"{name:<32} {threads:>3} {a * 1e3:10.3f} {b * 1e3:9.3f} {a / b:6.2f} {fl / a / 1e9:8.1f} "
                  f"{fl / b / 1e9:9.1f}{note}", flush=True)


if __name__ == "__main__":
    main()
