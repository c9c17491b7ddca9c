"""LayerNormalization (opset 17) and Erf on the cpu backend. Oracle: onnx.reference (the spec's function body:
"Mean = ReduceMean<axes=normalized_axes>(X) ... InvStdDev = Reciprocal(Sqrt(Var + epsilon)) ... Y = Normalized *
Scale + B"); onnxruntime as well for the shapes BERT uses."""
import math

import numpy as np
import pytest
from onnx import helper

from tests._util import assert_outputs_match, fallback_nodes, make_model, run_onnxep, run_ort, run_reference
from tests.ops._eltshape import check_node, node, rand

# x shape, axis, Scale shape, B shape (None: no B)
LN_CASES = [
    ((1, 128, 768), -1, (768,), (768,)),
    ((2, 3, 5), -1, (5,), (5,)),
    ((2, 3, 5), -1, (5,), None),
    ((2, 3, 5), 1, (3, 5), (3, 5)),
    ((2, 3, 5), 0, (2, 3, 5), (2, 3, 5)),
    ((2, 3, 5), -2, (1, 5), (5,)),          # Scale broadcast over the normalized dims ("unidirectional broadcastable")
    ((4, 6), 1, (1,), (1,)),
    ((7,), 0, (7,), (7,)),
    ((3, 1), -1, (1,), (1,)),               # one element per row: variance 0, Y = B
    ((0, 8), -1, (8,), (8,)),               # no rows
    ((2, 3, 4, 5), 2, (4, 5), (4, 5)),
]


@pytest.mark.parametrize("shape,axis,s_shape,b_shape", LN_CASES)
@pytest.mark.parametrize("stats", [False, True])
def test_layer_normalization(shape, axis, s_shape, b_shape, stats):
    rng = np.random.default_rng(len(shape) * 7 + axis)
    x = (rng.standard_normal(shape) * 2 + 3).astype(np.float32)
    inits = {"scale": rng.standard_normal(s_shape).astype(np.float32)}
    ins = ["x", "scale"]
    if b_shape is not None:
        inits["b"] = rng.standard_normal(b_shape).astype(np.float32)
        ins.append("b")
    outs = ["y", "mean", "inv"] if stats else ["y"]
    n = node("LayerNormalization", ins, outs, axis=axis, epsilon=1e-3)
    check_node(n, {"x": x}, 17, initializers=inits, rtol=1e-5, atol=2e-5)


def test_layer_normalization_scale_over_leading_dims():
    """Scale / B that vary over the leading (not normalized) dims too, as unidirectional broadcasting allows: applied
    after the native normalization. Scale and B as graph inputs (not constants)."""
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((3, 4, 6)).astype(np.float32),
             "scale": rng.standard_normal((3, 1, 6)).astype(np.float32),
             "b": rng.standard_normal((4, 1)).astype(np.float32)}
    check_node(node("LayerNormalization", ["x", "scale", "b"], ["y", "mean", "inv"], axis=-1), feeds, 17, rtol=1e-5,
               atol=2e-5)


def test_layer_normalization_default_epsilon_matches_onnxruntime():
    """Oracle: onnxruntime (and onnx.reference), default epsilon 1e-5 and axis -1, BERT's shape."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 128, 768)).astype(np.float32)
    inits = {"s": rng.standard_normal(768).astype(np.float32), "b": rng.standard_normal(768).astype(np.float32)}
    m = make_model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"])], {"x": x}, ["y"], opset=17,
                   initializers=inits)
    got, sess = run_onnxep(m, {"x": x})
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, run_ort(m, {"x": x}), rtol=1e-5, atol=1e-5)
    assert_outputs_match(got, run_reference(m, {"x": x}), rtol=1e-5, atol=1e-5)


def test_layer_normalization_stash_type_double_falls_back():
    """stash_type 11 (statistics in float64) is not computed natively: the node is left to the reference backend
    (onnx.reference cannot run it either, so only the placement is checked)."""
    import onnxep
    x = rand((2, 5))
    m = make_model([helper.make_node("LayerNormalization", ["x", "s"], ["y"], stash_type=11)], {"x": x}, ["y"],
                   opset=17, initializers={"s": np.ones(5, np.float32)})
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert len(fallback_nodes(sess)) == 1


@pytest.mark.parametrize("opset", [9, 13, 17])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (2, 3, 5), (0, 4), (3, 20000)])
def test_erf(opset, shape):
    """Oracle: onnx.reference (scipy-free: math.erf per element), within 2e-7 absolute."""
    x = rand(shape, 3) * 2
    check_node(node("Erf", ["x"], ["y"]), {"x": x}, opset, rtol=0, atol=2e-7)
    if x.size:
        got = check_node(node("Erf", ["x"], ["y"]), {"x": x}, opset, rtol=0, atol=2e-7)[0]
        want = np.vectorize(math.erf)(x.astype(np.float64))
        np.testing.assert_allclose(got, want, rtol=0, atol=2e-7)


def test_layer_normalization_scale_as_input_changes_between_runs():
    """Scale / B fed as graph inputs: a second run with other values (same shapes, same arrays modified in place)
    uses the new values -- only constant Scale / B are cached. Oracle: onnx.reference."""
    import onnxep
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((3, 8)).astype(np.float32), "s": rng.standard_normal(8).astype(np.float32),
             "b": rng.standard_normal(8).astype(np.float32)}
    m = make_model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"])], feeds, ["y"], opset=17)
    sess = onnxep.InferenceSession(m.SerializeToString())
    for _ in range(2):
        assert_outputs_match(sess.run(None, feeds), run_reference(m, feeds), rtol=1e-5, atol=1e-5)
        feeds["s"] *= -2.0
        feeds["b"] += 1.0
