"""The compiled run loop (onnxep/backends/cpu/runloop.py, onnxep/_k_runloop.pxi).

Oracles: the session's own Python run loop (its first run records the memory plan and runs in Python; compiled runs
of the same kernels must give the same bits), the same model with ONNXEP_COMPILED_RUNS-equivalent switched off
(device.COMPILED_RUNS), and onnxruntime (tests._util.run_ort) for closeness.
"""
from __future__ import annotations


import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep.backends.cpu import device
from onnxep.backends.cpu.runloop import Compiled
from tests._util import assert_outputs_match, fallback_options, make_model, run_ort, run_threads


def _programs(sess):
    """Every Compiled program the session's arena pool holds."""
    out = []
    for per_plan in sess._executor.memory._pool._views.values():
        for views in per_plan.values():
            out.extend(p for p in getattr(views, "programs", {}).values() if isinstance(p, Compiled))
    return out


def _transformer_block():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 8, 16)).astype(np.float32)
    inits = {
        "W": (rng.standard_normal((16, 16)) * 0.3).astype(np.float32),
        "b": rng.standard_normal(16).astype(np.float32),
        "s2": np.float32(np.sqrt(2.0)).reshape(()),
        "one": np.float32(1.0).reshape(()),
        "half": np.float32(0.5).reshape(()),
        "g": rng.standard_normal(16).astype(np.float32),
        "beta": rng.standard_normal(16).astype(np.float32),
        "shape": np.array([2, 128], np.int64),
        "col": rng.standard_normal((8, 1)).astype(np.float32),
        "reps": np.array([1, 1], np.int64),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["h"]),
        helper.make_node("Div", ["h", "s2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["h", "e1"], ["he"]),
        helper.make_node("Mul", ["he", "half"], ["gelu"]),
        helper.make_node("Add", ["gelu", "x"], ["res"]),
        helper.make_node("LayerNormalization", ["res", "g", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("Sub", ["ln", "col"], ["sub"]),          # broadcast [2,8,16] - [8,1]
        helper.make_node("Reshape", ["sub", "shape"], ["flat"]),
        helper.make_node("Softmax", ["flat"], ["sm"], axis=-1),
        helper.make_node("Transpose", ["sm"], ["t0"], perm=[1, 0]),
        helper.make_node("Tile", ["t0", "reps"], ["t"]),          # a step that stays in Python
        helper.make_node("Mul", ["t", "t"], ["y"]),
        helper.make_node("Reshape", ["x", "shape"], ["xr"]),      # a view of the feed (patched per run)
        helper.make_node("Div", ["xr", "half"], ["y2"]),
    ]
    return make_model(nodes, {"x": x}, ["y", "y2", "ln"], initializers=inits), x


def spy_c_step(monkeypatch, cls):
    """Wraps cls.c_step: the returned list collects the step kind (the first item of each c_step answer, None for a
    Python step) of every node of cls the compiled run loop prepares."""
    kinds = []
    orig = cls.c_step

    def spy(self, ins, outs, nthreads):
        r = orig(self, ins, outs, nthreads)
        kinds.append(r[0] if r else None)
        return r
    monkeypatch.setattr(cls, "c_step", spy)
    return kinds


def check_c_step_on_off(monkeypatch, cls, model, feeds, kind, n_py_off, rtol, atol):
    """Compiled runs of model with cls's C step: every step compiled, each cls node a `kind` step, the Python loop's
    bits, close to onnxruntime (rtol, atol); with cls.c_step taken away: n_py_off Python steps (None: no C step left,
    so no compiled program; the Python loop runs the plan), the same bits."""
    kinds = spy_c_step(monkeypatch, cls)
    got, progs = compiled_vs_python(model, feeds)
    assert progs and all(p.n_py == 0 for p in progs), [(p.n_c, p.n_py) for p in progs]
    assert kinds and set(kinds) == {kind}, kinds
    for f, g in zip(feeds, got):
        assert_outputs_match(g, run_ort(model, f), rtol=rtol, atol=atol)
    monkeypatch.setattr(cls, "c_step", lambda self, ins, outs, nthreads: None)
    off, progs_off = compiled_vs_python(model, feeds)
    if n_py_off is None:
        assert not progs_off, [(p.n_c, p.n_py) for p in progs_off]
    else:
        assert progs_off and all(p.n_py == n_py_off for p in progs_off), [(p.n_c, p.n_py) for p in progs_off]
    for g, o in zip(got, off):
        for a, b in zip(g, o):
            np.testing.assert_array_equal(a, b)


def compiled_vs_python(model, feeds_list):
    """Run feeds_list twice through compiled runs and twice through the Python loop (device.COMPILED_RUNS off), 1
    thread: asserts equal bits (dtype, shape, values) and that only the first session compiled; returns (the compiled
    runs' outputs, the first session's programs)."""
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    got = [sess.run(None, f) for f in feeds_list + feeds_list]
    progs = _programs(sess)
    device.COMPILED_RUNS = False
    try:
        ref = onnxep.InferenceSession(model.SerializeToString(), so)
        want = [ref.run(None, f) for f in feeds_list + feeds_list]
        assert not _programs(ref)
    finally:
        device.COMPILED_RUNS = True
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    return got, progs


def test_compiled_runs_match_the_python_loop_bit_for_bit():
    model, x = _transformer_block()
    rng = np.random.default_rng(1)
    feeds = [{"x": x}] + [{"x": rng.standard_normal(x.shape).astype(np.float32)} for _ in range(4)]
    got, progs = compiled_vs_python(model, feeds)
    assert progs and progs[0].n_c >= 5 and progs[0].n_py >= 1, [(p.n_c, p.n_py) for p in progs]
    for f, g in zip(feeds, got[:len(feeds)]):
        assert_outputs_match(g, run_ort(model, f), rtol=1e-4, atol=1e-5)


def test_outputs_are_fresh_arrays_each_run():
    model, x = _transformer_block()
    sess = onnxep.InferenceSession(model.SerializeToString())
    outs = [sess.run(None, {"x": x}) for _ in range(4)]
    assert _programs(sess)
    a, b = outs[2], outs[3]
    for u, v in zip(a, b):
        assert not np.shares_memory(u, v)
        np.testing.assert_array_equal(u, v)
    a[0][...] = 7.0       # the user owns what run returns: writing it changes nothing of the next run
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], b[0])


def test_a_plan_mixing_fallback_and_python_steps():
    """A reference-backend node (Neg, forced) splits the cpu plans; both sides compile, results equal the oracle."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    c = rng.standard_normal(8).astype(np.float32)
    nodes = [helper.make_node("Add", ["x", "c"], ["a"]), helper.make_node("Mul", ["a", "a"], ["m"]),
             helper.make_node("Neg", ["m"], ["n"]), helper.make_node("Sub", ["n", "c"], ["s"]),
             helper.make_node("Div", ["s", "c"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], initializers={"c": c})
    sess = onnxep.InferenceSession(model.SerializeToString(), fallback_options("Neg"))
    for i in range(5):
        xi = (x + i).astype(np.float32)
        assert_outputs_match(sess.run(None, {"x": xi}), run_ort(model, {"x": xi}))
    assert len(_programs(sess)) == 2


def test_data_dependent_shapes_leave_the_compiled_path():
    """NonZero's output size depends on values, not on the signature: a compiled run whose Python step makes another
    shape finishes in Python (and the next runs capture again); every result matches onnxruntime."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["p"]), helper.make_node("NonZero", ["p"], ["nz"]),
             helper.make_node("Cast", ["nz"], ["f"], to=1), helper.make_node("Add", ["f", "one"], ["g"]),
             helper.make_node("Mul", ["g", "g"], ["y"])]
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal(16).astype(np.float32)
    model = make_model(nodes, {"x": x0}, ["y"], initializers={"zero": np.float32(0).reshape(()),
                                                            "one": np.float32(1).reshape(())})
    sess = onnxep.InferenceSession(model.SerializeToString())
    for i in range(12):
        xi = x0 if i < 4 else rng.standard_normal(16).astype(np.float32)
        assert_outputs_match(sess.run(None, {"x": xi}), run_ort(model, {"x": xi}))


def test_two_threads_each_get_their_own_program():
    model, x = _transformer_block()
    sess = onnxep.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(4)
    feeds = [rng.standard_normal(x.shape).astype(np.float32) for _ in range(6)]
    want = [sess.run(None, {"x": f}) for f in feeds]

    def work(k):
        for r in range(40):
            j = (r + k) % len(feeds)
            got = sess.run(None, {"x": feeds[j]})
            for a, b in zip(got, want[j]):
                np.testing.assert_array_equal(a, b)

    run_threads(work, 2)


@pytest.mark.parametrize("shape_b", [(16,), (1, 16), (3, 1), (3, 16), ()])
def test_binary_broadcasts(shape_b):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 16)).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32) + 2.0
    nodes = [helper.make_node(op, ["a", "b"], [f"o{op}"]) for op in ("Add", "Sub", "Mul", "Div")]
    model = make_model(nodes, {"a": a}, ["oAdd", "oSub", "oMul", "oDiv"], initializers={"b": b})
    sess = onnxep.InferenceSession(model.SerializeToString())
    for _ in range(4):
        got = sess.run(None, {"a": a})
    assert _programs(sess)
    want = [a + b, a - b, a * b, a / b]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w.astype(np.float32))


def _profiled_runs(model, feeds_list, compiled):
    """Profile one session over feeds_list (1 thread); per model_run event, its kernel events' (name, op, input
    shapes, output shapes) in order, plus the outputs."""
    import json
    import os
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 1
    so.enable_profiling = True
    device.COMPILED_RUNS = compiled
    try:
        sess = onnxep.InferenceSession(model.SerializeToString(), so)
        outs = [sess.run(None, f) for f in feeds_list]
        path = sess.end_profiling()
    finally:
        device.COMPILED_RUNS = True
    try:
        events = json.load(open(path))
    finally:
        os.remove(path)
    runs = []
    for r in (e for e in events if e.get("name") == "model_run"):
        nodes = [e for e in events if e.get("cat") == "Node" and r["ts"] <= e["ts"] <= r["ts"] + r["dur"]]
        assert sum(e["dur"] for e in nodes) <= r["dur"] + len(nodes), (r, nodes)
        runs.append([(e["name"], e["args"]["op_name"], json.dumps(e["args"]["input_type_shape"]),
                      json.dumps(e["args"]["output_type_shape"])) for e in nodes])
    return runs, outs, _programs(sess)


def test_profiled_runs_time_the_compiled_steps(monkeypatch):
    """A profiled run goes through the compiled program (so the profile shows what an unprofiled run does), its C
    steps timed by Program.run_timed: per run the same kernel events (names, ops, shapes, order) and the same bits as
    the profiled Python loop (the oracle: COMPILED_RUNS off), a Python step (Tile) among them."""
    model, x = _transformer_block()
    rng = np.random.default_rng(2)
    feeds = [{"x": rng.standard_normal(x.shape).astype(np.float32)} for _ in range(4)]
    timed = []
    orig = Compiled._run_timed

    def spy(self, start, stop, spans):
        timed.append(stop - start)
        return orig(self, start, stop, spans)
    monkeypatch.setattr(Compiled, "_run_timed", spy)
    got, outs, progs = _profiled_runs(model, feeds, True)
    assert progs and progs[0].n_py >= 1 and timed, (timed, [(p.n_c, p.n_py) for p in progs])
    timed_runs = len(timed)
    want, ref_outs, ref_progs = _profiled_runs(model, feeds, False)
    assert not ref_progs and len(timed) == timed_runs
    assert len(got) == len(want) == len(feeds)
    for g, w in zip(got, want):
        assert g == w
    for o, r in zip(outs, ref_outs):
        for a, b in zip(o, r):
            np.testing.assert_array_equal(a, b)


def test_profiled_run_span_leaves_out_the_step_records(monkeypatch):
    """A compiled profiled run records its C steps' events after the walk; that bookkeeping is the profiler's, not
    the run's: each model_run event ends where its walk ended, not after the records (here made to take 4 ms a step,
    so a span that kept them would end >= 4 ms per step after its last kernel; the oracle: the kernel events' own
    ends)."""
    import time
    from onnxep.graph.executor import StepTrace
    x = np.random.default_rng(6).standard_normal((4, 16)).astype(np.float32)
    nodes = [helper.make_node("Add", ["x" if k == 0 else f"a{k - 1}", "x"], [f"a{k}"]) for k in range(6)]
    model = make_model(nodes, {"x": x}, ["a5"])
    orig = StepTrace.step

    def slow(self, *args):
        time.sleep(0.004)
        return orig(self, *args)
    monkeypatch.setattr(StepTrace, "step", slow)
    import json
    import os
    so = onnxep.SessionOptions()
    so.enable_profiling = True
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    for _ in range(3):
        sess.run(None, {"x": x})
    assert _programs(sess) and all(p.n_py == 0 for p in _programs(sess))
    path = sess.end_profiling()
    try:
        events = json.load(open(path))
    finally:
        os.remove(path)
    runs = [e for e in events if e.get("name") == "model_run"]
    assert len(runs) == 3
    for r in runs[1:]:              # (the first run is the capture's, through the Python loop)
        end = r["ts"] + r["dur"]
        nodes = [e for e in events if e.get("cat") == "Node" and r["ts"] <= e["ts"] <= end]
        assert nodes
        last = max(e["ts"] + e["dur"] for e in nodes)
        assert end - last < 2000 * len(nodes), (end - last, len(nodes))


def test_profiled_run_with_bad_input_resumes_in_python():
    """A profiled compiled run whose C step finds an index out of range (Gather) stops there; the step's Python
    compute raises the named error, and the profiled session goes on running (oracle: numpy indexing)."""
    x = np.random.default_rng(3).standard_normal((10, 8)).astype(np.float32)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Gather", ["n", "i"], ["y"])]
    model = make_model(nodes, {"x": x, "i": np.zeros((3, 5), np.int64)}, ["y"])
    so = onnxep.SessionOptions()
    so.enable_profiling = True
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    i = np.arange(15).reshape(3, 5) % 10
    for _ in range(3):
        np.testing.assert_array_equal(sess.run(None, {"x": x, "i": i})[0], -x[i])
    assert _programs(sess)
    bad = i.copy()
    bad[1, 2] = 10
    with pytest.raises(Exception, match="indices must be in"):
        sess.run(None, {"x": x, "i": bad})
    np.testing.assert_array_equal(sess.run(None, {"x": x, "i": i})[0], -x[i])
    import os
    os.remove(sess.end_profiling())
