"""The shape-subgraph pass (graph/passes/fold_shape_subgraphs.py) and its com.onnxep ShapeSubgraph kernel
(ops/onnxep/shape_subgraph.py): values that depend only on the input shapes are computed once per signature.

Oracle: onnxruntime's CPU provider on the original model (tests._util.run_ort), every run; the same model through
onnxep with the pass disabled (disabled_optimizers=["fold_shape_subgraphs"]). The plans are inspected for which nodes
were folded."""
import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from onnxep.ops.onnxep import shape_subgraph
from tests._util import cpu_only_options, fallback_options, run_ort

RNG = np.random.default_rng(24)
I64 = np.int64


def _model(nodes, inputs, outputs, inits=None, opset=17):
    """inputs / outputs: (name, elem type, shape with symbolic dims)."""
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _session(model, so=None, on=True):
    kw = {} if on else {"disabled_optimizers": ["fold_shape_subgraphs"]}
    return onnxep.InferenceSession(model.SerializeToString(), so, **kw)


def _ops(sess):
    return collections.Counter(st[6] for p in sess.plans for st in getattr(p, "steps", ()))


def _kernels(sess):
    return [st[0] for p in sess.plans for st in getattr(p, "steps", ()) if st[6] == "ShapeSubgraph"]


def _check(sess, model, feeds):
    got = sess.run(None, feeds)
    want = run_ort(model, feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    return got


# ------------------------------------------------------------------------------------ a dynamic batch / sequence model
def _attention_like():
    """x (batch, seq, 4): reshaped by a target built from Shape(x), plus a causal mask built from the sequence length
    (Range, Unsqueeze, Less, Cast, Mul) added to x @ x^T -- the shape logic exporters write."""
    nodes = [
        helper.make_node("Shape", ["x"], ["sx"]),
        helper.make_node("Gather", ["sx", "i0"], ["b"]),
        helper.make_node("Gather", ["sx", "i1"], ["s"]),
        helper.make_node("Unsqueeze", ["b", "ax0"], ["b1"]),
        helper.make_node("Unsqueeze", ["s", "ax0"], ["s1"]),
        helper.make_node("Mul", ["b1", "s1"], ["bs"]),
        helper.make_node("Concat", ["bs", "four"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["flat"]),
        helper.make_node("Range", ["zero", "s", "one"], ["pos"]),
        helper.make_node("Unsqueeze", ["pos", "ax0"], ["row"]),
        helper.make_node("Unsqueeze", ["pos", "ax1"], ["col"]),
        helper.make_node("Less", ["row", "col"], ["future"]),
        helper.make_node("Cast", ["future"], ["futf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["futf", "neg"], ["mask"]),
        helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["x", "xt"], ["scores"]),
        helper.make_node("Add", ["scores", "mask"], ["masked"]),
        helper.make_node("Relu", ["masked"], ["y"]),
    ]
    inits = {"i0": np.array(0, I64), "i1": np.array(1, I64), "ax0": np.array([0], I64), "ax1": np.array([1], I64),
             "four": np.array([4], I64), "zero": np.array(0, I64), "one": np.array(1, I64),
             "neg": np.array(-100.0, np.float32)}
    return _model(nodes, [("x", TensorProto.FLOAT, ["batch", "seq", 4])],
                  [("y", TensorProto.FLOAT, None), ("flat", TensorProto.FLOAT, None),
                   ("mask", TensorProto.FLOAT, None)], inits)


def test_shape_logic_is_folded_and_cached_per_signature():
    m = _attention_like()
    sess, plain = _session(m), _session(m, on=False)
    ops = _ops(sess)
    assert ops["ShapeSubgraph"] == 1
    assert not {"Shape", "Gather", "Unsqueeze", "Concat", "Range", "Less", "Cast"} & set(ops)
    assert sum(ops.values()) < sum(_ops(plain).values())
    (kernel,) = _kernels(sess)
    xa = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    xb = RNG.standard_normal((3, 7, 4)).astype(np.float32)
    for x in (xa, xb, xa, xb, xb, xa):       # two signatures, alternately
        got = _check(sess, m, {"x": x})
        for g, p in zip(got, plain.run(None, {"x": x})):
            np.testing.assert_array_equal(g, p)
    assert len(kernel._cache) == 2
    # every cached array is read-only
    for outs, _ in kernel._cache.values():
        assert all(not v.flags.writeable for v in outs)


def test_disabled_by_name():
    sess = _session(_attention_like(), on=False)
    assert "ShapeSubgraph" not in _ops(sess) and _ops(sess)["Shape"] == 1


def test_graph_output_from_the_cache_is_the_callers_own():
    m = _attention_like()
    sess = _session(m)
    x = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    _, _, mask = sess.run(None, {"x": x})
    assert mask.flags.writeable
    mask[...] = 7.0          # the caller writes into what it got: the next run is unaffected
    _check(sess, m, {"x": x})


# ------------------------------------------------------------------------------- data-dependent shapes stay unfolded
def test_nonzero_upstream_keeps_its_shape_logic_unfolded():
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),                 # (rank, count): count depends on x's data
        helper.make_node("Transpose", ["nz"], ["nzt"]),              # shape from a non-determined shape
        helper.make_node("Shape", ["nzt"], ["snz"]),
        helper.make_node("Gather", ["snz", "i0"], ["count"]),
        helper.make_node("Range", ["zero", "count", "one"], ["r"]),
        helper.make_node("Shape", ["x"], ["sx"]),                   # x's shape: folded
        helper.make_node("ReduceProd", ["sx"], ["size"], keepdims=1),
        helper.make_node("Sub", ["size", "one1"], ["last"]),
        helper.make_node("Concat", ["r", "last"], ["y"], axis=0),
    ]
    m = _model(nodes, [("x", TensorProto.FLOAT, ["n"])], [("y", TensorProto.INT64, None)],
               {"i0": np.array(0, I64), "zero": np.array(0, I64), "one": np.array(1, I64),
                "one1": np.array([1], I64)})
    sess = _session(m)
    ops = _ops(sess)
    assert ops["ShapeSubgraph"] == 1
    assert ops["Shape"] == 1 and ops["Gather"] == 1 and ops["Range"] == 1      # after NonZero: as they were
    (kernel,) = _kernels(sess)
    assert kernel.info.input_types[0].shape == ("n",)          # the folded part reads x's shape only
    # same shape, different data: the count changes, the folded part does not
    for x in ([0, 1, 2, 0, 3], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0], [0, 1, 2, 0, 3], [5, 0, 0]):
        _check(sess, m, {"x": np.array(x, np.float32)})
    assert len(kernel._cache) == 2


def test_shape_read_after_a_data_dependent_reshape_is_not_folded():
    # Reshape's target comes from the data of an input: what follows has no shape-determined shape
    nodes = [helper.make_node("Reshape", ["x", "t"], ["xr"]),
             helper.make_node("Shape", ["xr"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["d0"]),
             helper.make_node("Unsqueeze", ["d0", "ax0"], ["y"])]
    m = _model(nodes, [("x", TensorProto.FLOAT, ["n"]), ("t", TensorProto.INT64, [2])],
               [("y", TensorProto.INT64, None)], {"i0": np.array(0, I64), "ax0": np.array([0], I64)})
    sess = _session(m)
    assert "ShapeSubgraph" not in _ops(sess)
    x = np.arange(12, dtype=np.float32)
    for t in ([3, 4], [4, 3], [2, 6], [3, 4]):
        _check(sess, m, {"x": x, "t": np.array(t, I64)})


# ----------------------------------------------------------------------------------- the cache is never written into
def test_in_place_consumers_do_not_corrupt_the_cache():
    # ConstantOfShape(Shape(x)) and its negation are cached; Add, Mul and Sub (kernels that may compute in place over
    # an input: Kernel.inplace) read them -- over many runs the memory planner records, then plans, in-place reuse
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["ones"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.5])),
             helper.make_node("Neg", ["ones"], ["negones"]),
             helper.make_node("Add", ["negones", "x"], ["a"]),         # may write over input 0 or 1
             helper.make_node("Mul", ["ones", "a"], ["m"]),            # likewise
             helper.make_node("Sub", ["m", "negones"], ["y"])]
    m = _model(nodes, [("x", TensorProto.FLOAT, ["b", 3])], [("y", TensorProto.FLOAT, None)])
    sess = _session(m)
    assert _ops(sess)["ShapeSubgraph"] == 1
    (kernel,) = _kernels(sess)
    for k in range(6):
        x = RNG.standard_normal((2 + k % 2, 3)).astype(np.float32)
        _check(sess, m, {"x": x})
    assert sorted(kernel._outs) == ["negones", "ones"] and len(kernel._cache) == 2
    for outs, _ in kernel._cache.values():
        for name, v in zip(kernel._outs, outs):
            assert not v.flags.writeable
            np.testing.assert_array_equal(v, np.full(v.shape, 1.5 if name == "ones" else -1.5, np.float32))


def test_large_outputs_are_computed_every_run(monkeypatch):
    monkeypatch.setattr(shape_subgraph, "MAX_BYTES", 64)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["ones"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
             helper.make_node("Neg", ["ones"], ["n"]),
             helper.make_node("Add", ["x", "n"], ["y"])]
    m = _model(nodes, [("x", TensorProto.FLOAT, ["a", "b"])], [("y", TensorProto.FLOAT, None)])
    sess = _session(m)
    (kernel,) = _kernels(sess)
    for shape in ((2, 3), (40, 3), (2, 3), (40, 3)):
        _check(sess, m, {"x": RNG.standard_normal(shape).astype(np.float32)})
    assert [k[0] for k in kernel._cache] == [(2, 3)]          # 40 x 3 floats: over the (patched) limit


# --------------------------------------------------------------------------------- levels, topological order, errors
def test_shapes_of_intermediate_tensors_make_later_levels():
    # Shape(k) is known only once k is computed: a second ShapeSubgraph, which reads the first one's values (data);
    # the lone Shape(h) between is moved before its reader
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("Gather", ["sx", "i1"], ["seq"]),
             helper.make_node("MatMul", ["h", "w"], ["k"]),
             helper.make_node("Shape", ["k"], ["sk"]),
             helper.make_node("Shape", ["h"], ["sh"]),
             helper.make_node("Concat", ["sk", "sh", "seq"], ["shapes"], axis=0),
             helper.make_node("Slice", ["shapes", "s3", "s5"], ["lead"]),
             helper.make_node("Concat", ["lead", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["k", "target"], ["y"])]
    m = _model(nodes, [("x", TensorProto.FLOAT, ["b", "s", 4])],
               [("y", TensorProto.FLOAT, None), ("shapes", TensorProto.INT64, None)],
               {"w": RNG.standard_normal((4, 4)).astype(np.float32), "i1": np.array([1], I64),
                "s3": np.array([3], I64), "s5": np.array([5], I64), "minus1": np.array([-1], I64)})
    sess = _session(m)
    ops = _ops(sess)
    assert ops["ShapeSubgraph"] == 2 and ops["MatMul"] == 2 and ops["Reshape"] == 1
    for shape in ((2, 3, 4), (1, 5, 4), (2, 3, 4), (1, 5, 4)):
        _check(sess, m, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_error_inside_names_the_inner_node_and_session_stays_usable():
    # Reshape(Range(0, seq), [2, -1]) inside the folded part: an odd sequence length cannot be split in two
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["n"]),
             helper.make_node("Range", ["zero", "n", "one"], ["r"]),
             helper.make_node("Reshape", ["r", "two"], ["halves"], name="split_in_two"),
             helper.make_node("Cast", ["halves"], ["hf"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["hf", "ax0"], ["col"], keepdims=0),
             helper.make_node("Add", ["x", "col"], ["y"])]
    m = _model(nodes, [("x", TensorProto.FLOAT, ["n"])], [("y", TensorProto.FLOAT, None)],
               {"i0": np.array(0, I64), "zero": np.array(0, I64), "one": np.array(1, I64),
                "two": np.array([2, -1], I64), "ax0": np.array([0], I64)})
    sess = _session(m)
    assert _ops(sess)["ShapeSubgraph"] == 1
    with pytest.raises(onnxep.errors.OnnxepError, match="split_in_two"):
        sess.run(None, {"x": np.zeros(5, np.float32)})
    (kernel,) = _kernels(sess)
    assert not kernel._cache
    _check(sess, m, {"x": np.zeros(2, np.float32)})


# ------------------------------------------------------------------------------------------ fallback, export, reload
def test_fallback_off_and_forced_ops_unchanged():
    m = _attention_like()
    x = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    off = _session(m, cpu_only_options())
    assert set(off.node_assignment.values()) == {"cpu"} and _ops(off)["ShapeSubgraph"] == 1
    _check(off, m, {"x": x})
    # op types forced onto the reference backend stay nodes of their own, outside the folded part
    forced, plain = _session(m, fallback_options("Unsqueeze")), _session(m, fallback_options("Unsqueeze"), on=False)
    ref = sorted(n for n, b in forced.node_assignment.items() if b == "reference")
    assert ref == sorted(n for n, b in plain.node_assignment.items() if b == "reference") and len(ref) == 4
    for shape in ((2, 5, 4), (1, 3, 4), (2, 5, 4)):
        _check(forced, m, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_optimized_model_file_round_trip(tmp_path):
    m = _attention_like()
    so = onnxep.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    _session(m, so)
    opt = onnx.load(so.optimized_model_filepath)
    (node,) = [n for n in opt.graph.node if n.op_type == "ShapeSubgraph"]
    assert node.domain == "com.onnxep"
    again = onnxep.InferenceSession(so.optimized_model_filepath)
    for shape in ((2, 5, 4), (3, 2, 4)):
        _check(again, m, {"x": RNG.standard_normal(shape).astype(np.float32)})


def test_epcontext_round_trip(tmp_path):
    # (no 0-d constant: an EPContext blob gives those back 1-d, folded or not -- reported, graph/epcontext.py)
    nodes = [helper.make_node("Shape", ["x"], ["sx"]),
             helper.make_node("Slice", ["sx", "s0", "s2"], ["lead"]),
             helper.make_node("ReduceProd", ["lead"], ["rows"], keepdims=1),
             helper.make_node("Concat", ["rows", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["flat"]),
             helper.make_node("ConstantOfShape", ["rows"], ["w"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             helper.make_node("Unsqueeze", ["w", "ax1"], ["wcol"]),
             helper.make_node("Mul", ["flat", "wcol"], ["y"])]
    m = _model(nodes, [("x", TensorProto.FLOAT, ["b", "s", 4])], [("y", TensorProto.FLOAT, None)],
               {"s0": np.array([0], I64), "s2": np.array([2], I64), "minus1": np.array([-1], I64),
                "ax1": np.array([1], I64)})
    so = onnxep.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_file_path", str(tmp_path / "ctx.onnx"))
    assert _ops(_session(m, so))["ShapeSubgraph"] == 1
    loaded = onnxep.InferenceSession(str(tmp_path / "ctx.onnx"))
    assert _ops(loaded)["ShapeSubgraph"] == 1
    for shape in ((2, 5, 4), (3, 2, 4), (2, 5, 4)):
        _check(loaded, m, {"x": RNG.standard_normal(shape).astype(np.float32)})


# ------------------------------------------------------------------------- per-layer shape logic (a decoder's layers)
def _layers(n, shift=(0, 0)):
    """x (b, s, 4) -> per layer i: k_i = Relu(x + i) (an intermediate, so its shape logic is a ShapeSubgraph of its
    own), flattened by a target built from Shape(k_i); and per layer the same Shape(x) arithmetic (seq + 1, as a
    decoder's past length plus the new token) -- the repetition the exporters write. shift: a layer whose constant
    differs (its body is not the same)."""
    nodes, outs, inits = [], [], {"i1": np.array([1], I64), "one": np.array([1], I64), "minus1": np.array([-1], I64)}
    for i in range(n):
        inits[f"c{i}"] = np.array(float(i), np.float32)
        nodes += [helper.make_node("Add", ["x", f"c{i}"], [f"a{i}"]), helper.make_node("Relu", [f"a{i}"], [f"k{i}"]),
                  helper.make_node("Shape", [f"k{i}"], [f"sk{i}"]),
                  helper.make_node("Gather", [f"sk{i}", "i1"], [f"n{i}"]),
                  helper.make_node("Concat", [f"n{i}", "minus1"], [f"t{i}"], axis=0),
                  helper.make_node("Reshape", [f"k{i}", f"t{i}"], [f"y{i}"]),
                  helper.make_node("Shape", ["x"], [f"sx{i}"]),
                  helper.make_node("Gather", [f"sx{i}", "i1"], [f"s{i}"]),
                  helper.make_node("Add", [f"s{i}", "one" if i != shift[0] or not shift[1] else "two"], [f"p{i}"])]
        outs += [(f"y{i}", TensorProto.FLOAT, None), (f"p{i}", TensorProto.INT64, None)]
    if shift[1]:
        inits["two"] = np.array([2], I64)
    return _model(nodes, [("x", TensorProto.FLOAT, ["b", "s", 4])], outs, inits)


def test_identical_bodies_share_one_cache_and_repeats_in_a_body_compute_once(monkeypatch):
    """Per-layer ShapeSubgraphs whose bodies are the same up to names share one cache: a new shape is computed by
    the first layer and read by the others (one evaluation per signature, not one per layer); inside a body the
    same node over equal inputs runs once. Oracle: onnxruntime on the original model."""
    m = _layers(4)
    sess = _session(m)
    ks = _kernels(sess)
    per_layer = [k for k in ks if k._n_shape == 1 and len(k._steps) < 6]
    assert len(per_layer) == 4 and len({id(k._cache) for k in per_layer}) == 1
    evals, computes = [], []
    orig = shape_subgraph.ShapeSubgraph_1._evaluate

    def count(self, ctx):
        evals.append(self)
        return orig(self, ctx)
    monkeypatch.setattr(shape_subgraph.ShapeSubgraph_1, "_evaluate", count)
    for k in ks:
        for st in k._steps:
            f = st[0].compute
            monkeypatch.setattr(st[0], "compute", lambda ctx, f=f: (computes.append(1), f(ctx))[1])
    for shape in ((2, 3, 4), (1, 6, 4), (2, 3, 4), (3, 7, 4)):
        before = len(evals)
        _check(sess, m, {"x": RNG.standard_normal(shape).astype(np.float32)})
        new = len(evals) - before
        assert new in (0, 2), new          # the graph-input body and one per-layer body; a known shape: none
    merged = [k for k in ks if k not in per_layer]
    assert merged and max(len(k._steps) for k in merged) >= 12       # 4 layers x (Shape, Gather, Add)
    # three new shapes: the per-layer body's 3 nodes and the merged body's 3 distinct ones, each run once per shape
    assert len(computes) == 3 * (3 + 3)
    # which nodes run is planned once per pattern of equal inputs (_schedule): one pattern over the three shapes
    assert [len(k._schedules) for k in merged] == [1] * len(merged)


def test_inputs_equal_in_one_run_and_not_in_the_next():
    """A body reading two inputs' shapes plans which nodes run per pattern of equal inputs (_schedule): with the
    two shapes equal, one Shape -> Gather -> Add chain runs for both; with them different, each its own. Runs
    alternate between the two patterns. Oracle: onnxruntime."""
    i64 = {"i1": np.array([1], I64), "one": np.array([1], I64), "two": np.array([2], I64)}
    nodes = []
    for x in ("x", "y"):
        nodes += [helper.make_node("Shape", [x], [f"s{x}"]), helper.make_node("Gather", [f"s{x}", "i1"], [f"n{x}"]),
                  helper.make_node("Add", [f"n{x}", "one"], [f"p{x}"]),
                  helper.make_node("Mul", [f"p{x}", "two"], [f"q{x}"])]
    m = _model(nodes, [("x", TensorProto.FLOAT, ["b", "s", 4]), ("y", TensorProto.FLOAT, ["b", "t", 4])],
               [("qx", TensorProto.INT64, None), ("qy", TensorProto.INT64, None)], i64)
    sess = _session(m)
    (k,) = _kernels(sess)
    for s, t in ((3, 3), (3, 5), (6, 6), (2, 7), (7, 2), (4, 4)):
        got = _check(sess, m, {"x": np.zeros((2, s, 4), np.float32), "y": np.zeros((2, t, 4), np.float32)})
        assert (int(got[0][0]), int(got[1][0])) == (2 * (s + 1), 2 * (t + 1))
    assert len(k._schedules) == 2
    equal = min(k._schedules.values(), key=lambda sch: len(sch[0]))
    assert len(equal[0]) == len(max(k._schedules.values(), key=lambda sch: len(sch[0]))[0]) - 4


def test_bodies_that_differ_keep_their_own_cache():
    """A layer whose constant differs has a body of its own: no shared cache with the others, and its values are
    its own (oracle: onnxruntime)."""
    m = _layers(3, shift=(1, True))
    sess = _session(m)
    for shape in ((2, 3, 4), (1, 5, 4)):
        got = _check(sess, m, {"x": RNG.standard_normal(shape).astype(np.float32)})
        assert got[3][0] == shape[1] + 2 and got[1][0] == got[5][0] == shape[1] + 1
