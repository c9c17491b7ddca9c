"""C entries of the compiled run loop for the data-movement and small ops (issue 25: unary float32 ops, Pow by 2 / 0.5,
Cast, Where, Transpose, Concat, Slice, Expand, ReduceMean / ReduceSum over trailing axes).

Oracles: the same model run by the Python loop (device.COMPILED_RUNS off: the compiled runs must give the same
bits) and onnxruntime (tests._util.run_ort) for closeness; each model also checks that its op became a C step.
"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import assert_outputs_match, make_model, run_ort
from tests.graph.test_runloop import _programs, compiled_vs_python, spy_c_step

RNG = np.random.default_rng(25)


def _check(model, feeds_list, min_c, rtol=1e-5, atol=1e-6, ort=True):
    """Run feeds_list twice compiled and twice in the Python loop: equal bits, close to onnxruntime, and at least
    min_c C steps in a program."""
    got, progs = compiled_vs_python(model, feeds_list)
    assert progs and max(p.n_c for p in progs) >= min_c, [(p.n_c, p.n_py) for p in progs]
    if ort:
        for f, g in zip(feeds_list, got):
            assert_outputs_match(g, run_ort(model, f), rtol=rtol, atol=atol)
    return progs


def _f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _feeds(x, n=4, name="x", make=None):
    make = make or (lambda: RNG.standard_normal(x.shape).astype(x.dtype))
    return [{name: x}] + [{name: make()} for _ in range(n - 1)]


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Neg", "Sqrt", "Exp", "Erf", "Abs"])
def test_unary_f32(op):
    x = _f32(3, 5, 7)
    if op == "Sqrt":
        x = np.abs(x)
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node(op, ["a"], ["u"]),
             helper.make_node("Mul", ["u", "u"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y", "u"])
    mk = (lambda: np.abs(_f32(3, 5, 7))) if op == "Sqrt" else None
    progs = _check(model, _feeds(x, make=mk), 3)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("p", [2.0, 0.5])
def test_pow_constant_exponent(p):
    x = np.abs(_f32(4, 33)) + 0.1
    nodes = [helper.make_node("Pow", ["x", "e"], ["y"]), helper.make_node("Add", ["y", "y"], ["z"])]
    model = make_model(nodes, {"x": x}, ["z"], initializers={"e": np.array(p, np.float32)})
    _check(model, _feeds(x, make=lambda: np.abs(_f32(4, 33)) + 0.1), 2)


@pytest.mark.parametrize("src,dst", [(np.float32, np.float16), (np.float16, np.float32), (np.int64, np.int32),
                                     (np.int32, np.int64), (np.int64, np.float32), (np.bool_, np.float32),
                                     (np.float32, np.bool_), (np.float32, np.int64), (np.float64, np.float32),
                                     (np.int64, np.bool_)])
def test_cast(src, dst):
    def make():
        v = RNG.standard_normal((6, 20)) * 300
        v[0, :4] = [0.0, -0.0, np.inf, -np.inf]
        if np.dtype(src).kind == "f" and np.dtype(dst).kind == "f":
            v[1, 0] = np.nan
        v[2, :3] = [65519.9, 1e-8, 6.1e-5]     # float16 rounding edges (overflow, underflow, subnormal)
        if np.dtype(src).kind in "ib" or np.dtype(dst).kind in "ib":
            v = np.where(np.isfinite(v), v, 7)
        return v.astype(src)
    x = make()
    to = helper.np_dtype_to_tensor_dtype(np.dtype(dst))
    nodes = [helper.make_node("Cast", ["x"], ["y"], to=to), helper.make_node("Identity", ["y"], ["z"])]
    model = make_model(nodes, {"x": x}, ["z"])
    progs = _check(model, _feeds(x, make=make), 1, ort=np.dtype(src).kind != "f" or np.dtype(dst).kind != "i")
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("shapes", [((3, 1, 8), (3, 4, 8), (8,)), ((1, 1, 8, 8), (), (3, 2, 8, 8)),
                                    ((5, 17), (5, 17), (5, 17))])
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.float16])
def test_where(shapes, dt):
    sc, sa, sb = shapes
    c = RNG.random(sc) > 0.5
    a = (RNG.standard_normal(sa) * 10).astype(dt)
    b = (RNG.standard_normal(sb) * 10).astype(dt)
    nodes = [helper.make_node("Where", ["c", "a", "b"], ["y"])]
    model = make_model(nodes, {"c": c}, ["y"], initializers={"a": a, "b": b})
    _check(model, _feeds(c, make=lambda: RNG.random(sc) > 0.5, name="c"), 1)


@pytest.mark.parametrize("perm", [(1, 0, 2), (0, 2, 1, 3), (3, 2, 1, 0), (2, 0, 1), (0, 1, 2)])
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.uint8])
def test_transpose(perm, dt):
    shape = (3, 4, 6, 2)[:len(perm)]
    x = (RNG.standard_normal(shape) * 50).astype(dt)
    nodes = [helper.make_node("Identity", ["x"], ["xi"]), helper.make_node("Transpose", ["xi"], ["y"], perm=perm)]
    model = make_model(nodes, {"x": x}, ["y"])
    progs = _check(model, _feeds(x, make=lambda: (RNG.standard_normal(shape) * 50).astype(dt)), 1)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("shape,perm,dt", [
    ((2, 3, 37, 41), (0, 2, 3, 1), np.float32),     # NCHW -> NHWC of 3 channels: the channel-shuffle loop
    ((2, 40, 33, 35), (0, 2, 3, 1), np.float32),    # tiles with ragged edges
    ((2, 33, 35, 40), (0, 3, 1, 2), np.float16),    # NHWC -> NCHW, 2-byte tiles
    ((5, 7, 9, 16), (0, 2, 1, 3), np.float32),      # attention heads: rows of short runs
    ((130, 70), (1, 0), np.int8),                   # 1-byte tiles
    ((3, 1, 257, 1), (3, 2, 1, 0), np.int64),       # size-1 dims dropped: a copy
])
def test_transpose_tiled_step(monkeypatch, shape, perm, dt):
    """A Transpose of a 1, 2, 4 or 8-byte dtype is one RL_TRANSPOSE step (transpose_copy's plan and kernels) in the
    compiled run loop, for each of the plan's kinds; bits equal to the Python loop's and to numpy's transpose
    (oracle), onnxruntime close."""
    from onnxep.ops.tensor.transpose import Transpose_1
    kinds = spy_c_step(monkeypatch, Transpose_1)
    make = (lambda: (RNG.standard_normal(shape) * 50).astype(dt))
    x = make()
    nodes = [helper.make_node("Identity", ["x"], ["xi"]), helper.make_node("Transpose", ["xi"], ["y"], perm=perm)]
    model = make_model(nodes, {"x": x}, ["y"])
    feeds = _feeds(x, make=make)
    progs = _check(model, feeds, 1)
    assert max(p.n_py for p in progs) == 0 and kinds and set(kinds) == {"transpose"}, kinds
    got, _ = compiled_vs_python(model, feeds)
    for f, g in zip(feeds, got):
        assert np.array_equal(g[0], f["x"].transpose(perm))


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.float16])
def test_concat(axis, dt):
    x = (RNG.standard_normal((3, 2, 4)) * 9).astype(dt)
    shape_c = [3, 2, 4]
    shape_c[axis] = 5
    c = (RNG.standard_normal(shape_c) * 9).astype(dt)
    nodes = [helper.make_node("Concat", ["x", "c", "x"], ["y"], axis=axis)]
    model = make_model(nodes, {"x": x}, ["y"], initializers={"c": c})
    progs = _check(model, _feeds(x, make=lambda: (RNG.standard_normal((3, 2, 4)) * 9).astype(dt)), 1)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("starts,ends,axes,steps", [([1], [3], [0], [1]), ([0, -3], [10, 100], [1, 2], [1, 2]),
                                                    ([-1], [-100], [2], [-1]), ([2, 1], [0, 0], [0, 1], [-1, -1])])
def test_slice_constant(starts, ends, axes, steps):
    x = _f32(4, 5, 6)
    inits = {"s": np.array(starts, np.int64), "e": np.array(ends, np.int64), "a": np.array(axes, np.int64),
             "t": np.array(steps, np.int64)}
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Slice", ["n", "s", "e", "a", "t"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    progs = _check(model, _feeds(x), 2)
    assert max(p.n_py for p in progs) == 0


def test_slice_with_starts_from_a_feed_stays_in_python():
    """starts given by the user per run: the step may not bake them in."""
    x = _f32(6, 4)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Slice", ["n", "s", "e"], ["y"]),
             helper.make_node("Abs", ["y"], ["z"])]
    e = np.array([100], np.int64)
    model = make_model(nodes, {"x": x, "s": np.array([1], np.int64)}, ["z"], initializers={"e": e})
    sess = onnxep.InferenceSession(model.SerializeToString())
    for k in [1, 1, 1, 2, 3, 1]:
        s = np.array([k], np.int64)
        got = sess.run(None, {"x": x, "s": s})[0]
        np.testing.assert_array_equal(got, np.abs(-x[k:]))


def test_slice_with_starts_from_a_shape_computation():
    """starts computed by Python steps from the input's shape (checked by value each run)."""
    x = _f32(3, 8)
    nodes = [helper.make_node("Shape", ["x"], ["sh"]), helper.make_node("Gather", ["sh", "one"], ["n"]),
             helper.make_node("Div", ["n", "two"], ["h"]), helper.make_node("Unsqueeze", ["h", "zero"], ["hs"]),
             helper.make_node("Slice", ["x", "hs", "big", "onea"], ["y"]), helper.make_node("Relu", ["y"], ["z"])]
    inits = {"one": np.array(1, np.int64), "two": np.array(2, np.int64), "zero": np.array([0], np.int64),
             "big": np.array([1000], np.int64), "onea": np.array([1], np.int64)}
    model = make_model(nodes, {"x": x}, ["z"], initializers=inits)
    _check(model, _feeds(x), 1)


@pytest.mark.parametrize("xs,shape", [((3, 1), (3, 4)), ((1, 4), (2, 3, 4)), ((2, 1, 5), (2, 3, 5)), ((4,), (4,))])
def test_expand(xs, shape):
    x = _f32(*xs)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Expand", ["n", "s"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], initializers={"s": np.array(shape, np.int64)})
    progs = _check(model, _feeds(x), 2)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
@pytest.mark.parametrize("shape,axes,keep", [((3, 1, 64), [-1], 1), ((3, 5, 37), [2], 0), ((2, 3, 4, 9), [2, 3], 1),
                                             ((4, 1000), [1], 1)])
def test_reduce_trailing(op, shape, axes, keep):
    x = _f32(*shape)
    if op == "ReduceSum":
        nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node(op, ["n", "ax"], ["y"], keepdims=keep)]
        inits = {"ax": np.array(axes, np.int64)}
        opset = 13
    else:
        nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node(op, ["n"], ["y"], axes=axes, keepdims=keep)]
        inits, opset = {}, 17
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits, opset=opset)
    progs = _check(model, _feeds(x), 2, rtol=1e-4, atol=1e-5)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("xshape", [(3, 1, 16), (5, 16), (2, 3, 4, 16)])
def test_matmul_packed_weight(xshape):
    x = _f32(*xshape)
    w = _f32(16, 24)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("MatMul", ["n", "w"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], initializers={"w": w})
    progs = _check(model, _feeds(x), 2, rtol=1e-4, atol=1e-5)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("cshape", [None, (24,), (1, 24)])
def test_gemm_packed_weight_with_bias(cshape):
    x = _f32(5, 16)
    inits = {"w": _f32(24, 16)}
    ins = ["n", "w"]
    if cshape is not None:
        inits["c"] = _f32(*cshape)
        ins.append("c")
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Gemm", ins, ["y"], transB=1)]
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits)
    progs = _check(model, _feeds(x), 2, rtol=1e-4, atol=1e-5)
    assert max(p.n_py for p in progs) == 0


def test_gelu_opset20_and_cast_to_the_same_type():
    x = _f32(3, 7, 8)
    nodes = [helper.make_node("Gelu", ["x"], ["g"]), helper.make_node("Cast", ["g"], ["c"], to=1),
             helper.make_node("Neg", ["c"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], opset=20)
    progs = _check(model, _feeds(x), 3)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("sa,sb", [((3, 4, 5, 16), (3, 4, 16, 7)), ((3, 4, 5, 16), (1, 4, 16, 7)),
                                   ((5, 16), (2, 16, 7))])
def test_matmul_batched(sa, sb):
    a = _f32(*sa)
    b = _f32(*sb)
    nodes = [helper.make_node("Neg", ["a"], ["n"]), helper.make_node("MatMul", ["n", "b"], ["y"])]
    model = make_model(nodes, {"a": a}, ["y"], initializers={"b": b})
    progs = _check(model, _feeds(a, name="a"), 2, rtol=1e-4, atol=1e-5)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dt", [np.float32, np.int64, np.int32])
def test_compare(op, dt):
    a = (RNG.standard_normal((3, 5, 8)) * 3).astype(dt)
    b = (RNG.standard_normal((5, 1)) * 3).astype(dt)
    if dt == np.float32:
        a[0, 0, :2] = np.nan
        b[1, 0] = np.nan
    nodes = [helper.make_node(op, ["a", "b"], ["y"])]
    model = make_model(nodes, {"a": a}, ["y"], initializers={"b": b})
    mk = lambda: (RNG.standard_normal((3, 5, 8)) * 3).astype(dt)
    progs = _check(model, _feeds(a, name="a", make=mk), 1, ort=op in ("Equal", "Less", "Greater") or True)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Equal"])
def test_logic(op):
    a = RNG.random((3, 1, 11, 11)) > 0.5
    b = RNG.random((1, 11)) > 0.3
    nodes = [helper.make_node(op, ["a", "b"], ["c"]), helper.make_node("Not", ["c"], ["y"])]
    model = make_model(nodes, {"a": a}, ["y", "c"], initializers={"b": b})
    progs = _check(model, _feeds(a, name="a", make=lambda: RNG.random((3, 1, 11, 11)) > 0.5), 2)
    assert max(p.n_py for p in progs) == 0


def test_isnan_and_pow3():
    x = _f32(3, 4, 11, 11)
    x[0, 0, 0, :3] = np.nan
    nodes = [helper.make_node("IsNaN", ["x"], ["m"]), helper.make_node("Pow", ["x", "e"], ["p"]),
             helper.make_node("Where", ["m", "z", "p"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y", "m"], initializers={"e": np.array(3.0, np.float32),
                                                                 "z": np.array(0.0, np.float32)})
    progs = _check(model, _feeds(x), 3, rtol=1e-5, atol=1e-5)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("idx,axis", [(np.array([0, 1, 2, 3]), 0), (np.array(2), 1), (np.array([[4, 3], [2, 1]]), 1),
                                      (np.array([-1]), 2), (np.array([0, 2, 4]), 1)])
@pytest.mark.parametrize("idt", [np.int64, np.int32])
def test_gather_constant_indices(idx, axis, idt):
    x = _f32(6, 5, 7)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Gather", ["n", "i"], ["y"], axis=axis)]
    model = make_model(nodes, {"x": x}, ["y"], initializers={"i": idx.astype(idt)})
    progs = _check(model, _feeds(x), 2)
    assert max(p.n_py for p in progs) == 0


def test_gather_with_fed_indices_checks_them():
    """Indices fed per run are read by the C step; one out of range stops the compiled run and the step's Python
    compute raises its error; the session then works as before."""
    x = _f32(10, 8)
    nodes = [helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Gather", ["n", "i"], ["y"])]
    model = make_model(nodes, {"x": x, "i": np.zeros((3, 30), np.int64)}, ["y"])
    sess = onnxep.InferenceSession(model.SerializeToString())
    for k in range(6):
        i = RNG.integers(-10, 10, (3, 30))
        np.testing.assert_array_equal(sess.run(None, {"x": x, "i": i})[0], -x[i])
    assert _programs(sess) and max(p.n_py for p in _programs(sess)) == 0
    for bad in (10, -11):
        i = RNG.integers(-10, 10, (3, 30))
        i[2, 7] = bad
        with pytest.raises(Exception, match="indices must be in"):
            sess.run(None, {"x": x, "i": i})
    for k in range(4):
        i = RNG.integers(-10, 10, (3, 30))
        np.testing.assert_array_equal(sess.run(None, {"x": x, "i": i})[0], -x[i])


def test_small_integer_results_feeding_shapes_stay_checked():
    """x's values pick a Reshape target through small int64 steps: those steps stay in Python (checked each run),
    so a run whose values change the target leaves the compiled path instead of reusing the captured shape."""
    x = np.array([2, 6], np.int64)
    nodes = [helper.make_node("Mul", ["x", "one"], ["s"]), helper.make_node("Reshape", ["d", "s"], ["r"]),
             helper.make_node("Neg", ["r"], ["y"])]
    d = _f32(12)
    model = make_model(nodes, {"x": x}, ["y"], initializers={"one": np.array([1, 1], np.int64), "d": d})
    sess = onnxep.InferenceSession(model.SerializeToString())
    for v in ([2, 6], [2, 6], [2, 6], [3, 4], [4, 3], [2, 6]):
        np.testing.assert_array_equal(sess.run(None, {"x": np.array(v, np.int64)})[0], -d.reshape(v))


def test_results_written_over_their_operands():
    """The arena may give a result the memory of an operand it no longer needs (in place): a bool result over its
    int64 operands (Less of two views of one Range) and over a float32 one (IsNaN) must still be right."""
    x = _f32(3, 7, 4)
    nodes = [helper.make_node("Shape", ["x"], ["sx"]), helper.make_node("Gather", ["sx", "i1"], ["s"]),
             helper.make_node("Range", ["zero", "s", "one"], ["pos"]),
             helper.make_node("Unsqueeze", ["pos", "ax1"], ["col"]), helper.make_node("Unsqueeze", ["pos", "ax0"], ["row"]),
             helper.make_node("Less", ["row", "col"], ["future"]), helper.make_node("Cast", ["future"], ["futf"], to=1),
             helper.make_node("Mul", ["futf", "neg"], ["mask"]), helper.make_node("Neg", ["x"], ["nx"]),
             helper.make_node("IsNaN", ["nx"], ["isn"]), helper.make_node("Not", ["isn"], ["ok"])]
    inits = {"i1": np.array(1, np.int64), "zero": np.array(0, np.int64), "one": np.array(1, np.int64),
             "ax0": np.array([0], np.int64), "ax1": np.array([1], np.int64), "neg": np.array(-100.0, np.float32)}
    model = make_model(nodes, {"x": x}, ["mask", "ok"], initializers=inits, input_shapes={"x": ["b", "s", 4]})
    sess = onnxep.InferenceSession(model.SerializeToString())
    for shape in [(3, 7, 4), (3, 7, 4), (2, 9, 4), (3, 7, 4), (3, 7, 4), (3, 7, 4), (2, 9, 4), (2, 9, 4)]:
        xi = _f32(*shape)
        xi[0, 0, 0] = np.nan
        pos = np.arange(shape[1])
        mask, ok = sess.run(None, {"x": xi})
        np.testing.assert_array_equal(mask, (pos[None, :] < pos[:, None]).astype(np.float32) * -100)
        np.testing.assert_array_equal(ok, ~np.isnan(xi))


@pytest.mark.parametrize("pa,pb,py,a_shape,b_shape", [
    ((0, 2, 1, 3), (0, 2, 3, 1), (0, 1, 2, 3), (3, 11, 4, 16), (3, 11, 4, 16)),
    ((0, 1, 3, 2), (0, 1, 2, 3), (0, 2, 1, 3), (2, 1, 6, 5), (1, 3, 6, 7)),
])
def test_strided_matmul(pa, pb, py, a_shape, b_shape):
    """Transpose / MatMul / Transpose, fused into com.onnxep StridedMatMul, in C."""
    a, b = _f32(*a_shape), _f32(*b_shape)
    nodes = [helper.make_node("Neg", ["a"], ["na"]),
             helper.make_node("Transpose", ["na"], ["at"], perm=list(pa)),
             helper.make_node("Transpose", ["b"], ["bt"], perm=list(pb)),
             helper.make_node("MatMul", ["at", "bt"], ["p"]), helper.make_node("Transpose", ["p"], ["y"], perm=list(py))]
    model = make_model(nodes, {"a": a, "b": b}, ["y"])
    feeds = [{"a": _f32(*a_shape), "b": _f32(*b_shape)} for _ in range(4)]
    progs = _check(model, feeds, 2, rtol=1e-4, atol=1e-5)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("axis,split", [(2, [64, 64, 64]), (1, [2, 9]), (0, [1, 2]), (-1, [10, 100, 82])])
def test_split(axis, split):
    x = _f32(3, 11, 192)
    nodes = [helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("Split", ["n", "s"], [f"y{i}" for i in range(len(split))], axis=axis)]
    model = make_model(nodes, {"x": x}, [f"y{i}" for i in range(len(split))],
                       initializers={"s": np.array(split, np.int64)})
    progs = _check(model, _feeds(x), 2)
    assert max(p.n_py for p in progs) == 0


def _w(*shape):
    return (RNG.standard_normal(shape) * 0.3).astype(np.float32)


@pytest.mark.parametrize("c", [8, 24])
def test_nhwc_conv_steps(c):
    """The channel-last convs (NhwcConv: dense with bias and Relu, a 1x1 with a residual Add, Winograd-sized 3x3,
    depthwise 3x3 / Clip and 5x5 stride 2 / HardSwish) all become C steps (RL_CONV_NHWC, RL_DW_NHWC): no Python step
    is left in the program."""
    inits = {"w0": _w(c, 4, 3, 3), "b0": _w(c), "wd": _w(c, 1, 3, 3), "bd": _w(c), "w1": _w(c, c, 1, 1),
             "w2": _w(c, c, 3, 3), "w5": _w(c, 1, 5, 5), "lo": np.float32(0), "hi": np.float32(6)}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "wd", "bd"], ["cd"], group=c, pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["cd", "lo", "hi"], ["k"]),
             helper.make_node("Conv", ["k", "w1"], ["c1"]),
             helper.make_node("Add", ["c1", "r0"], ["s"]),
             helper.make_node("Conv", ["s", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["c2", "w5"], ["c5"], group=c, pads=[2, 2, 2, 2], strides=[2, 2]),
             helper.make_node("HardSwish", ["c5"], ["y"])]
    x = _f32(2, 4, 11, 12)
    model = make_model(nodes, {"x": x}, ["y", "s"], initializers=inits, opset=17)
    # atol: the 24-channel 3x3 conv runs Winograd F(4x4), whose rounding grows with the channels and the tile
    # (tests/kernels/test_conv_winograd.py _tol: about 3e-5 here on values near 1)
    progs = _check(model, _feeds(x), 7, rtol=1e-4, atol=1e-4)
    assert any(p.n_py == 0 for p in progs), [(p.n_c, p.n_py) for p in progs]


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "ReduceMean"])
@pytest.mark.parametrize("c,hw", [(16, (8, 8)), (37, (5, 3)), (70, (1, 1))])
def test_global_pool_channel_last(op, c, hw):
    """A global pool (or torch's spatial ReduceMean) after a conv runs channel-last (NhwcGlobal*Pool) as the
    RL_GPOOL_NHWC step: compiled equals the Python loop bit for bit, onnxruntime is the oracle, no Python step."""
    x = _f32(2, 3, *hw)
    inits = {"w": _f32(c, 3, 1, 1)}
    pool = helper.make_node(op, ["r"], ["y"], axes=[2, 3]) if op == "ReduceMean" else helper.make_node(op, ["r"], ["y"])
    nodes = [helper.make_node("Conv", ["x", "w"], ["cv"]), helper.make_node("Relu", ["cv"], ["r"]), pool]
    model = make_model(nodes, {"x": x}, ["y"], initializers=inits, opset=17)
    progs = _check(model, _feeds(x), 2, rtol=1e-4, atol=1e-5)
    assert max(p.n_py for p in progs) == 0, [(p.n_c, p.n_py) for p in progs]


@pytest.mark.parametrize("ceil", [0, 1])
def test_nhwc_pool_steps(ceil):
    """The channel-last pools (NhwcMaxPool, NhwcAveragePool with and without count_include_pad, NhwcGlobalAveragePool,
    NhwcGlobalMaxPool) after a conv become C steps (RL_POOL_NHWC, RL_GPOOL_NHWC): no Python step is left."""
    c = 16
    inits = {"w0": _w(c, 3, 3, 3), "b0": _w(c)}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["c0"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              ceil_mode=ceil),
             helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              count_include_pad=1),
             helper.make_node("AveragePool", ["a"], ["a2"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=ceil),
             helper.make_node("GlobalAveragePool", ["a2"], ["g"]),
             helper.make_node("GlobalMaxPool", ["a2"], ["gm"])]
    x = _f32(2, 3, 13, 12)
    model = make_model(nodes, {"x": x}, ["g", "gm", "m"], initializers=inits, opset=17)
    progs = _check(model, _feeds(x), 5, rtol=1e-4, atol=1e-5)
    assert any(p.n_py == 0 for p in progs), [(p.n_c, p.n_py) for p in progs]


@pytest.mark.parametrize("shape", [(1, 3, 9, 7), (3, 3, 8, 5), (2, 2, 5, 6), (2, 4, 3, 3), (1, 8, 4, 5),
                                   (2, 5, 3, 4), (3, 3, 1, 1)])
@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_transpose_nchw_to_nhwc_few_channels(shape, dt):
    """NCHW -> NHWC of few channels (a network's input) is one RL_TRANSPOSE C step (transpose_copy's plan; its
    channel-shuffle loop for 4-byte elements). Oracles: the Python loop (same bits), onnxruntime."""
    x = (RNG.standard_normal(shape) * 50).astype(dt)
    nodes = [helper.make_node("Identity", ["x"], ["xi"]),
             helper.make_node("Transpose", ["xi"], ["y"], perm=[0, 2, 3, 1])]
    model = make_model(nodes, {"x": x}, ["y"])
    progs = _check(model, _feeds(x, make=lambda: (RNG.standard_normal(shape) * 50).astype(dt)), 1)
    assert max(p.n_py for p in progs) == 0


@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("shape,group", [((1, 64, 70, 24), 2), ((3, 7, 7, 12), 3), ((2, 5, 5, 20), 5),
                                         ((1, 230, 231, 8), 4)])
def test_channel_shuffle_step(shape, group, nthreads):
    """com.onnxep ChannelShuffle on float32 runs as an RL_TRANSPOSE C step (any group count; large ones on both
    threads). Oracle: numpy (reshape, swap the last two axes, reshape), bit-exact, every run."""
    x = _f32(*shape)
    model = make_model([helper.make_node("Identity", ["x"], ["xi"]),
                        helper.make_node("ChannelShuffle", ["xi"], ["y"], domain="com.onnxep", group=group)],
                       {"x": x}, ["y"])
    model.opset_import.append(helper.make_opsetid("com.onnxep", 1))
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = nthreads
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    for _ in range(3):
        x = _f32(*shape)
        want = x.reshape(shape[:-1] + (group, shape[-1] // group)).swapaxes(-1, -2).reshape(shape)
        np.testing.assert_array_equal(sess.run(None, {"x": x})[0], want)
    progs = _programs(sess)
    assert progs and max(p.n_py for p in progs) == 0 and max(p.n_c for p in progs) >= 1
