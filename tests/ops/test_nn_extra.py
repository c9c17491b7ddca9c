"""AffineGrid, BatchNormalization in training mode and FlexAttention (ai.onnx.preview) on the cpu backend (fallback
off). Oracles: onnxruntime for AffineGrid (2-D / 3-D, align_corners, float16 / float32 / float64) and
BatchNormalization (opsets 14 / 15, momentum, float16 / float32 / float64, ranks 2 to 5, optional outputs);
onnx.reference for FlexAttention (onnxruntime 1.32 has no kernel for it; numpy where its subgraph reads an outer
value, which onnx.reference cannot feed) and for AffineGrid's one-pixel axes with
align_corners (onnxruntime gives 1 there, the spec's function body -1)."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, \
    run_ort, run_reference
from tests.ops._eltshape import node, rand


def _check(m, feeds, oracle, tol):
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, oracle(m, feeds), rtol=tol, atol=tol)
    return got


# --------------------------------------------------------------------------------------------------- AffineGrid
@pytest.mark.parametrize("size", [(2, 3, 4, 5), (3, 1, 7, 2), (2, 2, 3, 4, 5), (1, 1, 2, 1, 3)])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_affine_grid(size, align, dtype):
    k = len(size) - 2
    feeds = {"t": rand((size[0], k, k + 1), 0, dtype), "s": np.array(size, np.int64)}
    m = make_model([node("AffineGrid", ["t", "s"], ["g"], align_corners=align)], feeds, ["g"], opset=20)
    if align and 1 in size[2:]:     # onnx.reference gives float32 whatever theta's type
        def oracle(m, f):
            return [a.astype(dtype) for a in run_reference(m, f)]
    else:
        oracle = run_ort
    got = _check(m, feeds, oracle, 2e-3 if dtype == np.float16 else 1e-6)
    assert got[0].shape == (size[0], *size[2:], k)


def test_affine_grid_bfloat16():
    """bfloat16 theta: computed in float32, rounded once. Oracle: onnxruntime in float32 on the same values."""
    bf = ml_dtypes.bfloat16
    t = rand((2, 2, 3), 1).astype(bf)
    s = np.array([2, 1, 3, 4], np.int64)
    ins = [helper.make_tensor_value_info("t", TensorProto.BFLOAT16, t.shape),
           helper.make_tensor_value_info("s", TensorProto.INT64, s.shape)]
    g = helper.make_graph([node("AffineGrid", ["t", "s"], ["g"])], "g", ins, [helper.make_empty_tensor_value_info("g")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=10)
    got, sess = run_onnxep(m, {"t": t, "s": s}, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == [] and got[0].dtype == bf
    f = {"t": t.astype(np.float32), "s": s}
    want = run_ort(make_model([node("AffineGrid", ["t", "s"], ["g"])], f, ["g"], opset=20), f)[0]
    np.testing.assert_allclose(got[0].astype(np.float32), want.astype(bf).astype(np.float32), rtol=1e-2, atol=1e-2)


def _affine_session():
    feeds = {"t": rand((1, 2, 3), 2), "s": np.array([1, 1, 2, 2], np.int64)}
    m = make_model([node("AffineGrid", ["t", "s"], ["g"])], feeds, ["g"], opset=20, input_shapes={"t": ["N", 2, 3]})
    return onnxep.InferenceSession(m.SerializeToString(), cpu_only_options()), feeds, m


def test_affine_grid_size_check():
    """The output size comes from the data of `size`: an absurd one is refused by name before allocating, and the
    session still runs afterwards."""
    sess, feeds, m = _affine_session()
    with pytest.raises(Fail, match=r"AffineGrid output: shape \(1, 1048576, 1048576, 2\) needs .* over the"):
        sess.run(None, {**feeds, "s": np.array([1, 1, 1 << 20, 1 << 20], np.int64)})
    np.testing.assert_allclose(sess.run(None, feeds)[0], run_ort(m, feeds)[0], rtol=1e-6)


def test_affine_grid_bad_input():
    """Oracle: none -- a size that does not fit theta raises InvalidArgument naming the node."""
    sess, feeds, _ = _affine_session()
    with pytest.raises(InvalidArgument, match=r"affinegrid_0.*theta has shape \(1, 2, 3\), expected \(2, 2, 3\)"):
        sess.run(None, {**feeds, "s": np.array([2, 1, 2, 2], np.int64)})
    with pytest.raises(InvalidArgument, match=r"affinegrid_0.*size must not be negative"):
        sess.run(None, {**feeds, "s": np.array([1, 1, -2, 2], np.int64)})
    assert sess.run(None, feeds)[0].shape == (1, 2, 2, 2)


# ------------------------------------------------------------------------------------ BatchNormalization training
@pytest.mark.parametrize("opset", [14, 15])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 5), (2, 3, 4, 5), (2, 3, 2, 3, 2)])
@pytest.mark.parametrize("outs", [("y", "rm", "rv"), ("y",), ("rv", "y")])
def test_batchnorm_training(opset, shape, outs):
    """The node has its three outputs (the spec's shape inference requires them in training mode); the graph reads
    all or some of them."""
    c = shape[1]
    feeds = {"x": rand(shape, 0) * 3 + 1, "s": rand((c,), 1), "b": rand((c,), 2), "m": rand((c,), 3),
             "v": np.abs(rand((c,), 4)) + 0.5}
    n = node("BatchNormalization", list(feeds), ["y", "rm", "rv"], training_mode=1, momentum=0.8, epsilon=1e-3)
    _check(make_model([n], feeds, list(outs), opset=opset), feeds, run_ort, 1e-5)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_batchnorm_training_dtypes(dtype):
    c = 3
    feeds = {"x": rand((2, c, 4, 4), 0, dtype), "s": rand((c,), 1, dtype), "b": rand((c,), 2, dtype),
             "m": rand((c,), 3, dtype), "v": (np.abs(rand((c,), 4)) + 0.5).astype(dtype)}
    n = node("BatchNormalization", list(feeds), ["y", "rm", "rv"], training_mode=1)
    _check(make_model([n], feeds, ["y", "rm", "rv"], opset=15), feeds, run_ort,
           5e-3 if dtype == np.float16 else 1e-10)


def test_batchnorm_training_mixed_types():
    """Opset 15: float16 X with float32 statistics (T2)."""
    c = 3
    feeds = {"x": rand((2, c, 5), 0, np.float16), "s": rand((c,), 1, np.float16), "b": rand((c,), 2, np.float16),
             "m": rand((c,), 3), "v": np.abs(rand((c,), 4)) + 0.5}
    n = node("BatchNormalization", list(feeds), ["y", "rm", "rv"], training_mode=1)
    got = _check(make_model([n], feeds, ["y", "rm", "rv"], opset=15), feeds, run_ort, 5e-3)
    assert got[1].dtype == np.float32


def test_batchnorm_training_bad_input():
    """Oracle: none -- statistics of the wrong length raise InvalidArgument naming the node."""
    c = 3
    feeds = {"x": rand((2, c, 4), 0), "s": rand((c,), 1), "b": rand((c,), 2), "m": rand((c,), 3),
             "v": np.abs(rand((c,), 4)) + 0.5}
    n = node("BatchNormalization", list(feeds), ["y", "rm", "rv"], training_mode=1)
    m = make_model([n], feeds, ["y", "rm", "rv"], opset=15, input_shapes={"m": ["c"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"batchnormalization_0.*input_mean has shape \(4,\), expected \(3,\)"):
        sess.run(None, {**feeds, "m": rand((4,), 3)})
    assert_outputs_match(sess.run(None, feeds), run_ort(m, feeds), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------------------------------------- FlexAttention
def _flex_model(dtype, shapes, **attrs):
    tp = {np.float16: TensorProto.FLOAT16, np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE}[dtype]
    ins = [helper.make_tensor_value_info(n, tp, s) for n, s in zip("qkv", shapes)]
    n = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", name="flex_0", **attrs)
    g = helper.make_graph([n], "g", ins, [helper.make_empty_tensor_value_info("y")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)],
                             ir_version=11)


@pytest.mark.parametrize("dims", [(2, 4, 4, 5, 6, 8, 8), (1, 6, 2, 3, 7, 4, 5), (2, 3, 1, 1, 1, 2, 3)])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("attrs", [{}, {"scale": 0.3}, {"softmax_precision": 11}, {"softmax_precision": 10}])
def test_flex_attention(dims, dtype, attrs):
    B, Hq, Hkv, L, S, E, Ev = dims
    shapes = [(B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)]
    feeds = {n: rand(s, i, dtype) for i, (n, s) in enumerate(zip("qkv", shapes))}
    tol = 5e-3 if dtype == np.float16 or attrs.get("softmax_precision") == 10 else 1e-5
    got = _check(_flex_model(dtype, shapes, **attrs), feeds, run_reference, tol)
    assert got[0].shape == (B, Hq, L, Ev)


def test_flex_attention_bad_heads():
    """Oracle: none -- query heads that are not a multiple of the K / V heads raise InvalidArgument."""
    shapes = [(1, "hq", 2, 4), (1, "hkv", 3, 4), (1, "hkv", 3, 4)]
    m = _flex_model(np.float32, shapes)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    feeds = {"q": rand((1, 3, 2, 4), 0), "k": rand((1, 2, 3, 4), 1), "v": rand((1, 2, 3, 4), 2)}
    with pytest.raises(InvalidArgument, match=r"flex_0.*q_num_heads 3 must be a multiple of kv_num_heads 2"):
        sess.run(None, feeds)
    feeds["q"] = rand((1, 4, 2, 4), 0)
    assert_outputs_match(sess.run(None, feeds), run_reference(m, feeds), rtol=1e-5, atol=1e-6)


def _mod_graph(name, nodes, dtype=TensorProto.FLOAT, inits=(), out_shape=("B", "H", "L", "S")):
    i = helper.make_tensor_value_info("t_in", dtype, ["B", "H", "L", "S"])
    o = helper.make_tensor_value_info("t_out", dtype, list(out_shape))
    return helper.make_graph(nodes, name, [i], [o], list(inits))


def _causal(dtype=TensorProto.FLOAT):
    c = helper.make_tensor
    nodes = [helper.make_node("Shape", ["t_in"], ["shp"]),
             helper.make_node("Gather", ["shp", "i2"], ["L"], axis=0),
             helper.make_node("Gather", ["shp", "i3"], ["S"], axis=0),
             helper.make_node("Range", ["zero", "L", "one"], ["qr"]),
             helper.make_node("Unsqueeze", ["qr", "ax1"], ["qi"]),
             helper.make_node("Range", ["zero", "S", "one"], ["ki"]),
             helper.make_node("GreaterOrEqual", ["qi", "ki"], ["mask"]),
             helper.make_node("Where", ["mask", "t_in", "ninf"], ["t_out"])]
    inits = [c("zero", TensorProto.INT64, [], [0]), c("one", TensorProto.INT64, [], [1]),
             c("i2", TensorProto.INT64, [], [2]), c("i3", TensorProto.INT64, [], [3]),
             c("ax1", TensorProto.INT64, [1], [1]), c("ninf", dtype, [], [float("-inf")])]
    return _mod_graph("causal", nodes, dtype, inits)


def _softcap(cap, dtype=TensorProto.FLOAT):
    nodes = [helper.make_node("Div", ["t_in", "cap"], ["a"]), helper.make_node("Tanh", ["a"], ["b"]),
             helper.make_node("Mul", ["b", "cap"], ["t_out"])]
    return _mod_graph("softcap", nodes, dtype, [helper.make_tensor("cap", dtype, [], [cap])])


def _scale_probs(v, dtype=TensorProto.FLOAT):
    return _mod_graph("pscale", [helper.make_node("Mul", ["t_in", "k"], ["t_out"])], dtype,
                      [helper.make_tensor("k", dtype, [], [v])])


@pytest.mark.parametrize("mods", [{"score_mod": "causal"}, {"score_mod": "softcap"}, {"prob_mod": "scale"},
                                  {"score_mod": "softcap", "prob_mod": "scale"}])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_flex_attention_subgraphs(mods, dtype):
    """score_mod / prob_mod bodies (run in softmax_precision: float32, or float64 for float64 inputs), with GQA."""
    tp = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    make = {"causal": lambda: _causal(tp), "softcap": lambda: _softcap(2.0, tp), "scale": lambda: _scale_probs(0.5, tp)}
    shapes = [(2, 4, 5, 8), (2, 2, 5, 8), (2, 2, 5, 3)]
    m = _flex_model(dtype, shapes, **{k: make[v]() for k, v in mods.items()})
    feeds = {n: rand(s, i, dtype) * 2 for i, (n, s) in enumerate(zip("qkv", shapes))}
    _check(m, feeds, run_reference, 5e-3 if dtype == np.float16 else 1e-5)


def test_flex_attention_subgraph_reads_outer_value():
    """A score_mod that adds a graph input of the enclosing graph (an outer-scope value). Oracle: numpy."""
    shapes = [(1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)]
    sm = _mod_graph("bias", [helper.make_node("Add", ["t_in", "bias"], ["t_out"])])
    n = helper.make_node("FlexAttention", ["q", "k", "v"], ["y"], domain="ai.onnx.preview", name="flex_0",
                         score_mod=sm)
    ins = [helper.make_tensor_value_info(x, TensorProto.FLOAT, s) for x, s in zip("qkv", shapes)]
    ins.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [3, 3]))
    g = helper.make_graph([n], "g", ins, [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)],
                          ir_version=11)
    feeds = {x: rand(s, i) for i, (x, s) in enumerate(zip("qkv", shapes))}
    feeds["bias"] = rand((3, 3), 9) * 3

    def numpy_oracle(m, f):        # onnx.reference cannot feed outer values to FlexAttention's subgraphs
        s = f["q"].astype(np.float64) @ np.swapaxes(f["k"], -1, -2) / 2 + f["bias"]
        e = np.exp(s - s.max(-1, keepdims=True))
        return [((e / e.sum(-1, keepdims=True)) @ f["v"]).astype(np.float32)]
    _check(m, feeds, numpy_oracle, 1e-5)


def test_flex_attention_bad_subgraph_shape():
    """Oracle: none -- a score_mod whose output changes the shape raises InvalidArgument naming the node."""
    shapes = [(1, 2, 3, 4), (1, 2, 3, 4), (1, 2, 3, 4)]
    sm = _mod_graph("bad", [helper.make_node("Tile", ["t_in", "reps"], ["t_out"])],
                    inits=[helper.make_tensor("reps", TensorProto.INT64, [4], [1, 1, 1, 2])],
                    out_shape=("B", "H", "L", "S2"))
    m = _flex_model(np.float32, shapes, score_mod=sm)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    feeds = {x: rand(s, i) for i, (x, s) in enumerate(zip("qkv", shapes))}
    with pytest.raises(InvalidArgument, match=r"flex_0.*score_mod gave shape \(1, 2, 3, 6\), expected \(1, 2, 3, 3\)"):
        sess.run(None, feeds)
