"""Signature families (graph/planner.py SignatureFamily): a decoder's steps, each with a new input signature (the key /
value cache a row longer), run under one memory plan and one compiled program (backends/cpu/runloop.py) whose steps
of fixed shapes run in C and whose steps touching the growing values run in Python.

Oracles: the same model in a session whose runs all go through the Python loop (device.COMPILED_RUNS off; the same
kernels, so the same bits), and numpy for the planner's templates."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep.backends.cpu import device
from onnxep.errors import InvalidArgument
from onnxep.graph.planner import ArenaPlanner, family_template, in_family, signature
from tests._util import make_model
from tests.graph.test_runloop import _programs

RNG = np.random.default_rng(61)
F32 = np.dtype(np.float32)
I64 = np.dtype(np.int64)


def test_template_leaves_open_the_dims_and_values_that_differ():
    keys = [signature({"ids": np.array([[t]], np.int64), "past": np.zeros((1, 2, p, 4), np.float32)})
            for t, p in ((5, 3), (9, 4), (2, 5))]
    tpl = family_template(keys)
    assert [(e[0], e[1], e[2]) for e in tpl] == [("ids", (1, 1), I64), ("past", (1, 2, None, 4), F32)]
    assert in_family(tpl, signature({"ids": np.array([[7]], np.int64), "past": np.zeros((1, 2, 40, 4), np.float32)}))
    for other in ({"ids": np.array([[7]], np.int64), "past": np.zeros((2, 2, 40, 4), np.float32)},   # a fixed dim
                  {"ids": np.array([[7]], np.int64), "past": np.zeros((1, 2, 40), np.float32)},      # the rank
                  {"ids": np.array([[7]], np.int32), "past": np.zeros((1, 2, 40, 4), np.float32)},   # a dtype
                  {"ids": np.array([[7]], np.int64)}):                                               # a feed
        assert not in_family(tpl, signature(other))
    # rank 0 / 1 integer feeds (shapes, lengths, counts) are in the signature by value, and may vary in a family
    lens = family_template([signature({"n": np.array([k], np.int64), "x": np.zeros((k, 2), np.float32)})
                            for k in (1, 2, 3)])
    assert in_family(lens, signature({"n": np.array([9], np.int64), "x": np.zeros((9, 2), np.float32)}))
    # a fixed small integer value stays fixed
    fixed = family_template([signature({"n": np.array([3], np.int64), "x": np.zeros((k, 2), np.float32)})
                             for k in (1, 2, 3)])
    assert in_family(fixed, signature({"n": np.array([3], np.int64), "x": np.zeros((9, 2), np.float32)}))
    assert not in_family(fixed, signature({"n": np.array([4], np.int64), "x": np.zeros((9, 2), np.float32)}))
    # token ids growing past the signature's small-integer size (values in the signature up to 64, then not)
    ids = [signature({"ids": np.ones((1, n), np.int64)}) for n in (60, 64, 70)]
    grown = family_template(ids)
    assert grown is not None and in_family(grown, signature({"ids": np.ones((1, 9), np.int64)}))
    assert in_family(grown, signature({"ids": np.ones((1, 900), np.int64)}))
    # feeds that are not the same names, dtypes and ranks form no family, nor do sequence feeds
    assert family_template([signature({"x": np.zeros((2,), np.float32)}),
                            signature({"x": np.zeros((2, 1), np.float32)})]) is None
    seqs = [signature({"s": [np.zeros(2, np.float32)] * k, "x": np.zeros((k, 2), np.float32)}) for k in (1, 2)]
    assert family_template(seqs) is None and not in_family(fixed, seqs[0])


def _decoder_step():
    """One decoder-like step: a position embedding gathered by the fed position (a Gather whose indices its C step
    would bake in), a projection, the key cache grown by a row (Concat: a graph output), a reduction over the cache,
    the mask's length as a scale, and fixed-shape layers after."""
    d, h, w = 16, 2, 8
    inits = {"E": RNG.standard_normal((64, d)).astype(np.float32),
             "W": (RNG.standard_normal((d, d)) * 0.3).astype(np.float32),
             "W2": (RNG.standard_normal((d, d)) * 0.3).astype(np.float32),
             "b": RNG.standard_normal(d).astype(np.float32),
             "kshape": np.array([1, 1, h, w], np.int64), "perm_ax": np.array([2], np.int64),
             "flat": np.array([1, 1, d], np.int64)}
    nodes = [
        helper.make_node("Gather", ["E", "pos"], ["pe"]),                    # [1, 1, d]
        helper.make_node("Add", ["x", "pe"], ["xp"]),
        helper.make_node("MatMul", ["xp", "W"], ["hid"]),
        helper.make_node("Reshape", ["hid", "kshape"], ["k4"]),
        helper.make_node("Transpose", ["k4"], ["k"], perm=[0, 2, 1, 3]),      # [1, h, 1, w]
        helper.make_node("Concat", ["past", "k"], ["present"], axis=2),       # [1, h, P + 1, w]
        helper.make_node("ReduceSum", ["present", "perm_ax"], ["s"], keepdims=0),   # [1, h, w]
        helper.make_node("Reshape", ["s", "flat"], ["s3"]),
        helper.make_node("Cast", ["mask"], ["mf"], to=1),
        helper.make_node("ReduceMean", ["mf"], ["mm"], keepdims=1),           # [1, 1]
        helper.make_node("Mul", ["s3", "mm"], ["sm"]),
        helper.make_node("Add", ["sm", "hid"], ["a"]),
        helper.make_node("MatMul", ["a", "W2"], ["a2"]),
        helper.make_node("Add", ["a2", "b"], ["a3"]),
        helper.make_node("Relu", ["a3"], ["a4"]),
        helper.make_node("Tanh", ["a4"], ["y"]),
    ]
    feeds = {"x": np.zeros((1, 1, d), np.float32), "pos": np.zeros((1, 1), np.int64),
             "past": np.zeros((1, h, 3, w), np.float32), "mask": np.ones((1, 4), np.int64)}
    model = make_model(nodes, feeds, ["y", "present"], initializers=inits, opset=17,
                       input_shapes={"x": [1, 1, d], "pos": [1, 1], "past": [1, h, "P", w], "mask": [1, "M"]})
    return model, (d, h, w)


def _steps(model, dims, lengths, threads=1):
    """Greedy-decoder-like runs (present fed back as past) at past lengths `lengths`, through a session with
    compiled runs and one without: their outputs per step, and the first session."""
    d, h, w = dims
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = threads
    runs = []
    for compiled in (True, False):
        device.COMPILED_RUNS = compiled
        try:
            sess = onnxep.InferenceSession(model.SerializeToString(), so)
            rng = np.random.default_rng(7)
            past = None
            outs = []
            for n in lengths:
                if past is None or past.shape[2] != n:
                    past = rng.standard_normal((1, h, n, w)).astype(np.float32)
                feeds = {"x": rng.standard_normal((1, 1, d)).astype(np.float32),
                         "pos": np.array([[n % 64]], np.int64), "past": past,
                         "mask": np.ones((1, n + 1), np.int64)}
                y, present = sess.run(None, feeds)
                outs.append((y, present))
                past = present
            runs.append((sess, outs))
        finally:
            device.COMPILED_RUNS = True
    (sess, got), (_, want) = runs
    for g, w_ in zip(got, want):
        for a, b in zip(g, w_):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)
    return sess, got


@pytest.mark.parametrize("threads", [1, 2])
def test_growing_past_runs_one_program(monkeypatch, threads):
    model, dims = _decoder_step()
    compiles = []
    real = device.compile_plan

    def spy(*a, **kw):
        c = real(*a, **kw)
        compiles.append(c)
        return c

    monkeypatch.setattr(device, "compile_plan", spy)
    sess, got = _steps(model, dims, list(range(3, 30)), threads)
    memory = sess._executor.memory
    assert len(memory.families) == 1
    family = memory.families[0]
    # the plan of the family: the growing allocations (the cache, the reduction's input) are elastic, outside the
    # arena; the fixed-size ones keep their offsets
    assert family.plan.elastic and all(family.plan.offsets[k] == -1 for k in family.plan.elastic)
    assert any(o >= 0 for o in family.plan.offsets)
    # (the fed position, rank 2, is data: its values are not part of the signature)
    assert family.varying_feeds == {"past": True, "mask": True}
    # three recorded steps, one capture, then the family's program for every step after: compiled once
    assert len(memory.plans) == ArenaPlanner.CHURN_RUNS
    progs = [c for c in compiles if c is not None]
    assert len(progs) == 1, compiles
    (prog,) = _programs(sess)
    assert prog is progs[0]
    python = {sess.plans[0].steps[seg[1]][6] for seg in prog.segments if not seg[0]}
    # what reads the growing values stays Python; the fixed layers run in C, and so does the Gather of the fed
    # position (its C step reads its indices on every run, checking each)
    assert python == {"Cast", "Concat", "ReduceSum", "ReduceMean"}, python
    assert prog.n_c >= 8, prog.n_c
    assert (family.n_c, family.n_py) == (prog.n_c, prog.n_py) and not family.fruitless


def test_a_family_value_that_changes_shape_late_falls_back_safely(monkeypatch):
    """A value the reference and the capture saw at one shape (a slice of at most 4 cache rows, at 5 rows or more)
    changes it later (fewer rows): the Python step's check sees it and the run finishes in Python; the arena plan
    left twice, the family is dropped. Outputs stay those of the Python loop."""
    h, w = 2, 8
    inits = {"W": (RNG.standard_normal((w, w)) * 0.3).astype(np.float32),
             "st": np.array([0], np.int64), "en": np.array([4], np.int64), "ax": np.array([2], np.int64)}
    nodes = [helper.make_node("Slice", ["past", "st", "en", "ax"], ["head"]),       # [1, h, min(P, 4), w]
             helper.make_node("MatMul", ["head", "W"], ["hw"]),
             helper.make_node("Relu", ["hw"], ["r"]),
             helper.make_node("Concat", ["past", "k"], ["present"], axis=2),
             helper.make_node("Identity", ["r"], ["y"])]
    feeds = {"past": np.zeros((1, h, 5, w), np.float32), "k": np.zeros((1, h, 1, w), np.float32)}
    model = make_model(nodes, feeds, ["y", "present"], initializers=inits, opset=17,
                       input_shapes={"past": [1, h, "P", w], "k": [1, h, 1, w]})
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    device.COMPILED_RUNS = False
    try:
        ref = onnxep.InferenceSession(model.SerializeToString(), so)
    finally:
        device.COMPILED_RUNS = True
    rng = np.random.default_rng(3)
    for n in (5, 6, 7, 8, 9, 2, 3, 10, 1, 11):
        f = {"past": rng.standard_normal((1, h, n, w)).astype(np.float32),
             "k": rng.standard_normal((1, h, 1, w)).astype(np.float32)}
        device.COMPILED_RUNS = False
        try:
            want = ref.run(None, f)
        finally:
            device.COMPILED_RUNS = True
        got = sess.run(None, f)
        for a, b in zip(got, want):
            assert a.shape == b.shape
            np.testing.assert_array_equal(a, b)
        if n == 9:      # the family's program: the slice in Python, the layers after it in C
            (family,) = sess._executor.memory.families
            (prog,) = _programs(sess)
            python = {sess.plans[0].steps[seg[1]][6] for seg in prog.segments if not seg[0]}
            assert python == {"Slice", "Concat"} and prog.n_c >= 2, (python, prog.n_c)
    assert family not in sess._executor.memory.families


def test_a_member_that_comes_back_stays_in_its_family(monkeypatch):
    """A decoding loop run again from the same prompt meets its signatures again: they stay in the family (no
    recording, no new compile), where a fruitless family's come-back signatures are recorded on their own
    (tests/graph/test_memory_planner.py)."""
    model, dims = _decoder_step()
    compiles = []
    real = device.compile_plan
    monkeypatch.setattr(device, "compile_plan", lambda *a, **kw: compiles.append(1) or real(*a, **kw))
    sess, _ = _steps(model, dims, [3, 4, 5, 6, 7, 8, 6, 7, 8, 6, 6])
    memory = sess._executor.memory
    assert len(memory.families) == 1 and not memory.families[0].fruitless
    assert len(memory.plans) == ArenaPlanner.CHURN_RUNS and len(compiles) == 1


def test_bad_input_in_a_family_run_raises_and_the_session_goes_on():
    """A family run fed a position out of the embedding's range: the Gather's C step finds it, the run finishes in
    Python and raises its named error; the next runs are the family's again (outputs those of the Python loop)."""
    model, dims = _decoder_step()
    d, h, w = dims
    sess, _ = _steps(model, dims, list(range(3, 9)))
    memory = sess._executor.memory
    (family,) = memory.families
    rng = np.random.default_rng(2)
    past = rng.standard_normal((1, h, 9, w)).astype(np.float32)
    bad = {"x": rng.standard_normal((1, 1, d)).astype(np.float32), "pos": np.array([[64]], np.int64),
           "past": past, "mask": np.ones((1, 10), np.int64)}
    with pytest.raises(InvalidArgument, match="Gather.*indices must be in \\[-64, 63\\]"):
        sess.run(None, bad)
    good = dict(bad, pos=np.array([[5]], np.int64))
    device.COMPILED_RUNS = False
    try:
        ref = onnxep.InferenceSession(model.SerializeToString())
        want = ref.run(None, good)
    finally:
        device.COMPILED_RUNS = True
    for _ in range(2):
        for a, b in zip(sess.run(None, good), want):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert memory.families == [family] and _programs(sess)
