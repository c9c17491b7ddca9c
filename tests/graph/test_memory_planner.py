"""The memory planner (graph/planner.py): liveness-based offsets in one arena, in-place reuse, arenas from the stream's
allocator (seed 004_addf7aa1a7373ebc.txt), and runs that leave their plan.

Oracles: a brute-force overlap check of every pair of allocations (plan_memory); onnx.reference and the session's own
unplanned run (enable_mem_pattern = False) for the numbers of planned runs; a counting allocator for what a user
allocator sees."""
import gc
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

import onnxep
from onnxep.contracts import Stream, register_allocator
from onnxep.errors import RuntimeException
from onnxep.graph.planner import plan_memory
from tests._util import make_model, run_reference, run_threads
from tests.contracts.test_allocator import CountingAllocator

ALIGN = 64


def _aligned(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


@st.composite
def _records(draw):
    n = draw(st.integers(0, 40))
    sizes, starts, ends, external = [], [], [], []
    for _ in range(n):
        s = draw(st.integers(0, 30))
        starts.append(s)
        ends.append(s + draw(st.integers(0, 8)))
        sizes.append(draw(st.sampled_from([0, 1, 4, 63, 64, 65, 256, 1000, 4096])))
        external.append(draw(st.integers(0, 9)) == 0)
    inplace = []
    for _ in range(draw(st.integers(0, 10)) if n > 1 else 0):
        o, x = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        # as the recorder reports them: the step making o reads x, so x exists before it and lives until it (drawn
        # without this, a record could have o's step read an x made at the same step or dead before it, which no run
        # produces and which made this test fail once in ~10^5 examples)
        if starts[x] < starts[o] <= ends[x]:
            inplace.append((o, x, starts[o]))
    return sizes, starts, ends, external, inplace


@settings(max_examples=300, deadline=None)
@given(_records())
def test_plan_never_overlaps_two_live_allocations(rec):
    sizes, starts, ends, external, inplace = rec
    plan = plan_memory(sizes, starts, ends, external, inplace, _aligned)
    allowed = {(o, x) for o, x, t in inplace if ends[x] == t}
    for i, (b, o) in enumerate(zip(sizes, plan.offsets)):
        if external[i] or _aligned(b) == 0:
            assert o == -1                                  # allocated on its own every run
            continue
        assert o >= 0 and o % ALIGN == 0 and o + _aligned(b) <= plan.arena_size
    for i in range(len(sizes)):
        for j in range(i + 1, len(sizes)):
            oi, oj = plan.offsets[i], plan.offsets[j]
            if oi < 0 or oj < 0:
                continue
            live_together = starts[i] <= ends[j] and starts[j] <= ends[i]
            share = oi < oj + _aligned(sizes[j]) and oj < oi + _aligned(sizes[i])
            if live_together and share:
                # only an in-place pair: the output takes the input's place at the step where the input dies
                assert ((i, j) in allowed or (j, i) in allowed) and oi == oj, (i, j)


def test_plan_packs_a_chain_into_two_slots():
    # a chain x0 -> x1 -> ... -> x9, each read only by the next step: two live at a time, so two slots
    n = 10
    plan = plan_memory([1000] * n, list(range(n)), [i + 1 for i in range(n)], [False] * n, [], _aligned)
    assert plan.arena_size == 2 * _aligned(1000)


def test_in_place_pair_shares_the_slot_only_when_the_input_dies_there():
    # x0 made at step 0, read at 1 (dies); x1 made at 1 may take its place -> one slot
    plan = plan_memory([512, 512], [0, 1], [1, 2], [False, False], [(1, 0, 1)], _aligned)
    assert plan.offsets[0] == plan.offsets[1] and plan.arena_size == 512
    # x0 also read at step 2: x1 must not overwrite it
    plan = plan_memory([512, 512], [0, 1], [2, 2], [False, False], [(1, 0, 1)], _aligned)
    assert plan.offsets[0] != plan.offsets[1] and plan.arena_size == 1024
    # different sizes: no in-place
    plan = plan_memory([512, 256], [0, 1], [1, 2], [False, False], [(1, 0, 1)], _aligned)
    assert plan.offsets[0] != plan.offsets[1]


def _session(model, mem_pattern=True, **kw):
    so = onnxep.SessionOptions()
    so.enable_mem_pattern = mem_pattern
    return onnxep.InferenceSession(model.SerializeToString(), so, **kw)


def _views_model():
    """Views (Reshape, Identity) of intermediates, an intermediate that is both a graph output and read later, fan-out,
    in-place candidates (Relu / Add / Neg chains), and an output that is a view of an intermediate."""
    shape = np.array([6, 20], np.int64)
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Reshape", ["a", "shape"], ["a2"]),          # a view of a
        helper.make_node("Neg", ["a2"], ["b"]),
        helper.make_node("Add", ["b", "a2"], ["c"]),                  # reads the view after Neg: a stays alive
        helper.make_node("Identity", ["c"], ["c_id"]),
        helper.make_node("Sigmoid", ["c_id"], ["d"]),
        helper.make_node("Mul", ["d", "d"], ["e"]),
        helper.make_node("Relu", ["e"], ["mid"]),                     # a graph output, also read below
        helper.make_node("Tanh", ["mid"], ["f"]),
        helper.make_node("Sub", ["f", "c"], ["g"]),
        helper.make_node("Reshape", ["g", "back"], ["y"]),            # the output: a view of g
    ]
    x = np.zeros((4, 30), np.float32)
    return make_model(nodes, {"x": x}, ["y", "mid"], initializers={"shape": shape, "back": np.array([4, 30],
                                                                                                      np.int64)})


def test_planned_runs_match_the_reference_and_never_alias_outputs():
    m = _views_model()
    sess = _session(m)
    rng = np.random.default_rng(0)
    kept = []
    for r in range(5):                     # run 1 records, runs 2.. are planned
        x = rng.standard_normal((4, 30)).astype(np.float32)
        got = sess.run(None, {"x": x})
        want = run_reference(m, {"x": x})
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)
        kept.append((x, got))
    assert len(sess._executor.memory.plans) == 1
    # outputs of earlier runs were not overwritten by later runs (they never live in the arena)
    for x, got in kept:
        for g, w in zip(got, run_reference(m, {"x": x})):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


def test_in_place_chain_needs_one_slot():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Sigmoid", ["b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((8, 64), np.float32)}, ["y"])
    sess = _session(m)
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    for _ in range(3):
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], run_reference(m, {"x": x})[0], rtol=1e-6)
    (plan,) = sess._executor.memory.plans.values()
    assert plan.arena_size == 8 * 64 * 4      # a, b and c take turns in one slot; y (the output) is external
    assert plan.offsets.count(-1) == 1


def _residual_block_model(same_input, C=16, H=9):
    """conv -> relu -> [conv -> relu ->] conv + residual add -> relu -> conv: the Add is fused into the last conv of
    the block (NhwcConv input Z = the block's input r); with same_input that conv also reads r as its X."""
    rng = np.random.default_rng(3)
    w = {f"w{i}": (rng.standard_normal((C, C, k, k)) / (C * k)).astype(np.float32)
         for i, k in ((1, 3), (2, 1), (3, 3), (4, 1))}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["r"])]
    if same_input:
        nodes.append(helper.make_node("Identity", ["r"], ["b2"]))
    else:
        nodes += [helper.make_node("Conv", ["r", "w2"], ["b"]), helper.make_node("Relu", ["b"], ["b2"])]
    nodes += [
        helper.make_node("Conv", ["b2", "w3"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "r"], ["s"]),
        helper.make_node("Relu", ["s"], ["t"]),
        helper.make_node("Conv", ["t", "w4"], ["y"]),
    ]
    return make_model(nodes, {"x": np.zeros((1, C, H, H), np.float32)}, ["y"], initializers=w)


@pytest.mark.parametrize("same_input", [False, True], ids=["block", "x-is-residual"])
def test_conv_with_residual_takes_the_residuals_slot(monkeypatch, same_input):
    """NhwcConv declares (Y, Z) in place (conv_nhwc_f32 reads each residual element before writing it): the planned
    arena is smaller than without the declaration, and planned runs still equal onnx.reference. Not when Z is also
    the conv's X (the 3x3 window reads neighbours of an element after its output is written): the planner skips an
    in-place pair whose input memory another input of the step also reads."""
    from onnxep.ops.onnxep.nhwc_conv import NhwcConv_1
    m = _residual_block_model(same_input)
    x = np.random.default_rng(4).standard_normal((1, 16, 9, 9)).astype(np.float32)
    want = run_reference(m, {"x": x})[0]
    sizes = {}
    for decl in ((), NhwcConv_1.inplace):
        monkeypatch.setattr(NhwcConv_1, "inplace", decl)
        sess = _session(m)
        for _ in range(3):                                  # run 1 records, runs 2.. are planned
            np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
        (plan,) = sess._executor.memory.plans.values()
        sizes[decl] = plan.arena_size
    assert NhwcConv_1.inplace == ((0, 3),)
    if same_input:
        assert sizes[((0, 3),)] == sizes[()]
    else:
        assert sizes[((0, 3),)] < sizes[()]


def test_each_input_signature_gets_its_plan():
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((2, 3), np.float32)}, ["y"], input_shapes={"x": ["N", 3]})
    sess = _session(m)
    ref = _session(m, mem_pattern=False)
    rng = np.random.default_rng(2)
    for n in (1, 5, 1, 7, 5, 5):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
    assert len(sess._executor.memory.plans) == 3
    assert ref._executor.memory is None


def test_signature_holds_the_values_of_small_rank_0_and_1_integer_feeds_only():
    """Small integer feeds of rank 0 / 1 may be shapes (their values are in the signature); token ids, masks and
    positions (rank 2 and up) are data."""
    from onnxep.graph.planner import signature
    shape = signature({"s": np.array([2, 3], np.int64)})
    assert shape != signature({"s": np.array([3, 2], np.int64)})
    assert signature({"k": np.array(5, np.int64)}) != signature({"k": np.array(6, np.int64)})
    ids = signature({"ids": np.array([[5, 7, 9]], np.int64), "x": np.zeros(2, np.float32)})
    assert ids == signature({"ids": np.array([[1, 2, 3]], np.int64), "x": np.ones(2, np.float32)})
    assert ids != signature({"ids": np.array([[1, 2]], np.int64), "x": np.ones(2, np.float32)})
    big = np.arange(65, dtype=np.int64)
    assert signature({"s": big}) == signature({"s": big[::-1].copy()})


def test_token_ids_of_one_shape_run_one_plan():
    """An embedding lookup fed new token ids of one shape each run: one recorded signature, then planned (and
    compiled) runs; results those of the reference (onnx.reference)."""
    rng = np.random.default_rng(9)
    nodes = [helper.make_node("Gather", ["E", "ids"], ["e"]), helper.make_node("Relu", ["e"], ["y"])]
    E = rng.standard_normal((50, 8)).astype(np.float32)
    m = make_model(nodes, {"ids": np.zeros((1, 6), np.int64)}, ["y"], initializers={"E": E})
    sess = _session(m)
    for _ in range(6):
        ids = rng.integers(0, 50, (1, 6)).astype(np.int64)
        np.testing.assert_array_equal(sess.run(None, {"ids": ids})[0], run_reference(m, {"ids": ids})[0])
    assert len(sess._executor.memory.plans) == 1


def test_new_signatures_in_a_row_are_recorded_when_they_come_back():
    """After ArenaPlanner.CHURN_RUNS runs that each recorded a new signature (a decoder's growing past), a new
    signature of the same feeds, dtypes and ranks runs under their signature family (one plan, not recorded); one that
    is no family's runs unrecorded from the block pool; either is recorded on its second run; a run of a planned
    signature ends the streak. Results stay those of an unplanned session (oracle: the same model without a memory
    pattern)."""
    from onnxep.graph.planner import ArenaPlanner
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((2, 3), np.float32)}, ["y"], input_shapes={"x": ["N", "C"]})
    sess = _session(m)
    ref = _session(m, mem_pattern=False)
    memory = sess._executor.memory
    plans = memory.plans
    rng = np.random.default_rng(5)
    c = ArenaPlanner.CHURN_RUNS

    def run(n, k=3):
        x = rng.standard_normal((n, k)).astype(np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])

    for n in range(1, c + 1):
        run(n)
    assert len(plans) == c and not memory.families
    run(c + 1)                                   # churning: the family of [N, 3]
    assert len(plans) == c and len(memory.families) == 1
    # every step's size follows N: nothing of the family's program runs in C, so its signatures run as without it
    assert memory.families[0].fruitless
    run(c + 2)                                   # noted, not recorded
    assert len(plans) == c
    run(c + 1)                                   # came back: recorded
    assert len(plans) == c + 1
    run(2, 5)                                    # no family's (C differs), churning: noted, not recorded
    assert len(plans) == c + 1
    run(2, 5)                                    # came back: recorded
    assert len(plans) == c + 2
    run(1)                                       # a planned signature ends the streak
    run(3, 7)                                    # ... so the next new one is recorded at once
    assert len(plans) == c + 3


def test_with_every_plan_slot_taken_a_new_signature_must_come_back_often():
    """ArenaPlanner.MAX_SIGNATURES plans kept: with all taken, a new signature runs unrecorded until its FULL_RUNS-th
    run, then takes the oldest plan's place (lengths drawn at random from more than the slots would otherwise record
    and compile without end). Results stay those of an unplanned session."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((2, 3), np.float32)}, ["y"], input_shapes={"x": ["N", 3]})
    sess = _session(m)
    ref = _session(m, mem_pattern=False)
    memory = sess._executor.memory
    memory.MAX_SIGNATURES = 4
    rng = np.random.default_rng(6)

    def run(n):
        x = rng.standard_normal((n, 3)).astype(np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])

    for n in (1, 2, 3, 4):
        run(n)
        run(n)                                   # planned: no churn
    assert [k[0][1][0] for k in memory.plans] == [1, 2, 3, 4]
    for _ in range(memory.FULL_RUNS - 1):
        run(5)
        assert [k[0][1][0] for k in memory.plans] == [1, 2, 3, 4]
    run(5)
    assert [k[0][1][0] for k in memory.plans] == [2, 3, 4, 5]
    run(5)                                       # planned


def test_runs_whose_sizes_depend_on_data_leave_the_plan_safely():
    # NonZero's output size depends on the values of x, which the signature does not hold: a planned run meets a
    # request of another size, allocates the rest on its own, and the signature is recorded again
    nodes = [helper.make_node("Greater", ["x", "zero"], ["m"]), helper.make_node("NonZero", ["m"], ["nz"]),
             helper.make_node("Cast", ["nz"], ["nzf"], to=1), helper.make_node("Relu", ["nzf"], ["r"]),
             helper.make_node("Neg", ["r"], ["s"]), helper.make_node("ReduceSum", ["s"], ["y"], keepdims=0)]
    m = make_model(nodes, {"x": np.zeros((16,), np.float32)}, ["y"], initializers={"zero": np.zeros(1, np.float32)},
                   opset=13)
    sess = _session(m)
    rng = np.random.default_rng(3)
    for _ in range(6):
        x = rng.standard_normal(16).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"x": x})[0], run_reference(m, {"x": x})[0], rtol=1e-6)
    assert list(sess._executor.memory.plans.values()) == [None]   # left its plan twice: no longer planned


def test_user_allocator_gets_the_arena_and_every_block_back():
    # seed 004: "Registers the user-provided Allocator and its callback function, so that the Allocator can be used."
    # A planned run's arena is one block from it, like every activation of the recorded run before
    alloc = CountingAllocator()
    s = Stream()
    register_allocator(s, alloc.desc)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Tanh", ["c"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((32, 32), np.float32)}, ["y"])
    sess = _session(m, stream=s)
    x = np.random.default_rng(4).standard_normal((32, 32)).astype(np.float32)
    want = run_reference(m, {"x": x})[0]
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-6)   # recorded: one block per tensor
    gc.collect()
    assert alloc.allocs == alloc.frees and not alloc.live
    sizes_before = len(alloc.log)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-6)   # planned
    gc.collect()
    planned = [e for e in alloc.log[sizes_before:] if e[0] == "alloc"]
    (plan,) = sess._executor.memory.plans.values()
    assert sorted(size for _, size in planned) == sorted([plan.arena_size, 32 * 32 * 4])   # the arena + y
    assert alloc.allocs == alloc.frees and not alloc.live


def test_a_failed_planned_run_returns_its_arena_and_the_session_still_works():
    alloc = CountingAllocator()
    s = Stream()
    register_allocator(s, alloc.desc)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Reshape", ["b", "shape"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((4, 5), np.float32), "shape": np.array([20], np.int64)}, ["y"])
    sess = _session(m, stream=s)
    x = np.ones((4, 5), np.float32)
    for _ in range(2):
        assert sess.run(None, {"x": x, "shape": np.array([20], np.int64)})[0].shape == (20,)
    with pytest.raises(RuntimeException):
        sess.run(None, {"x": x, "shape": np.array([7], np.int64)})     # a new signature: recorded, and it fails
    gc.collect()
    assert alloc.allocs == alloc.frees and not alloc.live
    (y,) = sess.run(None, {"x": -x, "shape": np.array([20], np.int64)})   # planned again
    np.testing.assert_array_equal(y, np.full(20, -0.0))
    del y
    gc.collect()
    assert alloc.allocs == alloc.frees and not alloc.live


def test_concurrent_runs_of_one_session_stay_correct():
    # the arena serves one run at a time; an overlapping run allocates on its own (seed 004: "concurrent execution on
    # multiple streams is not allowed" with one allocator -- here one stream's workspace is never used by two runs)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
             helper.make_node("Mul", ["a", "b"], ["c"]), helper.make_node("Sigmoid", ["c"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((64, 256), np.float32)}, ["y"])
    sess = _session(m)

    def worker(seed):
        rng = np.random.default_rng(seed)
        for _ in range(30):
            x = rng.standard_normal((64, 256)).astype(np.float32)
            r = np.maximum(x, 0)
            want = 1 / (1 + np.exp(r * r))
            np.testing.assert_allclose(sess.run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-6)

    run_threads(worker, 4)


def test_sessions_on_one_stream_share_one_arena_and_stay_correct():
    # sessions created on one Stream share its workspace (work on a stream runs in order); each session alone has its
    # own stream, so its own
    small = make_model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["b"]),
                        helper.make_node("Mul", ["a", "b"], ["y"])], {"x": np.zeros((16, 16), np.float32)}, ["y"])
    big = make_model([helper.make_node("Sigmoid", ["x"], ["a"]), helper.make_node("Tanh", ["a"], ["b"]),
                      helper.make_node("Add", ["a", "b"], ["y"])], {"x": np.zeros((64, 64), np.float32)}, ["y"])
    s = Stream()
    s1, s2 = _session(small, stream=s), _session(big, stream=s)
    alone = _session(big)
    rng = np.random.default_rng(5)
    for _ in range(4):
        x1 = rng.standard_normal((16, 16)).astype(np.float32)
        x2 = rng.standard_normal((64, 64)).astype(np.float32)
        np.testing.assert_allclose(s1.run(None, {"x": x1})[0], run_reference(small, {"x": x1})[0], rtol=1e-6)
        np.testing.assert_allclose(s2.run(None, {"x": x2})[0], run_reference(big, {"x": x2})[0], rtol=1e-6)
        alone.run(None, {"x": x2})
    m1, m2, m3 = s1._executor.memory, s2._executor.memory, alone._executor.memory
    assert m1._pool is m2._pool and m3._pool is not m1._pool
    (p2,) = m2.plans.values()
    assert m1.arena_bytes == m2.arena_bytes == p2.arena_size      # grown to the larger plan, held once
    assert m1._pool.nbuffers == 1


def _conv_model(seed, C=8, H=12):
    """Conv -> Relu -> Conv -> Sigmoid, 3x3 'same' convs: packed weights (shared through a container) and two
    intermediates that live in the arena."""
    rng = np.random.default_rng(seed)
    w = {"w1": (rng.standard_normal((C, C, 3, 3)) / (3 * C)).astype(np.float32),
         "w2": (rng.standard_normal((C, C, 3, 3)) / (3 * C)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Sigmoid", ["c"], ["y"])]
    return make_model(nodes, {"x": np.zeros((1, C, H, H), np.float32)}, ["y"], initializers=w)


def _x(rng, model):
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return rng.standard_normal(shape).astype(np.float32)


def test_arena_pool_lends_each_buffer_to_one_borrower_at_a_time():
    # ArenaPool alone: a borrower gets a buffer no other borrower holds, the smallest free one that is large enough,
    # else one of its size in place of the largest free one. Oracle: the buffers' identities and sizes
    from onnxep.graph.planner import ArenaPool
    backend = _session(_conv_model(1))._executor.memory.backend
    pool = ArenaPool()
    a, b = pool.borrow(100, backend), pool.borrow(1000, backend)
    assert a is not b and (a.size, b.size, pool.nbuffers, pool.nbytes) == (100, 1000, 2, 1100)
    pool.give_back(b)
    pool.give_back(a)                                  # the last given back (a) is too small for 500: b is lent
    assert pool.borrow(500, backend) is b
    assert pool.borrow(50, backend) is a               # the last given back fits
    pool.give_back(a)
    c = pool.borrow(2000, backend)                     # only a (100) free: it makes way for a 2000-byte buffer
    assert c is not a and c is not b and a.is_freed and (pool.nbuffers, pool.nbytes) == (2, 3000)
    assert pool.borrow(10, backend) not in (b, c)      # both lent: a new one
    assert pool.nbuffers == 3


def test_sessions_given_one_container_share_one_arena_pool():
    # sessions sharing a PrePackedWeightsContainer (and nothing else) draw their planned runs' arenas from one pool,
    # as sessions on one stream do: run one after the other they hold one arena, grown to the larger plan. A session
    # with its own container has its own. Oracle: a session sharing nothing (same kernels, same thread count)
    small, big = _conv_model(1, C=8, H=8), _conv_model(2, C=16, H=12)
    c = onnxep.PrePackedWeightsContainer()
    s1, s2 = _session(small, prepacked_weights_container=c), _session(big, prepacked_weights_container=c)
    o1, o2 = _session(small), _session(big)
    rng = np.random.default_rng(6)
    for _ in range(4):
        x1, x2 = _x(rng, small), _x(rng, big)
        np.testing.assert_allclose(s1.run(None, {"x": x1})[0], o1.run(None, {"x": x1})[0], rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(s2.run(None, {"x": x2})[0], o2.run(None, {"x": x2})[0], rtol=1e-6, atol=1e-7)
    m1, m2, m3 = s1._executor.memory, s2._executor.memory, o2._executor.memory
    assert m1._pool is m2._pool and m3._pool is not m1._pool
    (p1,), (p2,) = m1.plans.values(), m2.plans.values()
    assert 0 < p1.arena_size < p2.arena_size
    assert m1._pool.nbuffers == 1 and m1.arena_bytes == p2.arena_size
    # a session given a stream shares with the sessions on that stream, whatever container it has
    s = Stream()
    s3 = _session(big, prepacked_weights_container=c, stream=s)
    assert s3._executor.memory._pool is not m1._pool and s3._executor.memory._pool is _session(small, stream=s) \
        ._executor.memory._pool


def test_a_run_that_finds_every_arena_lent_out_borrows_its_own():
    # a run that overlaps another (here: the pool's one arena held as a run on another thread would hold it) takes a
    # new arena instead of the held one, and gives it back to the pool afterwards. Oracle: a session sharing nothing;
    # the held arena's bytes are unchanged
    m = _conv_model(3)
    c = onnxep.PrePackedWeightsContainer()
    s1, s2 = _session(m, prepacked_weights_container=c), _session(m, prepacked_weights_container=c)
    alone = _session(m)
    rng = np.random.default_rng(7)
    for s in (s1, s1, s2):
        s.run(None, {"x": _x(rng, m)})                       # recorded, then planned: one arena in the pool
    mem = s2._executor.memory
    pool, (plan,) = mem._pool, mem.plans.values()
    assert pool.nbuffers == 1
    held = pool.borrow(plan.arena_size, mem.backend)
    held.memory()[:] = 0xAB
    x = _x(rng, m)
    np.testing.assert_allclose(s2.run(None, {"x": x})[0], alone.run(None, {"x": x})[0], rtol=1e-6, atol=1e-7)
    assert (held.memory() == 0xAB).all()
    assert pool.nbuffers == 2 and pool.nbytes == 2 * plan.arena_size
    pool.give_back(held)
    for s in (s1, s2, s1):                                   # one run at a time again: the two arenas take turns
        s.run(None, {"x": x})
    assert pool.nbuffers == 2


def _run_from_two_threads(models, sessions, seed, nruns):
    """Session i runs model i's random inputs nruns times from thread i, both threads started together. Returns, per
    session, its (input, output) pairs."""
    start = threading.Barrier(2)
    got = [[], []]

    def worker(i):
        rng = np.random.default_rng(seed + i)
        start.wait()
        for _ in range(nruns):
            x = _x(rng, models[i])
            got[i].append((x, sessions[i].run(None, {"x": x})[0]))

    run_threads(worker, 2)
    return got


def _assert_like_unshared(models, got):
    """Oracle: a session of each model sharing nothing, run afterwards on the same inputs."""
    for m, runs in zip(models, got):
        alone = _session(m)
        for x, y in runs:
            np.testing.assert_allclose(y, alone.run(None, {"x": x})[0], rtol=1e-6, atol=1e-7)


def test_sessions_sharing_a_container_run_concurrently_from_two_threads():
    # two sessions of two models on one container, each run from its own thread at the same time: each run borrows an
    # arena no other run holds (the pool grows to at most one per overlapping run). Oracle: sessions sharing nothing,
    # run afterwards on the same inputs
    models = [_conv_model(4, C=16, H=12), _conv_model(5, C=16, H=12)]
    c = onnxep.PrePackedWeightsContainer()
    shared = [_session(m, prepacked_weights_container=c) for m in models]
    _assert_like_unshared(models, _run_from_two_threads(models, shared, 10, 40))
    pool = shared[0]._executor.memory._pool
    assert pool is shared[1]._executor.memory._pool and 1 <= pool.nbuffers <= 2


def _blocks(pool):
    """Weak references to the numpy blocks behind the pool's free arenas."""
    refs = []
    for buf in pool._free:
        b = buf.memory()
        while b.base is not None:
            b = b.base
        refs.append(weakref.ref(b))
    return refs


def test_shared_arenas_are_released_with_the_last_session_and_container():
    # the pool's arenas live while the container or a session drawing from the pool does, and no longer. Oracle: weak
    # references to the arenas' memory
    m = _conv_model(8)
    c = onnxep.PrePackedWeightsContainer()
    s1, s2 = _session(m, prepacked_weights_container=c), _session(m, prepacked_weights_container=c)
    x = _x(np.random.default_rng(9), m)
    for _ in range(2):                                       # recorded, then planned
        s1.run(None, {"x": x})
        s2.run(None, {"x": x})
    refs = _blocks(s1._executor.memory._pool)
    assert len(refs) == 1
    del s1
    gc.collect()
    assert all(r() is not None for r in refs)                # s2 and the container still draw from it
    del s2
    gc.collect()
    assert all(r() is not None for r in refs)                # the container: a new session would reuse it
    s3 = _session(m, prepacked_weights_container=c)
    s3.run(None, {"x": x})
    s3.run(None, {"x": x})
    assert s3._executor.memory._pool.nbuffers == 1
    del s3, c
    gc.collect()
    assert all(r() is None for r in refs)


def test_a_user_allocator_gets_every_arena_back_from_sessions_sharing_a_container():
    # seed 004 with sessions that share a container, run from two threads at once on one stream: each planned run
    # takes its arena from the registered allocator and returns it when the run ends -- none goes into the default
    # allocator's pool. Oracle: a counting allocator (every alloc freed), sessions sharing nothing for the numbers
    alloc = CountingAllocator()
    st = Stream()
    register_allocator(st, alloc.desc)
    models = [_conv_model(11), _conv_model(12)]
    c = onnxep.PrePackedWeightsContainer()
    shared = [_session(m, prepacked_weights_container=c, stream=st) for m in models]
    got = _run_from_two_threads(models, shared, 20, 20)
    arena_sizes = {p.arena_size for s in shared for p in s._executor.memory.plans.values()}
    assert all(n > 0 for n in arena_sizes)
    assert any(e[0] == "alloc" and e[1] in arena_sizes for e in alloc.log)      # planned runs took their arenas
    _assert_like_unshared(models, got)
    del got
    gc.collect()
    assert alloc.allocs == alloc.frees and not alloc.live
    assert shared[0]._executor.memory._pool.nbuffers == 0


def test_planned_runs_hand_out_no_arena_memory_even_through_views():
    # graph outputs that are views of intermediates (Reshape, Flatten of a Relu's result) and an intermediate itself:
    # every run after the recording one is planned, and each run's outputs must survive the next runs (a view into
    # the arena would be overwritten). Oracle: numpy, per run's own feed.
    x0 = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Reshape", ["a", "s"], ["view"]),
             helper.make_node("Neg", ["x"], ["b"]), helper.make_node("Flatten", ["b"], ["flat"]),
             helper.make_node("Abs", ["b"], ["c"]), helper.make_node("Add", ["c", "a"], ["y"])]
    model = make_model(nodes, {"x": x0}, ["view", "flat", "y"], initializers={"s": np.array([6, 4], np.int64)})
    sess = onnxep.InferenceSession(model.SerializeToString())
    kept = []
    for i in range(5):
        x = x0 * (i + 1)
        kept.append((x, sess.run(None, {"x": x})))
    for x, (view, flat, y) in kept:
        np.testing.assert_array_equal(view, np.maximum(x, 0).reshape(6, 4))
        np.testing.assert_array_equal(flat, (-x).reshape(2, 12))
        np.testing.assert_array_equal(y, np.abs(x) + np.maximum(x, 0))


def _conv_model_n(C=8, H=12):
    """_conv_model with a free batch dimension: one plan per batch size."""
    m = _conv_model(4, C, H)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    return make_model(list(m.graph.node), {"x": np.zeros((1, C, H, H), np.float32)}, ["y"], initializers=inits,
                      input_shapes={"x": ["N", C, H, H]})


def test_planned_runs_hand_out_the_same_arrays_and_stay_correct():
    # ArenaRun.cached: a planned run gets the array the same request got in the last run of its plan in the same
    # pooled buffer (the same bytes at the same offset, so the same object). Oracle: the unplanned session's run
    # (bit-identical) and the identities of the arrays the pool keeps for the plan
    m = _conv_model_n()
    sess, ref = _session(m), _session(m, mem_pattern=False)
    rng = np.random.default_rng(11)
    pool = sess._executor.memory._pool

    def run(n):
        x = rng.standard_normal((n, 8, 12, 12)).astype(np.float32)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], ref.run(None, {"x": x})[0])
        if not pool._free:
            return None
        (buf,) = pool._free
        views = pool._views[buf]
        return [(e[2] if e is not None else None) for v in views.values() for e in v]

    run(3)                                 # recorded (no buffer yet: a plain run) ...
    for _ in range(2):
        run(3)                             # ... planned: the largest size first, so the buffer stays
    run(2)                                 # recorded
    first = run(2)                         # planned: arrays made and kept, beside size 3's
    again = run(2)
    arrays = [a for a in again if a is not None]
    assert arrays and all(np.shares_memory(a, pool._free[0].memory()) for a in arrays)
    assert all(a is b for a, b in zip(first, again))    # the same objects, run after run
    run(3)
    assert all(a is b for a, b in zip(first, run(2)))   # another plan's run in between changes nothing


def test_a_buffer_the_pool_frees_takes_its_kept_arrays_along():
    # the pool replaces a too-small buffer by a larger one: the arrays kept for the plans in the old buffer go with it,
    # so its memory is released. Oracle: a weak reference to the old buffer's memory
    m = _conv_model_n()
    sess = _session(m)
    pool = sess._executor.memory._pool
    rng = np.random.default_rng(12)
    for _ in range(2):                                       # recorded, then planned (keeps its arrays)
        sess.run(None, {"x": rng.standard_normal((1, 8, 12, 12)).astype(np.float32)})
    (small,) = pool._free
    assert any(e is not None for views in pool._views[small].values() for e in views)
    (ref,) = _blocks(pool)
    for _ in range(2):                                       # a larger plan: the small buffer makes way
        sess.run(None, {"x": rng.standard_normal((4, 8, 12, 12)).astype(np.float32)})
    assert small not in pool._views and pool.nbuffers == 1
    del small
    gc.collect()
    assert ref() is None


def test_runs_with_another_reshape_target_get_arrays_of_their_shape():
    # the same byte counts in another shape: the input signature holds the values of small int64 inputs, so each
    # Reshape target has its own plan, and the arrays kept for one plan never reach another's runs. Oracle:
    # onnx.reference
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Relu", ["r"], ["a"]),
             helper.make_node("Neg", ["a"], ["b"]), helper.make_node("Sigmoid", ["b"], ["y"])]
    m = make_model(nodes, {"x": np.zeros(12, np.float32), "s": np.array([3, 4], np.int64)}, ["y"])
    sess = _session(m)
    rng = np.random.default_rng(13)
    for s in ([3, 4], [3, 4], [3, 4], [4, 3], [2, 6], [3, 4]):
        feeds = {"x": rng.standard_normal(12).astype(np.float32), "s": np.array(s, np.int64)}
        (y,) = sess.run(None, feeds)
        assert y.shape == tuple(s)
        np.testing.assert_allclose(y, run_reference(m, feeds)[0], rtol=1e-6)


def test_arena_pool_grows_a_buffer_by_half_at_least():
    """A plan larger than the pool's free buffer replaces it with one of at least ArenaPool.GROWTH times its size
    (the compiled programs of a buffer go with it: inputs of ever new lengths would otherwise replace it at each
    larger plan); a plan that fits borrows the buffer as it is."""
    from onnxep.graph.planner import ArenaPool
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": np.zeros((2, 3), np.float32)}, ["y"])
    backend = _session(m)._executor.memory.backend
    pool = ArenaPool()
    buf = pool.borrow(1000, backend)
    assert buf.size >= 1000 and pool.nbuffers == 1
    first = buf.size
    pool.give_back(buf)
    assert pool.borrow(first, backend) is buf                 # fits: the same buffer
    pool.give_back(buf)
    bigger = pool.borrow(first + 8, backend)
    assert bigger is not buf and bigger.size >= int(first * ArenaPool.GROWTH) and pool.nbuffers == 1
    assert pool.nbytes == bigger.size
    pool.give_back(bigger)
