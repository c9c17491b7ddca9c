"""Gradient (ai.onnx.preview.training) expanded into backward nodes (graph/passes/expand_gradient.py).

Oracles: central finite differences in float64 of sum(y), y computed by onnx.reference on the forward nodes alone (the
model without its Gradient node, promoted to double), and analytic gradients written in numpy. No onnxruntime: it has
no Gradient kernel. Every session runs with the fallback off (session.disable_cpu_ep_fallback=1), so the expansion
runs on the cpu backend alone."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import onnxep
from onnxep.errors import NotImplemented as OnnxepNotImplemented

TRAIN = "ai.onnx.preview.training"
_ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE}


def _model(nodes, inputs, xs, y, *, zs=(), grad_inputs=None, outputs=None, initializers=None, opset=17,
           shapes=None, gname="grad"):
    """Forward `nodes`, then Gradient(grad_inputs or xs + zs; xs, zs, y) writing d_<x>; outputs: y and the d_<x>."""
    shapes = shapes or {}
    initializers = initializers or {}
    grad_outs = [f"d_{x}" for x in xs]
    g = helper.make_node("Gradient", list(grad_inputs or list(xs) + list(zs)), grad_outs, name=gname, domain=TRAIN,
                         xs=list(xs), y=y, **({"zs": list(zs)} if zs else {}))
    ins = [helper.make_tensor_value_info(n, _ELEM[a.dtype], shapes.get(n, a.shape)) for n, a in inputs.items()]
    outs = [helper.make_empty_tensor_value_info(n) for n in (outputs or [y] + grad_outs)]
    inits = [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()]
    graph = helper.make_graph(list(nodes) + [g], "grad", ins, outs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(TRAIN, 1)],
                             ir_version=8)


def _session(model, level=None, **kw):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if level is not None:
        so.graph_optimization_level = level
    return onnxep.InferenceSession(model.SerializeToString(), so, **kw)


def _forward64(model, y):
    """sum(y) as a function of the feeds, in float64 via onnx.reference on the forward nodes."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    nodes = [n for n in m.graph.node if n.op_type != "Gradient"]
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    for vi in list(m.graph.input):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for t in m.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t).astype(np.float64), t.name))
    del m.graph.output[:]
    m.graph.output.append(helper.make_empty_tensor_value_info(y))
    del m.graph.value_info[:]
    ev = ReferenceEvaluator(m)
    return lambda feeds: float(np.sum(ev.run(None, feeds)[0]))


def _fd(model, y, feeds, wrt, eps=1e-6, f=None):
    """d sum(y) / d feeds[wrt], central differences in float64 (of f(feeds), default the forward nodes' sum(y))."""
    f = f or _forward64(model, y)
    base = {k: np.asarray(v, np.float64) if np.asarray(v).dtype.kind == "f" else v for k, v in feeds.items()}
    x = base[wrt]
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        g[i] = (f({**base, wrt: hi}) - f({**base, wrt: lo})) / (2 * eps)
    return g


def _check_fd(model, feeds, xs, y="y", rtol=1e-5, atol=1e-6, level=None, f=None):
    sess = _session(model, level)
    got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    for x in xs:
        want = _fd(model, y, feeds, x, f=f)
        assert got[f"d_{x}"].shape == feeds[x].shape
        assert got[f"d_{x}"].dtype == feeds[x].dtype
        np.testing.assert_allclose(got[f"d_{x}"], want, rtol=rtol, atol=atol, err_msg=f"d{y}/d{x}")
    assert all(b == "cpu" for b in sess.node_assignment.values())
    assert "grad" not in sess.node_assignment          # the Gradient node itself is gone
    return got


RNG = np.random.default_rng(0)


def _r(*shape, dtype=np.float64, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(dtype)


# --- the two backend-suite cases' graphs


@pytest.mark.parametrize("level", [0, 1, 99])
def test_suite_gradient_of_add(level):
    nodes = [helper.make_node("Add", ["a", "b"], ["c"], name="my_add")]
    a, b = np.array(1.5, np.float32), np.array(-2.0, np.float32)
    m = _model(nodes, {"a": a, "b": b}, ["a", "b"], "c", opset=12)
    c, da, db = _session(m, level).run(None, {"a": a, "b": b})
    assert c == a + b and da == 1 and db == 1 and da.dtype == np.float32 and da.shape == ()


@pytest.mark.parametrize("level", [0, 99])
def test_suite_gradient_of_add_and_mul(level):
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Mul", ["c", "a"], ["d"])]
    a, b = np.array(0.7, np.float32), np.array(2.5, np.float32)
    m = _model(nodes, {"a": a, "b": b}, ["a", "b"], "d", opset=12)
    d, da, db = _session(m, level).run(None, {"a": a, "b": b})
    np.testing.assert_allclose([d, da, db], [a * (a + b), 2 * a + b, a], rtol=1e-6)
    _check_fd(m, {"a": a.astype(np.float64).astype(np.float32), "b": b}, ["a", "b"], y="d", rtol=1e-4)


# --- a 2-layer MLP


def _mlp_nodes():
    return [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
            helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["o"]),
            helper.make_node("ReduceMean", ["o"], ["y"], keepdims=0)]


def test_mlp_weights_and_input():
    x, w1, b1, w2 = _r(6, 4, dtype=np.float32), _r(4, 5, dtype=np.float32), _r(5, dtype=np.float32), \
        _r(5, 3, dtype=np.float32)
    m = _model(_mlp_nodes(), {"x": x, "w1": w1, "b1": b1, "w2": w2}, ["w1", "b1", "w2", "x"], "y", opset=17)
    feeds = {"x": x, "w1": w1, "b1": b1, "w2": w2}
    got = _check_fd(m, feeds, ["w1", "b1", "w2", "x"], rtol=1e-4, atol=1e-6)
    # analytic backprop in float64
    x64, w164, b164, w264 = (v.astype(np.float64) for v in (x, w1, b1, w2))
    hb = x64 @ w164 + b164
    r = np.maximum(hb, 0)
    do = np.full((6, 3), 1.0 / 18)
    dr = do @ w264.T
    dhb = dr * (hb > 0)
    np.testing.assert_allclose(got["d_w2"], r.T @ do, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(got["d_w1"], x64.T @ dhb, rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(got["d_b1"], dhb.sum(0), rtol=1e-4, atol=1e-7)
    np.testing.assert_allclose(got["d_x"], dhb @ w164.T, rtol=1e-4, atol=1e-7)


def test_mlp_weights_as_initializers_zs_input():
    """xs are initializers (the weights), the data is a zs input: the usual training graph."""
    x, w1, b1, w2 = _r(3, 4), _r(4, 5), _r(5), _r(5, 3)
    m = _model(_mlp_nodes(), {"x": x}, ["w1", "b1", "w2"], "y", zs=["x"],
               initializers={"w1": w1, "b1": b1, "w2": w2})
    sess = _session(m)
    y, dw1, db1, dw2 = sess.run(None, {"x": x})
    f = _forward64(m, "y")
    for name, got, w in (("w1", dw1, w1), ("b1", db1, b1), ("w2", dw2, w2)):
        want = np.zeros_like(w)
        for i in np.ndindex(w.shape):
            hi, lo = w.copy(), w.copy()
            hi[i] += 1e-6
            lo[i] -= 1e-6
            want[i] = (f({"x": x, name: hi}) - f({"x": x, name: lo})) / 2e-6
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-8)


# --- broadcasting


def test_broadcast_3x1_plus_1x4():
    a, b = _r(3, 1), _r(1, 4)
    nodes = [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Mul", ["c", "b"], ["y"])]
    m = _model(nodes, {"a": a, "b": b}, ["a", "b"], "y")
    got = _check_fd(m, {"a": a, "b": b}, ["a", "b"])
    # y = (a + b) b: dy/da = sum_j b_j, dy/db_j = sum_i (a_i + 2 b_j)
    np.testing.assert_allclose(got["d_a"], np.full((3, 1), b.sum()), rtol=1e-12)
    np.testing.assert_allclose(got["d_b"], (a + 2 * b).sum(0, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_broadcast_rank_and_ones_every_opset(opset):
    """Leading axes (keepdims=0) and size-1 axes (keepdims=1) at once, in the axes form of each opset."""
    a, b, c = _r(2, 3, 4), _r(3, 1), _r(4)
    nodes = [helper.make_node("Sub", ["a", "b"], ["s"]), helper.make_node("Div", ["s", "c"], ["y"])]
    c = c + np.sign(c) * 0.5                      # away from 0
    m = _model(nodes, {"a": a, "b": b, "c": c}, ["a", "b", "c"], "y", opset=opset)
    _check_fd(m, {"a": a, "b": b, "c": c}, ["a", "b", "c"], rtol=1e-5, atol=1e-7)


# --- symbolic shapes


def test_symbolic_batch_two_sizes():
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["hb"]),
             helper.make_node("Mul", ["hb", "s"], ["t"]), helper.make_node("Tanh", ["t"], ["u"]),
             helper.make_node("ReduceSum", ["u"], ["y"], keepdims=0)]
    w, b = _r(4, 3), _r(3)
    x0, s0 = _r(2, 4), _r(2, 1)
    m = _model(nodes, {"x": x0, "s": s0}, ["w", "b", "x", "s"], "y", initializers={"w": w, "b": b}, opset=11,
               shapes={"x": ["N", 4], "s": ["N", 1]})
    sess = _session(m)
    for n in (2, 5):
        x, s = _r(n, 4), _r(n, 1)
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"x": x, "s": s})))
        for name, ref in (("x", x), ("s", s)):
            want = _fd(m, "y", {"x": x, "s": s, "w": w, "b": b}, name)
            np.testing.assert_allclose(got[f"d_{name}"], want, rtol=1e-5, atol=1e-8)
            assert got[f"d_{name}"].shape == ref.shape
        want_w = _fd(m, "y", {"x": x, "s": s, "w": w, "b": b}, "w")
        np.testing.assert_allclose(got["d_w"], want_w, rtol=1e-5, atol=1e-8)
        want_b = _fd(m, "y", {"x": x, "s": s, "w": w, "b": b}, "b")
        np.testing.assert_allclose(got["d_b"], want_b, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("opset", [11, 17])
def test_dynamic_broadcast_axis(opset):
    """x's dim is a symbol other than the result's: whether it was broadcast is known at run time only."""
    nodes = [helper.make_node("Mul", ["x", "z"], ["y"])]
    m = _model(nodes, {"x": _r(1, 3), "z": _r(4, 3)}, ["x", "z"], "y", opset=opset,
               shapes={"x": ["A", 3], "z": ["B", 3]})
    sess = _session(m)
    for a, bdim in ((1, 4), (4, 4), (1, 1), (3, 1)):
        x, z = _r(a, 3), _r(bdim, 3)
        dx, dz = sess.run(None, {"x": x, "z": z})[1:]
        np.testing.assert_allclose(dx, np.broadcast_to(z, np.broadcast_shapes(x.shape, z.shape)).sum(0, keepdims=True)
                                   if a == 1 else z * np.ones_like(x), rtol=1e-12)
        np.testing.assert_allclose(dz, np.broadcast_to(x, np.broadcast_shapes(x.shape, z.shape)).sum(0, keepdims=True)
                                   if bdim == 1 else x * np.ones_like(z), rtol=1e-12)
        assert dx.shape == x.shape and dz.shape == z.shape


# --- one op each


def _unary(op, x, opset=17, **attrs):
    return _model([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x}, ["x"], "y", opset=opset)


@pytest.mark.parametrize("op,lo,hi", [("Neg", -1, 1), ("Identity", -1, 1), ("Relu", -1, 1), ("Sigmoid", -3, 3),
                                      ("Tanh", -2, 2), ("Exp", -1, 1), ("Log", 0.2, 3), ("Sqrt", 0.2, 3),
                                      ("Abs", -1, 1), ("Reciprocal", 0.5, 2)])
def test_unary(op, lo, hi):
    x = _r(3, 4, lo=lo, hi=hi)
    if op in ("Relu", "Abs"):
        x[np.abs(x) < 0.05] = 0.3                  # away from the kink
    _check_fd(_unary(op, x), {"x": x}, ["x"], rtol=1e-6, atol=1e-8)


def _softmax_np(x, axis, opset, log):
    """Softmax / LogSoftmax in numpy: before opset 13 over the input coerced to 2-D at `axis` (onnx.reference
    1.23.2 computes the opset-13 form for every opset, so it is no oracle for these)."""
    axes = (axis % x.ndim,) if opset >= 13 else tuple(range(axis % x.ndim, x.ndim))
    z = x - x.max(axis=axes, keepdims=True)
    lse = np.log(np.exp(z).sum(axis=axes, keepdims=True))
    return z - lse if log else np.exp(z - lse)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [1, -1])
def test_softmax_and_logsoftmax(opset, op, axis):
    x, w = _r(2, 3, 4), _r(2, 3, 4)
    nodes = [helper.make_node(op, ["x"], ["s"], axis=axis), helper.make_node("Mul", ["s", "w"], ["y"])]
    m = _model(nodes, {"x": x}, ["x"], "y", initializers={"w": w}, opset=opset)
    _check_fd(m, {"x": x}, ["x"], rtol=1e-5, atol=1e-8,
              f=lambda feeds: float(np.sum(_softmax_np(feeds["x"], axis, opset, op == "LogSoftmax") * w)))


def test_pow_constant_and_variable_exponent():
    x = _r(3, 4, lo=0.5, hi=2)
    m = _model([helper.make_node("Pow", ["x", "p"], ["y"])], {"x": x}, ["x"], "y",
               initializers={"p": np.array(2.5)})
    _check_fd(m, {"x": x}, ["x"])
    m = _model([helper.make_node("Pow", ["x", "p"], ["y"])], {"x": x}, ["x"], "y",
               initializers={"p": np.array(3, np.int64)})       # an integer exponent (Pow's T2)
    _check_fd(m, {"x": x}, ["x"])
    p = _r(4)
    m = _model([helper.make_node("Pow", ["x", "p"], ["y"])], {"x": x, "p": p}, ["x", "p"], "y")
    _check_fd(m, {"x": x, "p": p}, ["x", "p"])


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                                   ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 5))])
def test_matmul_shapes(sa, sb):
    a, b = _r(*sa), _r(*sb)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Mul", ["m", "m"], ["y"])]
    _check_fd(_model(nodes, {"a": a, "b": b}, ["a", "b"], "y"), {"a": a, "b": b}, ["a", "b"], rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("opset", [11, 13])
def test_gemm(ta, tb, opset):
    a = _r(4, 3) if ta else _r(3, 4)
    b = _r(5, 4) if tb else _r(4, 5)
    c = _r(1, 5)
    nodes = [helper.make_node("Gemm", ["a", "b", "c"], ["g"], alpha=0.7, beta=1.3, transA=ta, transB=tb),
             helper.make_node("Mul", ["g", "g"], ["y"])]
    _check_fd(_model(nodes, {"a": a, "b": b, "c": c}, ["a", "b", "c"], "y", opset=opset), {"a": a, "b": b, "c": c},
              ["a", "b", "c"], rtol=1e-5, atol=1e-8)


def test_shape_ops_chain():
    """(2,3,4) -Transpose-> (4,2,3) -Reshape-> (6,4) -Unsqueeze-> (1,6,4) -Flatten-> (1,24) -Transpose-> (24,1)
    -Squeeze-> (24,)"""
    x = _r(2, 3, 4)
    w = _r(24)
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             helper.make_node("Reshape", ["t", "shp"], ["r"]),
             helper.make_node("Unsqueeze", ["r", "ax"], ["u"]),
             helper.make_node("Flatten", ["u"], ["f"], axis=1),
             helper.make_node("Transpose", ["f"], ["ft"]),
             helper.make_node("Squeeze", ["ft"], ["s"]),
             helper.make_node("Mul", ["s", "w"], ["y"])]
    m = _model(nodes, {"x": x}, ["x"], "y", initializers={"w": w, "shp": np.array([6, 4]), "ax": np.array([0])})
    _check_fd(m, {"x": x}, ["x"])


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", [None, [1], [0, -1]])
def test_reduce(op, opset, keepdims, axes):
    x, w = _r(2, 3, 4), None
    as_input = opset >= (13 if op == "ReduceSum" else 18)
    inits = {}
    if axes is not None and as_input:
        inits["axes"] = np.array(axes, np.int64)
        node = helper.make_node(op, ["x", "axes"], ["r"], keepdims=keepdims)
    else:
        node = helper.make_node(op, ["x"], ["r"], keepdims=keepdims, **({"axes": axes} if axes else {}))
    ref = np.sum(x, axis=tuple(axes) if axes else None, keepdims=bool(keepdims))
    w = _r(*np.shape(ref))
    inits["w"] = w
    nodes = [node, helper.make_node("Mul", ["r", "w"], ["y"])]
    _check_fd(_model(nodes, {"x": x}, ["x"], "y", initializers=inits, opset=opset), {"x": x}, ["x"])


def test_reduce_noop_with_empty_axes():
    x = _r(2, 3)
    node = helper.make_node("ReduceSum", ["x"], ["r"], keepdims=0, noop_with_empty_axes=1)
    nodes = [node, helper.make_node("Mul", ["r", "r"], ["y"])]
    _check_fd(_model(nodes, {"x": x}, ["x"], "y", opset=13), {"x": x}, ["x"])


def test_reduce_mean_symbolic_shape():
    nodes = [helper.make_node("Exp", ["x"], ["e"]),
             helper.make_node("ReduceMean", ["e"], ["y"], axes=[1], keepdims=0)]
    m = _model(nodes, {"x": _r(2, 3)}, ["x"], "y", opset=13, shapes={"x": ["N", "M"]})
    sess = _session(m)
    for shape in ((2, 3), (4, 1)):
        x = _r(*shape)
        dx = sess.run(None, {"x": x})[1]
        np.testing.assert_allclose(dx, np.exp(x) / shape[1], rtol=1e-12)


# --- graph shapes: shared values, cuts, zs, other evaluation points, unused xs


def test_value_read_twice_and_integer_cut():
    """x feeds two branches (contributions summed); Shape(x) is an integer path (no gradient through it)."""
    x = _r(2, 3)
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Mul", ["x", "e"], ["p"]),
             helper.make_node("Shape", ["x"], ["shp"]), helper.make_node("Reshape", ["p", "shp"], ["q"]),
             helper.make_node("Add", ["q", "x"], ["y"])]
    got = _check_fd(_model(nodes, {"x": x}, ["x"], "y"), {"x": x}, ["x"])
    np.testing.assert_allclose(got["d_x"], np.exp(x) + x * np.exp(x) + 1, rtol=1e-12)


def test_gradient_at_other_point():
    """The Gradient's inputs are other values than xs: the forward nodes are evaluated again at them."""
    a, b, a2 = _r(3), _r(3), _r(3)
    nodes = [helper.make_node("Mul", ["a", "a"], ["aa"]), helper.make_node("Mul", ["aa", "b"], ["y"])]
    m = _model(nodes, {"a": a, "b": b, "a2": a2}, ["a"], "y", zs=["b"], grad_inputs=["a2", "b"])
    y, da = _session(m).run(None, {"a": a, "b": b, "a2": a2})
    np.testing.assert_allclose(y, a * a * b, rtol=1e-12)
    np.testing.assert_allclose(da, 2 * a2 * b, rtol=1e-12)


def test_y_independent_of_x_and_skipped_output():
    a, b = _r(2, 2), _r(3)
    nodes = [helper.make_node("Exp", ["b"], ["y"])]
    g = _model(nodes, {"a": a, "b": b}, ["a", "b"], "y")
    da, db = _session(g).run(None, {"a": a, "b": b})[1:]
    np.testing.assert_array_equal(da, np.zeros_like(a))
    np.testing.assert_allclose(db, np.exp(b), rtol=1e-12)
    # an empty output name: that gradient is not computed
    g.graph.node[-1].output[0] = ""
    del g.graph.output[1]
    (db2,) = _session(g).run(None, {"a": a, "b": b})[1:]
    np.testing.assert_allclose(db2, np.exp(b), rtol=1e-12)


def test_symbolic_seed_and_zeros():
    """y and x of symbolic shape: ones(y) and zeros(x) come from ConstantOfShape at run time."""
    nodes = [helper.make_node("Sigmoid", ["b"], ["y"])]
    m = _model(nodes, {"a": _r(2), "b": _r(3)}, ["a", "b"], "y", shapes={"a": ["P"], "b": ["Q"]})
    sess = _session(m, level=0)
    for n in (1, 4):
        a, b = _r(n + 1), _r(n)
        da, db = sess.run(None, {"a": a, "b": b})[1:]
        s = 1 / (1 + np.exp(-b))
        np.testing.assert_array_equal(da, np.zeros_like(a))
        np.testing.assert_allclose(db, s * (1 - s), rtol=1e-12)


def test_second_order():
    """A Gradient of a Gradient's output: d2(x^3)/dx2 = 6x."""
    x = _r(4, lo=0.5, hi=2)
    first = helper.make_node("Gradient", ["x"], ["g1"], name="first", domain=TRAIN, xs=["x"], y="c")
    nodes = [helper.make_node("Pow", ["x", "three"], ["c"]), first]
    m = _model(nodes, {"x": x}, ["x"], "g1", initializers={"three": np.array(3.0)}, gname="second",
               outputs=["g1", "d_x"])
    g1, g2 = _session(m).run(None, {"x": x})
    np.testing.assert_allclose(g1, 3 * x * x, rtol=1e-12)
    np.testing.assert_allclose(g2, 6 * x, rtol=1e-12)


def test_float32_and_disabled_optimizers_name():
    """The pass runs whatever the optimizers: a level-0 session and every onnxep pass name disabled."""
    from onnxep.graph.passes import PASS_NAMES
    a, b = _r(3, 1, dtype=np.float32), _r(1, 4, dtype=np.float32)
    m = _model([helper.make_node("Mul", ["a", "b"], ["y"])], {"a": a, "b": b}, ["a", "b"], "y")
    names = [n for ns in PASS_NAMES.values() for n in ns]
    for sess in (_session(m, level=0), _session(m, disabled_optimizers=names)):
        y, da, db = sess.run(None, {"a": a, "b": b})
        assert da.dtype == np.float32 and da.shape == (3, 1)
        np.testing.assert_allclose(da, np.full((3, 1), b.sum()), rtol=1e-6)
        np.testing.assert_allclose(db, np.full((1, 4), a.sum()), rtol=1e-6)


def test_reference_provider_and_saved_optimized_model(tmp_path):
    """The expansion is ordinary ONNX: a reference-only session runs it, and the optimized model onnxep writes runs
    in onnx.reference with the same results."""
    x, z = _r(1, 3), _r(4, 3)
    m = _model([helper.make_node("Mul", ["x", "z"], ["y"])], {"x": x, "z": z}, ["x", "z"], "y",
               shapes={"x": ["A", 3], "z": ["B", 3]})
    sess = onnxep.InferenceSession(m.SerializeToString(), providers=["OnnxReferenceExecutionProvider"])
    dx, dz = sess.run(None, {"x": x, "z": z})[1:]
    assert set(sess.node_assignment.values()) == {"reference"}
    np.testing.assert_allclose(dx, z.sum(0, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(dz, np.broadcast_to(x, (4, 3)), rtol=1e-12)
    x, w1, b1, w2 = _r(6, 4), _r(4, 5), _r(5), _r(5, 3)
    feeds = {"x": x, "w1": w1, "b1": b1, "w2": w2}
    m = _model(_mlp_nodes(), feeds, ["w1", "b1", "w2", "x"], "y")
    so = onnxep.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    so.graph_optimization_level = onnxep.GraphOptimizationLevel.ORT_ENABLE_BASIC
    got = onnxep.InferenceSession(m.SerializeToString(), so).run(None, feeds)
    saved = onnx.load(str(tmp_path / "opt.onnx"))
    assert "Gradient" not in {n.op_type for n in saved.graph.node}
    for g, r in zip(got, ReferenceEvaluator(saved).run(None, feeds)):
        np.testing.assert_allclose(g, r, rtol=1e-12)


def test_gradient_inside_if_body():
    """Control-flow bodies are optimized at the basic level (ops/control/_body.py): the pass expands there too; xs
    may be a value of the enclosing graph."""
    body = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"]),
                              helper.make_node("Gradient", ["x"], ["dx"], domain=TRAIN, xs=["x"], y="y")], "then",
                             [], [helper.make_tensor_value_info("dx", TensorProto.DOUBLE, [3])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["dx2"])], "else", [],
                              [helper.make_tensor_value_info("dx2", TensorProto.DOUBLE, [3])])
    g = helper.make_graph([helper.make_node("If", ["c"], ["out"], then_branch=body, else_branch=other)], "g",
                          [helper.make_tensor_value_info("c", TensorProto.BOOL, []),
                           helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3])],
                          [helper.make_tensor_value_info("out", TensorProto.DOUBLE, [3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(TRAIN, 1)])
    sess = _session(m)
    x = _r(3)
    np.testing.assert_allclose(sess.run(None, {"c": np.array(True), "x": x})[0], 2 * x, rtol=1e-12)
    np.testing.assert_array_equal(sess.run(None, {"c": np.array(False), "x": x})[0], x)


# --- what it cannot differentiate


@pytest.mark.parametrize("fallback", ["0", "1"])
def test_no_rule_names_the_blocking_op(fallback):
    x = _r(3)
    nodes = [helper.make_node("Exp", ["x"], ["e"]), helper.make_node("Sin", ["e"], ["s"], name="the_sin"),
             helper.make_node("Neg", ["s"], ["y"])]
    m = _model(nodes, {"x": x}, ["x"], "y", gname="my_grad")
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", fallback)
    with pytest.raises(OnnxepNotImplemented) as err:
        onnxep.InferenceSession(m.SerializeToString(), so)
    msg = str(err.value)
    assert "'my_grad'" in msg and "Gradient" in msg and "'the_sin'" in msg and "op Sin" in msg
    assert "no gradient rule" in msg
    # the same model without the Sin on the path works (a fresh session; nothing is left behind)
    nodes[1] = helper.make_node("Exp", ["e"], ["s"])
    _check_fd(_model(nodes, {"x": x}, ["x"], "y"), {"x": x}, ["x"])


def test_no_rule_left_to_a_registered_kernel():
    """With a kernel registered for Gradient, a graph the pass cannot expand keeps its Gradient node for it."""
    from onnxep.ops._registry import register, unregister
    from onnxep.ops._base import OpKernel

    class UserGradient(OpKernel):
        domain, op_type, since = TRAIN, "Gradient", 1

        def compute(self, ctx):
            ctx.set_output(0, np.full_like(ctx.input(0), 42.0))

    x = _r(3)
    nodes = [helper.make_node("Sin", ["x"], ["y"])]
    m = _model(nodes, {"x": x}, ["x"], "y")
    register(UserGradient)
    try:
        sess = _session(m)
        assert "grad" in sess.node_assignment
        np.testing.assert_array_equal(sess.run(None, {"x": x})[1], np.full(3, 42.0))
    finally:
        unregister(UserGradient)
