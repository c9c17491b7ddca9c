"""C entries of the compiled run loop for the decoder slice: RMSNormalization / RotaryHalf / RotaryInterleaved (the
fused ops of graph/passes/fuse_rms_norm.py, fuse_rotary.py), GatherND, ArgMax / ArgMin, int64 Add / Sub / Mul; small
integer results read through a view op's data; ShapeSubgraph outputs kept as the program's constants.

Oracles: the same model run by the Python loop (device.COMPILED_RUNS off: the compiled runs must give the same bits)
and onnxruntime (tests._util.run_ort) for closeness; each model also checks which steps stayed in Python.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import make_model, run_ort
from tests.graph.test_decoder_fusions import _interleaved_model, _rms_nodes, _rotary_feeds, _rotary_model
from tests.graph.test_runloop import _programs, compiled_vs_python
from tests.graph.test_runloop_ops import _check

RNG = np.random.default_rng(43)


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _python_steps(prog):
    return [s for s in prog.segments if not s[0]]


@pytest.mark.parametrize("form", ["div1", "reciprocal", "divx"])
def test_rms_norm_c_step(form):
    x = _f32(3, 5, 16)
    nodes = _rms_nodes(form, cast=False) + [helper.make_node("Relu", ["y"], ["z"])]
    inits = {"two": np.array(2.0, np.float32), "axes": np.array([-1], np.int64), "eps": np.array(1e-6, np.float32),
             "one": np.array(1.0, np.float32), "w": _f32(16)}
    model = make_model(nodes, {"x": x}, ["z"], initializers=inits, opset=18)
    progs = _check(model, [{"x": _f32(3, 5, 16)} for _ in range(3)], 2)
    assert not any(_python_steps(p) for p in progs)


@pytest.mark.parametrize("order", ["torchscript", "dynamo"])
def test_rotary_half_c_step(order):
    model = _rotary_model("const", order=order)
    feeds = [_rotary_feeds() for _ in range(3)]
    progs = _check(model, feeds, 1)
    assert not any(_python_steps(p) for p in progs)


def test_rotary_half_uneven_split_stays_python():
    """Split points off the half: the numpy path, a Python step (nothing else to compile)."""
    got, progs = compiled_vs_python(_rotary_model("const", a=5, b=5), [_rotary_feeds() for _ in range(3)])
    assert not progs


def test_rotary_interleaved_c_step():
    def feeds():
        ang = np.repeat(RNG.uniform(0, 6, (2, 5, 1, 4)).astype(np.float32), 2, axis=-1)
        return {"q": _f32(2, 5, 2, 8), "cos": np.cos(ang), "sin": np.sin(ang)}
    progs = _check(_interleaved_model("const"), [feeds() for _ in range(3)], 1)
    assert not any(_python_steps(p) for p in progs)


@pytest.mark.parametrize("xs,idx,b", [
    ((6, 3, 11, 16), np.array([[-1]]), 0),                       # falcon: one slice of a leading dim
    ((3, 11, 8), np.array([[0, 10], [1, 3], [2, -11]]), 0),      # clip: one row per batch
    ((3, 11, 8), np.array([[4], [10], [-2]]), 1),                # batch_dims 1
    ((4, 5), np.array([[[1, 2], [3, 4]], [[0, 0], [-1, -5]]]), 0),  # scalars out
])
@pytest.mark.parametrize("idt", [np.int64])       # (int32 indices: not in the spec, onnxruntime refuses them)
def test_gather_nd_c_step(xs, idx, b, idt):
    x = _f32(*xs)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("GatherND", ["n", "i"], ["g"], batch_dims=b),
             helper.make_node("Relu", ["g"], ["y"])]
    model = make_model(nodes, {"x": x, "i": idx.astype(idt)}, ["y"])
    feeds = [{"x": _f32(*xs), "i": idx.astype(idt)} for _ in range(3)]
    progs = _check(model, feeds, 3)
    assert not any(_python_steps(p) for p in progs)


def test_gather_nd_bool_mask_and_bad_index():
    """A bool mask gathered by fed indices (the decoders' causal-mask GatherND); an index out of range stops the
    compiled run and the Python step raises its error; the session then works as before."""
    m = RNG.random((3, 30)) > 0.3         # (over planner.SIGNATURE_INT_ELEMS: values not in the signature)
    nodes = [helper.make_node("Not", ["m"], ["nm"]), helper.make_node("GatherND", ["nm", "i"], ["g"]),
             helper.make_node("Not", ["g"], ["y"])]
    idx = np.stack(np.meshgrid(np.arange(3), np.arange(30), indexing="ij"), -1).reshape(3, 1, 1, 30, 2)
    model = make_model(nodes, {"m": m, "i": idx}, ["y"])
    sess = onnxep.InferenceSession(model.SerializeToString())
    for _ in range(4):
        i = idx.copy()
        i[..., 1] = RNG.integers(-30, 30, i.shape[:-1])
        mm = RNG.random((3, 30)) > 0.5
        np.testing.assert_array_equal(sess.run(None, {"m": mm, "i": i})[0], run_ort(model, {"m": mm, "i": i})[0])
    progs = _programs(sess)
    assert progs and not any(_python_steps(p) for p in progs)
    i = idx.copy()
    i[1, 0, 0, 3, 1] = 30
    with pytest.raises(Exception, match="must be in"):
        sess.run(None, {"m": m, "i": i})
    np.testing.assert_array_equal(sess.run(None, {"m": m, "i": idx})[0], m.reshape(3, 1, 1, 30))


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.int32])
@pytest.mark.parametrize("axis,last", [(1, 0), (0, 0), (-1, 1), (2, 0)])
def test_arg_extreme_c_step(op, dt, axis, last):
    def x():
        return RNG.integers(-3, 4, (3, 11, 5)).astype(dt)     # ties
    nodes = [helper.make_node(op, ["x"], ["a"], axis=axis, keepdims=0, select_last_index=last),
             helper.make_node("Add", ["a", "a"], ["y"])]
    model = make_model(nodes, {"x": x()}, ["y"], opset=13)
    python = last and dt == np.float32      # (the last NaN: numpy's flip, a Python step)
    progs = _check(model, [{"x": x()} for _ in range(3)], 1 if python else 2)
    if not python:
        assert not any(_python_steps(p) for p in progs)


def test_argmax_float_nan_first():
    x = _f32(4, 9)
    x[1, 3] = x[1, 6] = np.nan
    x[2, 0] = np.nan
    nodes = [helper.make_node("ArgMax", ["x"], ["a"], axis=1, keepdims=1), helper.make_node("Add", ["a", "a"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], opset=13)
    got = _check(model, [{"x": x}, {"x": x}], 2, ort=False)
    sess = onnxep.InferenceSession(model.SerializeToString())
    for _ in range(3):
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], 2 * np.argmax(x, axis=1, keepdims=True))
    assert got


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul"])
@pytest.mark.parametrize("sa,sb", [((3, 11), ()), ((3, 11), (3, 11)), ((3, 1, 11), (1, 4, 1)), ((5,), (2, 1))])
@pytest.mark.parametrize("dt,bits", [(np.int64, 40), (np.int32, 20)])
def test_int_arith_c_step(op, sa, sb, dt, bits):
    def v(shape):
        return RNG.integers(-2 ** bits, 2 ** bits, shape).astype(dt)
    nodes = [helper.make_node(op, ["a", "b"], ["c"]), helper.make_node("Mul", ["c", "c"], ["y"])]
    model = make_model(nodes, {"a": v(sa), "b": v(sb)}, ["y"])
    progs = _check(model, [{"a": v(sa), "b": v(sb)} for _ in range(3)], 2)   # (wrapping as numpy and ort do)
    assert not any(_python_steps(p) for p in progs)


def test_small_ints_through_a_view_stay_c():
    """clip_text's pooled row: ArgMax of the ids -> Unsqueeze -> Concat with the batch index -> GatherND; the small
    integer results flow through the view's data into C steps, so nothing goes back to Python."""
    ids = RNG.integers(0, 50, (3, 11)).astype(np.int64)
    h = _f32(3, 11, 8)
    nodes = [helper.make_node("Cast", ["ids"], ["i32"], to=6),
             helper.make_node("ArgMax", ["i32"], ["am"], axis=-1, keepdims=0),
             helper.make_node("Unsqueeze", ["am", "ax"], ["amu"]),
             helper.make_node("Concat", ["bidx", "amu"], ["ix"], axis=1),
             helper.make_node("Neg", ["h"], ["nh"]),
             helper.make_node("GatherND", ["nh", "ix"], ["y"])]
    inits = {"ax": np.array([1], np.int64), "bidx": np.arange(3, dtype=np.int64).reshape(3, 1)}
    model = make_model(nodes, {"ids": ids, "h": h}, ["y"], initializers=inits, opset=13)
    feeds = [{"ids": RNG.integers(0, 50, (3, 11)).astype(np.int64), "h": _f32(3, 11, 8)} for _ in range(3)]
    progs = _check(model, feeds, 5)
    assert not any(_python_steps(p) for p in progs)


def test_small_ints_read_as_shape_by_a_view_stay_python():
    """A small int64 result read as a Reshape's shape input: its producer stays a Python step (checked per run)."""
    x = _f32(2, 6)
    nodes = [helper.make_node("Add", ["s", "z"], ["s2"]), helper.make_node("Reshape", ["x", "s2"], ["r"]),
             helper.make_node("Neg", ["r"], ["y"])]
    model = make_model(nodes, {"x": x, "s": np.array([3, 4], np.int64)}, ["y"],
                       initializers={"z": np.array([0, 0], np.int64)})
    progs = _check(model, [{"x": _f32(2, 6), "s": np.array([3, 4], np.int64)} for _ in range(3)], 1)
    assert all(_python_steps(p) for p in progs)


def test_shape_subgraph_outputs_are_program_constants():
    """Shape logic folded into ShapeSubgraph nodes (graph/passes/fold_shape_subgraphs.py) does not run in compiled
    runs: its outputs are the program's constants; a new signature compiles anew with its own values."""
    def model_for():
        nodes = [helper.make_node("Shape", ["x"], ["sh"]),
                 helper.make_node("Gather", ["sh", "zero"], ["b"], axis=0),
                 helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]),
                 helper.make_node("Concat", ["bu", "m1"], ["tgt"], axis=0),
                 helper.make_node("Neg", ["x"], ["n"]),
                 helper.make_node("Reshape", ["n", "tgt"], ["r"]),
                 helper.make_node("Relu", ["r"], ["y"])]
        inits = {"zero": np.array(0, np.int64), "ax": np.array([0], np.int64), "m1": np.array([-1], np.int64)}
        return make_model(nodes, {"x": _f32(2, 3, 4)}, ["y"], initializers=inits, input_shapes={"x": ["b", 3, 4]})
    model = model_for()
    progs = _check(model, [{"x": _f32(2, 3, 4)} for _ in range(3)], 2)
    assert not any(_python_steps(p) for p in progs)
    sess = onnxep.InferenceSession(model.SerializeToString())
    for b in (2, 5, 2, 5, 1, 1):
        x = _f32(b, 3, 4)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], np.maximum(-x, 0).reshape(b, -1))


@pytest.mark.parametrize("dt", [np.int64, np.int32, np.float32])
@pytest.mark.parametrize("axis,excl,rev", [(1, 0, 0), (0, 1, 0), (-1, 0, 1), (1, 1, 1)])
def test_cumsum_c_step(dt, axis, excl, rev):
    """The decoders' position ids (CumSum of the attention mask), float32 sums in sequence as numpy adds them."""
    def x():
        return (RNG.integers(-5, 6, (3, 30)) if dt != np.float32 else RNG.standard_normal((3, 30))).astype(dt)
    nodes = [helper.make_node("CumSum", ["x", "a"], ["c"], exclusive=excl, reverse=rev),
             helper.make_node("Less", ["c", "x"], ["y"])]
    model = make_model(nodes, {"x": x()}, ["y", "c"], initializers={"a": np.array(axis, np.int64)}, opset=14)
    progs = _check(model, [{"x": x()} for _ in range(3)], 2)
    assert not any(_python_steps(p) for p in progs)


@pytest.mark.parametrize("ms", [(3, 1, 11, 11), (3, 1, 1, 11), (11, 11), (3, 4, 11, 1)])
def test_masked_softmax_c_step(ms):
    """Add -> Softmax (graph/passes/fuse_softmax_mask.py's MaskedSoftmax) with the mask broadcast over heads / rows."""
    s = _f32(3, 4, 11, 11)
    nodes = [helper.make_node("Neg", ["s"], ["n"]), helper.make_node("Add", ["n", "m"], ["a"]),
             helper.make_node("Softmax", ["a"], ["p"], axis=-1), helper.make_node("Relu", ["p"], ["y"])]
    model = make_model(nodes, {"s": s, "m": _f32(*ms)}, ["y"], opset=13)
    progs = _check(model, [{"s": _f32(3, 4, 11, 11), "m": _f32(*ms)} for _ in range(3)], 3)
    assert not any(_python_steps(p) for p in progs)


@pytest.mark.parametrize("xs,ids,axis", [
    ((3, 130), (3, 11), 1),             # roberta: position embeddings' ids
    ((12, 11, 64), (12, 11, 11), -1),   # deberta: relative positions
    ((5, 4, 3), (2, 4, 3), 0),
    ((5, 4, 3), (5, 2, 6), 2),          # a dim of the indices below data's
])
@pytest.mark.parametrize("dt", [np.float32, np.int64])
def test_gather_elements_c_step(xs, ids, axis, dt):
    n = xs[axis]
    def feeds():
        x = (RNG.standard_normal(xs) * 100).astype(dt)
        return {"x": x, "i": RNG.integers(-n, n, ids).astype(np.int64)}
    nodes = [helper.make_node("Identity", ["x"], ["xx"]),
             helper.make_node("GatherElements", ["xx", "i"], ["g"], axis=axis),
             helper.make_node("Add", ["g", "g"], ["y"])]
    f = feeds()
    model = make_model(nodes, f, ["y"], opset=13)
    progs = _check(model, [f] + [feeds() for _ in range(2)], 2)
    assert not any(_python_steps(p) for p in progs)


def test_gather_elements_bad_index_is_the_named_error():
    x = _f32(4, 30)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("GatherElements", ["n", "i"], ["y"], axis=1)]
    model = make_model(nodes, {"x": x, "i": np.zeros((4, 20), np.int64)}, ["y"], opset=13)
    sess = onnxep.InferenceSession(model.SerializeToString())
    for _ in range(4):
        i = RNG.integers(-30, 30, (4, 20))
        np.testing.assert_array_equal(sess.run(None, {"x": x, "i": i})[0], -np.take_along_axis(x, i % 30, 1))
    assert _programs(sess) and not any(_python_steps(p) for p in _programs(sess))
    i[3, 19] = 30
    with pytest.raises(Exception, match="GatherElements"):
        sess.run(None, {"x": x, "i": i})
    i[3, 19] = -30
    np.testing.assert_array_equal(sess.run(None, {"x": x, "i": i})[0], -np.take_along_axis(x, i % 30, 1))


def test_rotary_layout_cache_matches_numpy_broadcast_strides():
    """rotary_half._bstrides gives np.broadcast_to's strides (the layout cache rotary_rows keys by shapes and
    strides), for Cos / Sin of lower rank, repeated dims and transposed views (oracle: numpy)."""
    from onnxep.ops.onnxep.rotary_half import _bstrides
    x = (2, 3, 5, 8)
    for t in (_f32(5, 8), _f32(1, 1, 5, 8), _f32(3, 1, 8), _f32(8, 5).T, _f32(2, 1, 5, 1), _f32(1)):
        if len(t.shape) <= len(x) and all(a in (1, b) for a, b in zip(t.shape[::-1], x[::-1])):
            want = np.broadcast_to(t, x).strides
            got = _bstrides(t, x)
            assert all(g == w for g, w, n in zip(got, want, x) if n != 1), (t.shape, got, want)
