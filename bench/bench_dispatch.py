"""Dispatch cost beside onnxruntime: per-node cost on a chain of Add nodes and per-run cost of a one-node model.

    python bench/bench_dispatch.py                  # 200-Add chain on [1, 16], 1 thread, no graph optimizations
    python bench/bench_dispatch.py --nodes 400 --rounds 15

Both libraries run the same models with graph optimizations off and 1 intra-op thread, in alternating rounds (a
pause between them: worker threads spin after a call); each round times `--runs` calls and keeps the median of its
calls; the figure is the median over rounds after a warm-up. Per node = (chain run - one-node run) / (nodes - 1), so
the per-run overhead cancels; per run = the one-node model's run.

Measured (branch threads, the per-signature fast path of run(): session._FastRun; same VM, busy, default
arguments): one-node run onnxep 8.35 us, onnxruntime 10.11 us (0.83x; before it 11.56 vs 10.24, 1.13x); per node
0.035 vs 0.776 us.
Earlier (branch runloop, 2-vCPU VM shared with other jobs, default arguments): per node onnxep 0.031 us, onnxruntime
0.783 us; one-node run onnxep 12.0 us, onnxruntime 10.45 us (1.15x). ONNXEP_COMPILED_RUNS=0 (the Python loop):
5.5 us per node, 13.6 us per run.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def chain_model(n: int, width: int = 16) -> onnx.ModelProto:
    """y = ((x + c) + c) ... + c, n Add nodes on a [1, width] float tensor (c a constant initializer)."""
    nodes = []
    prev = "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        nodes.append(helper.make_node("Add", [prev, "c"], [out], name=f"add{i}"))
        prev = out
    c = numpy_helper.from_array(np.full((1, width), 0.5, np.float32), "c")
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], [c])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def sessions(model):
    import onnxruntime as ort
    import onnxep
    data = model.SerializeToString()
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    s_ort = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    eo = onnxep.SessionOptions()
    eo.graph_optimization_level = onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL
    eo.intra_op_num_threads = 1
    s_ep = onnxep.InferenceSession(data, eo)
    return {"onnxruntime": s_ort, "onnxep": s_ep}


def time_calls(sess, feeds, runs: int) -> float:
    """Median seconds of one run over `runs` calls."""
    ts = []
    run = sess.run
    for _ in range(runs):
        t0 = time.perf_counter()
        run(None, feeds)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--width", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--runs", type=int, default=400)
    ap.add_argument("--pause", type=float, default=0.05, help="seconds between libraries")
    args = ap.parse_args(argv)
    x = {"x": np.random.default_rng(0).standard_normal((1, args.width)).astype(np.float32)}
    chain, one = sessions(chain_model(args.nodes, args.width)), sessions(chain_model(1, args.width))
    for name in chain:                       # same answers, and warm-up
        want = chain["onnxruntime"].run(None, x)[0]
        got = chain[name].run(None, x)[0]
        assert np.allclose(got, want, rtol=1e-5, atol=1e-5), name
        for _ in range(50):
            chain[name].run(None, x)
            one[name].run(None, x)
    per = {name: {"chain": [], "one": []} for name in chain}
    for r in range(args.rounds):
        order = list(chain) if r % 2 == 0 else list(chain)[::-1]
        for name in order:
            per[name]["chain"].append(time_calls(chain[name], x, args.runs))
            time.sleep(args.pause)
            per[name]["one"].append(time_calls(one[name], x, args.runs))
            time.sleep(args.pause)
    res = {}
    for name, d in per.items():
        c, o = statistics.median(d["chain"]), statistics.median(d["one"])
        res[name] = ((c - o) / (args.nodes - 1) * 1e6, o * 1e6, c * 1e6)
    print(f"{args.nodes}-Add chain on [1, {args.width}] float32, 1 thread, no graph optimizations; "
          f"median of {args.rounds} alternating rounds x {args.runs} runs")
    print(f"{'library':<12} {'per node (us)':>14} {'one-node run (us)':>18} {'chain run (us)':>15}")
    for name, (pn, o, c) in res.items():
        print(f"{name:<12} {pn:>14.3f} {o:>18.2f} {c:>15.1f}")
    ep, ort_ = res["onnxep"], res["onnxruntime"]
    print(f"ratio onnxep / onnxruntime: per node {ep[0] / ort_[0]:.2f}x, per run {ep[1] / ort_[1]:.2f}x")
    return res


if __name__ == "__main__":
    main()
