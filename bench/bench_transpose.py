"""Transpose latency: onnxep's kernel (`_kernels.transpose_copy`) beside numpy copyto and onnxruntime in one run.

    python bench/bench_transpose.py [--threads 1 2] [--repeat 5] [--runs 20]

Shapes: the NCHW <-> NHWC layout changes, (0,2,3,1) and (0,3,1,2), of 1x64x112x112 and 1x256x56x56 float32 (3.2 MB).
For every thread count and case: outputs checked to agree, warm-up, then rounds alternating kernel / numpy / ort with a
short pause between libraries; a round is the median of `runs` calls, the table shows the median over `repeat`
rounds. numpy `np.copyto(y, x.transpose(perm))` is single-threaded whatever the thread count. onnxruntime runs a
one-node Transpose model (intra_op_num_threads = threads), so its time includes a session.run call (~10 us).
Columns: ms of each, ratio kernel / ort (< 1: onnxep faster), and the kernel's GB/s (bytes read + written / time).
Not a test: nothing about speed is asserted.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's onnxep first

import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from onnxep import _kernels  # noqa: E402

CASES = [((1, 64, 112, 112), (0, 2, 3, 1)), ((1, 64, 112, 112), (0, 3, 1, 2)),
         ((1, 256, 56, 56), (0, 2, 3, 1)), ((1, 256, 56, 56), (0, 3, 1, 2))]
PAUSE = 0.05


def transpose_model(shape, perm):
    out = [shape[p] for p in perm]
    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=list(perm))], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def median_ms(fn, runs):
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    print(f"onnxep variant {_kernels.ISA}, onnxruntime {ort.__version__}, numpy {np.__version__}")
    print(f"{'case':34s} {'thr':>3s} {'onnxep ms':>9s} {'numpy ms':>9s} {'ort ms':>8s} {'ep/ort':>6s} {'GB/s':>6s}")
    for nt in args.threads:
        for shape, perm in CASES:
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            want = x.transpose(perm)
            y = np.empty(want.shape, np.float32)
            yn = np.empty_like(y)
            xb, yb = x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8)
            so = ort.SessionOptions()
            so.intra_op_num_threads = nt
            sess = ort.InferenceSession(transpose_model(shape, perm), so, providers=["CPUExecutionProvider"])

            def k():
                _kernels.transpose_copy(xb, shape, perm, 4, yb, nt)

            def n():
                np.copyto(yn, x.transpose(perm))

            def o():
                return sess.run(None, {"x": x})

            k()
            assert np.array_equal(y, want) and np.array_equal(o()[0], want)
            times = {"k": [], "n": [], "o": []}
            for _ in range(args.repeat):
                for name, fn in (("k", k), ("n", n), ("o", o)):
                    fn()
                    times[name].append(median_ms(fn, args.runs))
                    time.sleep(PAUSE)
            mk, mn, mo = (statistics.median(times[c]) for c in "kno")
            gbs = 2 * x.nbytes / (mk * 1e-3) / 1e9
            print(f"{str(shape) + ' ' + str(perm):34s} {nt:3d} {mk:9.3f} {mn:9.3f} {mo:8.3f} {mk / mo:6.2f} {gbs:6.1f}")


if __name__ == "__main__":
    main()
