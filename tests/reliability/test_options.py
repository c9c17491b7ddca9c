"""Issue 22, no option silently ignored: every SessionOptions / RunOptions / InferenceSession option is honoured,
refused with a named error, or (where it cannot apply to a CPU provider) accepted with a one-time warning.
Oracle: onnxruntime (installed) -- its behaviour and exception types for the same calls -- unless a test says
otherwise."""
import json
import logging
import threading
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep import session as session_mod
from onnxep.errors import OptionWarning
from onnxep.ops import _registry
from onnxep.ops._base import OpKernel
from tests._util import make_model

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test sees the one-time warnings afresh (they are once per process)."""
    monkeypatch.setattr(session_mod, "_WARNED", set())


def _chain(n=6, shape=(4,)):
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"t{i - 1}", "one"], [f"t{i}" if i < n - 1 else "y"],
                              name=f"add{i}") for i in range(n)]
    return make_model(nodes, {"x": np.zeros(shape, np.float32)}, ["y"],
                      initializers={"one": np.ones(shape, np.float32)})


def _ort_session(model, so=None, **kw):
    so = so or ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"], **kw)


_X = {"x": np.zeros((4,), np.float32)}
_TEST_DOMAIN = "test.options"


def _counting_model(n_main=2):
    """x -> Count (n_main times) -> y, and a side branch x -> Count -> z: a registered test kernel counts computes."""
    nodes = [helper.make_node("Count", ["x" if i == 0 else f"m{i - 1}"], [f"m{i}" if i < n_main - 1 else "y"],
                              domain=_TEST_DOMAIN, name=f"main{i}") for i in range(n_main)]
    nodes.append(helper.make_node("Count", ["x"], ["z"], domain=_TEST_DOMAIN, name="side"))
    g = helper.make_graph(nodes, "count", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [4])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_TEST_DOMAIN, 1)],
                             ir_version=8)


class _Count(OpKernel):
    """y := x + 1, counting computes per node name (and calling `hook(name)` first when set)."""

    domain, op_type, since = _TEST_DOMAIN, "Count", 1
    calls: list = []
    hook = None

    def compute(self, ctx):
        type(self).calls.append(self.name)
        if type(self).hook is not None:
            type(self).hook(self.name)
        x = ctx.input(0)
        y = ctx.output(0, x.shape)
        np.add(x, 1, out=y)


@pytest.fixture
def count_kernel():
    _Count.calls = []
    _Count.hook = None
    _registry.register(_Count)
    try:
        yield _Count
    finally:
        _registry.unregister(_Count)
        _Count.hook = None


# ---------------------------------------------------------------------------------------------- supports_op (item 7)
def test_a_crash_in_a_kernels_supports_surfaces_naming_node_op_and_class():
    # oracle: the exception chain -- before, CpuDevice.supports_op swallowed it and the node went to the reference
    # backend without a word
    class BrokenSupports(OpKernel):
        domain, op_type, since = "", "Neg", 17        # the model's opset: it wins the lookup

        @classmethod
        def supports(cls, op):
            raise ZeroDivisionError("deliberate")

        def compute(self, ctx):
            raise AssertionError("never compiled")

    m = make_model([helper.make_node("Neg", ["x"], ["y"], name="the_neg")], {"x": np.ones((2,), np.float32)}, ["y"])
    _registry.register(BrokenSupports)
    try:
        with pytest.raises(onnxep.EPFail, match=r"BrokenSupports.*'the_neg'.*Neg.*ZeroDivisionError: deliberate") \
                as info:
            onnxep.InferenceSession(m.SerializeToString())
        assert isinstance(info.value.__cause__, ZeroDivisionError)
    finally:
        _registry.unregister(BrokenSupports)
    s = onnxep.InferenceSession(m.SerializeToString())      # unregistered: the node runs again
    np.testing.assert_array_equal(s.run(None, {"x": np.ones((2,), np.float32)})[0], -np.ones((2,), np.float32))


# ---------------------------------------------------------------------------------------------- RunOptions (item 1)
def test_terminate_before_a_run_fails_like_onnxruntime_and_the_session_recovers():
    # oracle: onnxruntime -- Fail, "Exiting due to terminate flag being set to true.", next run fine
    m = _chain()
    theirs = _ort_session(m)
    ro_ort = ort.RunOptions()
    ro_ort.terminate = True
    with pytest.raises(Exception) as want:
        theirs.run(None, _X, ro_ort)
    ours = onnxep.InferenceSession(m.SerializeToString())
    ro = onnxep.RunOptions()
    ro.terminate = True
    with pytest.raises(onnxep.Fail) as got:
        ours.run(None, _X, ro)
    assert type(want.value).__name__ == type(got.value).__name__ == "Fail"
    assert "Exiting due to terminate flag being set to true." in str(want.value)
    assert "Exiting due to terminate flag being set to true." in str(got.value)
    ro.terminate = False
    ro_ort.terminate = False
    np.testing.assert_array_equal(ours.run(None, _X, ro)[0], theirs.run(None, _X, ro_ort)[0])


def test_terminate_set_from_another_thread_stops_the_run_under_way(count_kernel):
    # oracle: the kernel's compute count -- the run stops at the node after the flag, not at the end; then the
    # session runs again in full
    n = 8
    s = onnxep.InferenceSession(_counting_model(n).SerializeToString())
    ro = onnxep.RunOptions()
    started, go_on = threading.Event(), threading.Event()

    def hook(name):
        if name == "main2":
            started.set()
            assert go_on.wait(10)

    count_kernel.hook = hook
    result = {}

    def run():
        try:
            result["out"] = s.run(["y"], _X, ro)
        except Exception as e:  # noqa: BLE001 - the test looks at it
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    assert started.wait(10)
    ro.terminate = True
    go_on.set()
    t.join(10)
    assert isinstance(result.get("error"), onnxep.Fail), result
    assert "Exiting due to terminate flag being set to true." in str(result["error"])
    main_calls = [c for c in count_kernel.calls if c.startswith("main")]
    assert main_calls == ["main0", "main1", "main2"]          # main3.. never ran
    count_kernel.calls.clear()
    count_kernel.hook = None
    ro.terminate = False
    np.testing.assert_array_equal(s.run(["y"], _X, ro)[0], np.full(4, n, np.float32))


def test_only_execute_path_to_fetches_runs_only_the_nodes_the_outputs_need(count_kernel):
    # oracle: the kernel's compute count (the side branch runs without the option, not with it); outputs: numpy
    s = onnxep.InferenceSession(_counting_model(3).SerializeToString())
    np.testing.assert_array_equal(s.run(["y"], _X)[0], np.full(4, 3, np.float32))
    assert sorted(count_kernel.calls) == ["main0", "main1", "main2", "side"]
    count_kernel.calls.clear()
    ro = onnxep.RunOptions()
    ro.only_execute_path_to_fetches = True
    for _ in range(2):                                       # (the pruned plan is made once, then reused)
        np.testing.assert_array_equal(s.run(["y"], _X, ro)[0], np.full(4, 3, np.float32))
        assert count_kernel.calls == ["main0", "main1", "main2"]
        count_kernel.calls.clear()
    np.testing.assert_array_equal(s.run(["z"], _X, ro)[0], np.ones(4, np.float32))
    assert count_kernel.calls == ["side"]


def test_only_execute_path_to_fetches_matches_onnxruntime_across_a_reference_partition():
    # oracle: onnxruntime's outputs for the same fetches; the Neg runs on the reference backend (a boundary)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu"), helper.make_node("Neg", ["a"], ["b"], name="neg"),
             helper.make_node("Add", ["b", "x"], ["y"], name="add"), helper.make_node("Abs", ["x"], ["z"], name="abs")]
    m = make_model(nodes, {"x": np.zeros((2, 3), np.float32)}, ["y", "z"])
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", "Neg")
    s = onnxep.InferenceSession(m.SerializeToString(), so)
    assert s.node_assignment["neg"] == "reference"
    x = {"x": np.arange(-3, 3, dtype=np.float32).reshape(2, 3)}
    ro, ro_ort = onnxep.RunOptions(), ort.RunOptions()
    ro.only_execute_path_to_fetches = ro_ort.only_execute_path_to_fetches = True
    theirs = _ort_session(m)
    for fetch in (["y"], ["z"], ["z", "y"]):
        for got, want in zip(s.run(fetch, x, ro), theirs.run(fetch, x, ro_ort)):
            np.testing.assert_array_equal(got, want)


def test_run_logging_goes_to_the_onnxep_logger_at_the_runs_level_tagged_with_logid(caplog):
    # oracle: the log records themselves (onnxruntime logs through its own sink, not Python's logging)
    s = onnxep.InferenceSession(_chain(3).SerializeToString())
    ro = onnxep.RunOptions()
    ro.logid = "run-42"
    with caplog.at_level(logging.DEBUG, logger="onnxep"):
        caplog.clear()
        s.run(None, _X, ro)                      # severity -1: the session's (default): no verbose records
        assert not [r for r in caplog.records if getattr(r, "logid", None) == "run-42"]
        ro.log_severity_level = 0
        s.run(None, _X, ro)
        tagged = [r for r in caplog.records if getattr(r, "logid", None) == "run-42"]
        assert tagged and all(r.name == "onnxep" and r.levelno == logging.DEBUG for r in tagged)
        assert not any("add1" in r.getMessage() for r in tagged)        # per node only from verbosity 1
        caplog.clear()
        ro.log_verbosity_level = 1
        s.run(None, _X, ro)
        msgs = [r.getMessage() for r in caplog.records if getattr(r, "logid", None) == "run-42"]
        assert any("'add1' (Add)" in m and "[run-42]" in m for m in msgs), msgs
        caplog.clear()
        ro.log_severity_level = 2                 # warning: the run's verbose records are gone
        s.run(None, _X, ro)
        assert not [r for r in caplog.records if getattr(r, "logid", None) == "run-42"]


def test_run_config_entries_type_checked_like_onnxruntime_unknown_ones_warned_once():
    # oracle: onnxruntime -- TypeError for non-str entries; any str key accepted
    for ro in (ort.RunOptions(), onnxep.RunOptions()):
        with pytest.raises(TypeError):
            ro.add_run_config_entry(1, 2)
    s = onnxep.InferenceSession(_chain(3).SerializeToString())
    ro = onnxep.RunOptions()
    ro.add_run_config_entry("no.such.key", "1")
    ro.add_run_config_entry("gpu_graph_id", "1")
    with pytest.warns(OptionWarning) as record:
        s.run(None, _X, ro)
    msgs = sorted(str(w.message) for w in record)
    assert any("'no.such.key' is not one onnxep knows" in m for m in msgs), msgs
    assert any("'gpu_graph_id' has nothing to act on" in m for m in msgs), msgs
    with warnings.catch_warnings():
        warnings.simplefilter("error")            # once per process: not again
        s.run(None, _X, ro)


def test_run_config_arena_shrinkage_hands_back_pooled_memory():
    # oracle: the session's pools (onnxruntime's key "memory.enable_memory_arena_shrinkage" = "cpu:0")
    m = _chain(4, (256, 256))
    s = onnxep.InferenceSession(m.SerializeToString())
    x = {"x": np.zeros((256, 256), np.float32)}
    for _ in range(3):
        s.run(None, x)
    memory = s._executor.memory
    assert memory.arena_bytes > 0
    ro = onnxep.RunOptions()
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    np.testing.assert_array_equal(s.run(None, x, ro)[0], np.full((256, 256), 4, np.float32))
    assert memory.arena_bytes == 0
    assert s._pool.pooled == 0
    np.testing.assert_array_equal(s.run(None, x)[0], np.full((256, 256), 4, np.float32))


# ---------------------------------------------------------------------------------------------- SessionOptions (item 2)
def test_inter_op_threads_and_parallel_mode_are_accepted_like_onnxruntime_and_warned_once():
    # oracle: onnxruntime accepts both (it runs them); onnxep runs nodes sequentially and says so, once
    m = _chain(3)
    so_ort = ort.SessionOptions()
    so_ort.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    so_ort.inter_op_num_threads = 2
    want = _ort_session(m, so_ort).run(None, _X)[0]
    so = onnxep.SessionOptions()
    so.execution_mode = onnxep.ExecutionMode.ORT_PARALLEL
    so.inter_op_num_threads = 2
    with pytest.warns(OptionWarning) as record:
        s = onnxep.InferenceSession(m.SerializeToString(), so)
    msgs = [str(w.message) for w in record]
    assert any("ORT_PARALLEL" in m and "sequentially" in m for m in msgs), msgs
    assert any("inter_op_num_threads=2" in m for m in msgs), msgs
    np.testing.assert_array_equal(s.run(None, _X)[0], want)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        onnxep.InferenceSession(m.SerializeToString(), so)        # once per process


def test_session_log_severity_verbose_names_each_nodes_backend_with_the_logid(caplog):
    # oracle: the partition itself (session.node_assignment); onnxruntime logs placement at verbose level too
    m = make_model([helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("Neg", ["a"], ["y"], name="n")],
                   {"x": np.zeros((2,), np.float32)}, ["y"])
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", "Neg")
    so.log_severity_level = 0
    so.logid = "sess-A"
    with caplog.at_level(logging.DEBUG, logger="onnxep"):
        s = onnxep.InferenceSession(m.SerializeToString(), so)
    msgs = [r.getMessage() for r in caplog.records if getattr(r, "logid", None) == "sess-A"]
    assert any("'r' -> cpu backend" in m for m in msgs) and any("'n' -> reference backend" in m for m in msgs), msgs
    assert s.node_assignment == {"r": "cpu", "n": "reference"}
    caplog.clear()
    so.log_severity_level = 3                    # error: nothing below it
    with caplog.at_level(logging.DEBUG, logger="onnxep"):
        onnxep.InferenceSession(m.SerializeToString(), so)
    assert not [r for r in caplog.records if getattr(r, "logid", None) == "sess-A"]


def test_enable_profiling_writes_onnxruntimes_trace_layout(tmp_path):
    # oracle: onnxruntime's profile of the same model -- the same session event names, one "<node>_kernel_time" Node
    # event per node per run with op_name and provider, the same event keys; end_profiling then returns ""
    m = _chain(3)
    files = {}
    for name, lib, mk in (("ort", ort, lambda so: _ort_session(m, so)),
                          ("ep", onnxep, lambda so: onnxep.InferenceSession(m.SerializeToString(), so))):
        so = lib.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = str(tmp_path / name)
        s = mk(so)
        s.run(None, _X)
        s.run(None, _X)
        files[name] = s.end_profiling()
        assert s.end_profiling() == ""
    ours, theirs = (json.load(open(files[k])) for k in ("ep", "ort"))
    assert files["ep"].startswith(str(tmp_path / "ep") + "_") and files["ep"].endswith(".json")
    session = lambda events: sorted({e["name"] for e in events if e["cat"] == "Session"})  # noqa: E731
    assert session(ours) == session(theirs)
    nodes = lambda events: sorted(e["name"] for e in events if e["cat"] == "Node")  # noqa: E731
    assert nodes(ours) == nodes(theirs) == sorted(["add0_kernel_time", "add1_kernel_time", "add2_kernel_time"] * 2)
    assert {k for e in ours for k in e} == {k for e in theirs for k in e}
    for e in ours:
        assert e["ph"] == "X" and e["dur"] >= 0 and e["ts"] >= 0
        if e["cat"] == "Node":
            assert e["args"]["op_name"] == "Add" and e["args"]["provider"] == "OnnxepExecutionProvider"
            assert e["args"]["output_type_shape"] == [{"float": [4]}]
    s = onnxep.InferenceSession(m.SerializeToString())
    assert s.end_profiling() == ""          # not profiling: onnxruntime's answer too


def test_enable_cpu_mem_arena_false_keeps_no_memory_between_runs():
    # oracle: the session's pools (onnxruntime keeps its arena's chunks with the option on, frees them with it off);
    # outputs: onnxruntime with the same option
    m = _chain(4, (256, 256))
    x = {"x": np.ones((256, 256), np.float32)}
    so_ort = ort.SessionOptions()
    so_ort.enable_cpu_mem_arena = False
    want = _ort_session(m, so_ort).run(None, x)[0]
    for no_arena in ("session option", "provider option"):
        so = onnxep.SessionOptions()
        if no_arena == "session option":
            so.enable_cpu_mem_arena = False
            s = onnxep.InferenceSession(m.SerializeToString(), so)
        else:
            s = onnxep.InferenceSession(m.SerializeToString(), providers=[("CPUExecutionProvider", {"use_arena": "0"})])
        for _ in range(3):
            np.testing.assert_array_equal(s.run(None, x)[0], want)
        assert s._pool is None and s._executor.memory.arena_bytes == 0
    s = onnxep.InferenceSession(m.SerializeToString())
    for _ in range(3):
        s.run(None, x)
    assert s._executor.memory.arena_bytes > 0          # (on: it is kept)


def test_enable_mem_reuse_false_gives_every_tensor_its_own_region():
    # oracle: the memory plan (no two planned allocations overlap); outputs: onnxruntime with the same option
    m = _chain(6, (64, 64))
    x = {"x": np.ones((64, 64), np.float32)}
    so_ort = ort.SessionOptions()
    so_ort.enable_mem_reuse = False
    want = _ort_session(m, so_ort).run(None, x)[0]
    plans = {}
    for reuse in (True, False):
        so = onnxep.SessionOptions()
        so.enable_mem_reuse = reuse
        s = onnxep.InferenceSession(m.SerializeToString(), so)
        for _ in range(3):
            np.testing.assert_array_equal(s.run(None, x)[0], want)
        (plan,) = [p for p in s._executor.memory.plans.values() if p is not None]
        plans[reuse] = plan
    placed = [(o, b) for o, b in zip(plans[False].offsets, plans[False].nbytes) if o >= 0]
    assert len(placed) >= 4
    spans = sorted(placed)
    assert all(o1 + b1 <= o2 for (o1, b1), (o2, _) in zip(spans, spans[1:]))      # disjoint
    assert plans[True].arena_size < plans[False].arena_size                       # (with reuse they share)


def test_use_deterministic_compute_repeated_runs_are_bit_identical():
    # oracle: onnxep's own earlier run (bit for bit, 2 threads, across runs and sessions); onnxruntime for closeness
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 96)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]), helper.make_node("Softmax", ["a"], ["b"], axis=-1),
             helper.make_node("ReduceSum", ["b", "axes"], ["y"], keepdims=0)]
    m = make_model(nodes, {"x": np.zeros((32, 64), np.float32)}, ["y"],
                   initializers={"w": w, "axes": np.array([0], np.int64)})
    x = {"x": rng.standard_normal((32, 64)).astype(np.float32)}
    so = onnxep.SessionOptions()
    so.use_deterministic_compute = True
    so.intra_op_num_threads = 2
    first = onnxep.InferenceSession(m.SerializeToString(), so).run(None, x)[0]
    for _ in range(2):
        s = onnxep.InferenceSession(m.SerializeToString(), so)
        for _ in range(5):
            assert s.run(None, x)[0].tobytes() == first.tobytes()
    np.testing.assert_allclose(first, _ort_session(m).run(None, x)[0], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------- disabled_optimizers (3)
def _gelu_model():
    x = "x"
    nodes = [helper.make_node("Div", [x, "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["f"]), helper.make_node("Mul", [x, "f"], ["g"]),
             helper.make_node("Mul", ["g", "half"], ["y"])]
    return make_model(nodes, {"x": np.zeros((2, 8), np.float32)}, ["y"],
                      initializers={"sqrt2": np.array(np.sqrt(2), np.float32), "one": np.array(1, np.float32),
                                    "half": np.array(0.5, np.float32)})


def _op_types(model, tmp_path, **kwargs):
    so = onnxep.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    s = onnxep.InferenceSession(model.SerializeToString(), so, **kwargs)
    return [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node], s


@pytest.mark.parametrize("names", [["fuse_gelu"], ["GeluFusion"], ["GeluFusionL1", "GeluFusionL2"]])
def test_disabled_optimizers_leave_the_named_pass_out(tmp_path, names):
    # oracle: onnxruntime -- its GeluFusionL1 / L2 disabled leave no Gelu in its optimized model either (1.32 knows
    # no plain "GeluFusion"); outputs equal
    m = _gelu_model()
    x = {"x": np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)}
    ops, _ = _op_types(m, tmp_path)
    assert "Gelu" in ops                                   # (the pass fires without the option)
    ops, s = _op_types(m, tmp_path, disabled_optimizers=names)
    assert "Gelu" not in ops and "Erf" in ops
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "ort.onnx")
    theirs = _ort_session(m, so, disabled_optimizers=["GeluFusionL1", "GeluFusionL2"])
    assert "Gelu" not in [n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node]
    np.testing.assert_allclose(s.run(None, x)[0], theirs.run(None, x)[0], rtol=1e-6, atol=1e-6)


def test_disabled_optimizers_unknown_name_accepted_like_onnxruntime_with_one_warning():
    # oracle: onnxruntime accepts a name it does not know (and ignores it); onnxep says so, once
    m = _chain(2)
    _ort_session(m, disabled_optimizers=["NoSuchOptimizer"])
    with pytest.warns(OptionWarning, match="'NoSuchOptimizer'"):
        onnxep.InferenceSession(m.SerializeToString(), disabled_optimizers=["NoSuchOptimizer"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        onnxep.InferenceSession(m.SerializeToString(), disabled_optimizers={"NoSuchOptimizer"})


# ---------------------------------------------------------------------------------------------- providers (items 4, 5)
def test_provider_options_read_like_onnxruntime():
    # oracle: onnxruntime's argument checks (ValueError, same messages) and string-valued get_provider_options
    m = _chain(2).SerializeToString()
    for bad, msg in (({"providers": ["CPUExecutionProvider"], "provider_options": [{}, {}]}, "same length"),
                     ({"providers": ["CPUExecutionProvider"], "provider_options": {}}, "should be a sequence"),
                     ({"providers": [("CPUExecutionProvider", {})], "provider_options": [{}]}, "Only string values"),
                     ({"providers": ["CPUExecutionProvider"], "provider_options": [1]}, "must be dicts")):
        with pytest.raises(ValueError, match=msg):
            onnxep.InferenceSession(m, **bad)
        with pytest.raises(ValueError, match=msg):        # (onnxruntime's own check, before its EP fallback retry)
            ort.capi.onnxruntime_inference_collection.check_and_normalize_provider_args(
                bad["providers"], bad["provider_options"], ort.get_available_providers())
    for kwargs in ({"providers": [("CPUExecutionProvider", {"use_arena": 0})]},
                   {"providers": ["CPUExecutionProvider"], "provider_options": [{"use_arena": "0"}]}):
        s = onnxep.InferenceSession(m, **kwargs)
        assert s.get_provider_options() == {"OnnxepExecutionProvider": {"use_arena": "0"},
                                            "OnnxReferenceExecutionProvider": {}}
        assert s._pool is None                              # honoured: no arena (see the enable_cpu_mem_arena test)
    with pytest.raises(onnxep.InvalidArgument, match="use_arena"):
        onnxep.InferenceSession(m, providers=["CPUExecutionProvider"], provider_options=[{"use_arena": "maybe"}])
    with pytest.warns(OptionWarning, match="'arena_extend_strategy'"):
        s = onnxep.InferenceSession(m, providers=[("CPUExecutionProvider", {"arena_extend_strategy": "x"})])
    assert s.get_provider_options()["OnnxepExecutionProvider"] == {}
    assert onnxep.InferenceSession(m).get_provider_options() == {"OnnxepExecutionProvider": {},
                                                                 "OnnxReferenceExecutionProvider": {}}


def test_reference_provider_alone_runs_every_node_on_the_reference_backend():
    # oracle: onnxruntime's outputs; placement from session.node_assignment; get_providers reflects the list
    rng = np.random.default_rng(1)
    m = make_model([helper.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
                    helper.make_node("Relu", ["a"], ["y"], name="relu")],
                   {"x": np.zeros((3, 4), np.float32)}, ["y"], initializers={"w": rng.standard_normal((4, 5),
                                                                                               dtype=np.float32)})
    x = {"x": rng.standard_normal((3, 4), dtype=np.float32)}
    want = _ort_session(m).run(None, x)[0]
    s = onnxep.InferenceSession(m.SerializeToString(), providers=["OnnxReferenceExecutionProvider"])
    assert s.get_providers() == ["OnnxReferenceExecutionProvider"]
    assert set(s.node_assignment.values()) == {"reference"}
    np.testing.assert_allclose(s.run(None, x)[0], want, rtol=1e-5, atol=1e-5)
    # order respected: reference first takes every node it can
    s = onnxep.InferenceSession(m.SerializeToString(), providers=["OnnxReferenceExecutionProvider",
                                                                  "CPUExecutionProvider"])
    assert s.get_providers() == ["OnnxReferenceExecutionProvider", "OnnxepExecutionProvider"]
    assert set(s.node_assignment.values()) == {"reference"}
    # the native provider (CPUExecutionProvider is its alias), the reference one appended as the fallback
    for providers in (["CPUExecutionProvider"], ["OnnxepExecutionProvider"], None):
        s = onnxep.InferenceSession(m.SerializeToString(), providers=providers)
        assert s.get_providers() == ["OnnxepExecutionProvider", "OnnxReferenceExecutionProvider"]
        assert set(s.node_assignment.values()) == {"cpu"}
        np.testing.assert_allclose(s.run(None, x)[0], want, rtol=1e-5, atol=1e-5)
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    s = onnxep.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    assert s.get_providers() == ["OnnxepExecutionProvider"]


# ---------------------------------------------------------------------------------------------- attributes (item 6)
def test_a_misspelt_option_raises_attribute_error_like_onnxruntime():
    # oracle: onnxruntime -- AttributeError on both classes
    for lib in (ort, onnxep):
        with pytest.raises(AttributeError):
            lib.SessionOptions().intra_op_num_thread = 1
        with pytest.raises(AttributeError):
            lib.RunOptions().terminat = True


def test_every_onnxruntime_option_attribute_exists_and_the_unsupported_methods_refuse():
    # oracle: dir(onnxruntime.SessionOptions()) / dir(onnxruntime.RunOptions())
    for ort_obj, ours in ((ort.SessionOptions(), onnxep.SessionOptions()), (ort.RunOptions(), onnxep.RunOptions())):
        names = {n for n in dir(ort_obj) if not n.startswith("_")}
        missing = {n for n in names if not hasattr(ours, n)}
        assert not missing, missing
        for n in names:
            if not callable(getattr(ort_obj, n)):
                setattr(ours, n, getattr(ours, n))            # every data attribute can be set
    so = onnxep.SessionOptions()
    so.add_free_dimension_override_by_name("N", 1)          # (issue 26: implemented, tests/api/client.py)
    with pytest.raises(onnxep.NotImplemented, match="register_custom_ops_library"):
        so.register_custom_ops_library("libfoo.so")
    assert so.has_providers() is False
    with pytest.raises(TypeError):
        so.add_session_config_entry(1, 2)
    with pytest.raises(TypeError):
        ort.SessionOptions().add_session_config_entry(1, 2)
    so.execution_order = onnxep.session.ExecutionOrder.PRIORITY_BASED
    so.use_per_session_threads = False
    with pytest.warns(OptionWarning) as record:
        onnxep.InferenceSession(_chain(2).SerializeToString(), so)
    msgs = [str(w.message) for w in record]
    assert any("execution_order PRIORITY_BASED" in m for m in msgs) and any("use_per_session_threads" in m
                                                                             for m in msgs), msgs
