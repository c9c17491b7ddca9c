"""GridSample on the cpu backend (fallback off): every mode (bilinear/linear, nearest, bicubic/cubic), padding mode
(zeros, border, reflection) and align_corners, opsets 16 / 20 / 22, grid points well outside [-1, 1] (so padding
matters), exact half-pixel points (nearest rounds half to even), 4-D and 5-D inputs, float16 / float32 / float64.
Oracle: onnxruntime; onnx.reference for what onnxruntime does not run (3-D and 6-D inputs, 5-D cubic, integer /
bool inputs in nearest mode, bfloat16)."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, \
    run_ort, run_reference
from tests.ops._eltshape import node

_PADS = ["zeros", "border", "reflection"]


def _feeds(xs, gs, dtype=np.float32, gdtype=None, seed=0, spread=1.6):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = rng.standard_normal(xs).astype(dtype)
    else:
        x = rng.integers(-50, 50, xs).astype(dtype)
    g = rng.uniform(-spread, spread, gs).astype(gdtype or (np.float64 if dtype == np.float64 else np.float32))
    return {"x": x, "g": g}


def _run(feeds, opset, oracle, tol, **attrs):
    m = make_model([node("GridSample", ["x", "g"], ["y"], **attrs)], feeds, ["y"], opset=opset)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, oracle(m, feeds), rtol=tol, atol=tol)
    return got[0]


@pytest.mark.parametrize("opset,mode", [(16, "bilinear"), (16, "nearest"), (16, "bicubic"),
                                        (20, "linear"), (20, "nearest"), (20, "cubic"), (22, "cubic")])
@pytest.mark.parametrize("padding", _PADS)
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_4d(opset, mode, padding, align):
    feeds = _feeds((2, 3, 5, 7), (2, 6, 4, 2))
    _run(feeds, opset, run_ort, 1e-5, mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding", _PADS)
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_5d(mode, padding, align):
    feeds = _feeds((2, 2, 3, 4, 5), (2, 3, 2, 4, 3), seed=1)
    _run(feeds, 20, run_ort, 1e-5, mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.parametrize("xs,gs,mode", [((1, 2, 3, 4, 5), (1, 2, 3, 2, 3), "cubic"),
                                        ((2, 2, 6), (2, 5, 1), "linear"), ((2, 2, 6), (2, 5, 1), "cubic"),
                                        ((2, 2, 6), (2, 5, 1), "nearest"),
                                        ((1, 1, 2, 3, 2, 3), (1, 2, 1, 2, 1, 4), "linear")])
@pytest.mark.parametrize("padding", _PADS)
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_nd_reference(xs, gs, mode, padding, align):
    """onnx.reference unnormalizes in float32 (hence the tolerance); its cubic mode with border padding clamps the
    coordinate before taking the taps, where onnxruntime (followed here) clamps only the taps: not compared."""
    if mode == "cubic" and padding == "border":
        pytest.skip("onnx.reference's cubic border semantics differ from onnxruntime's (see the module docstring)")
    feeds = _feeds(xs, gs, np.float64, seed=2)
    _run(feeds, 22, run_reference, 2e-6, mode=mode, padding_mode=padding, align_corners=align)


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_grid_sample_dtypes(dtype, mode):
    feeds = _feeds((1, 2, 4, 5), (1, 3, 3, 2), dtype, seed=3)
    _run(feeds, 20, run_ort, 5e-3 if dtype == np.float16 else 1e-10, mode=mode, padding_mode="reflection")


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int64])
@pytest.mark.parametrize("padding", _PADS)
def test_grid_sample_nearest_integers(dtype, padding):
    feeds = _feeds((1, 2, 4, 5), (1, 6, 3, 2), dtype, seed=4)
    _run(feeds, 20, run_reference, 0, mode="nearest", padding_mode=padding)


def test_grid_sample_nearest_half_to_even():
    """Points exactly between two pixels go to the even one (onnxruntime's nearbyint)."""
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    xs = (np.arange(9) - 0.5) / 4 * 2 - 1 + 1 / 4        # unnormalized x = -0.5, 0, 0.5, ... 3.5 (align 0)
    g = np.stack([np.tile(xs, (3, 1)), np.repeat(np.array([-2 / 3, 0, 2 / 3])[:, None], 9, 1)], -1)[None]
    feeds = {"x": x, "g": g.astype(np.float32)}
    for padding in _PADS:
        _run(feeds, 20, run_ort, 0, mode="nearest", padding_mode=padding)


def test_grid_sample_bfloat16():
    """bfloat16 X and grid (opset 22): computed in float32, rounded once; oracle onnx.reference in float32 on the
    same rounded values."""
    bf = ml_dtypes.bfloat16
    f = _feeds((1, 2, 4, 5), (1, 3, 3, 2), seed=5)
    f = {k: v.astype(bf).astype(np.float32) for k, v in f.items()}
    n = node("GridSample", ["x", "g"], ["y"], mode="cubic", padding_mode="border")
    ins = [helper.make_tensor_value_info(k, TensorProto.BFLOAT16, v.shape) for k, v in f.items()]
    g = helper.make_graph([n], "g", ins, [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)], ir_version=10)
    got, sess = run_onnxep(m, {k: v.astype(bf) for k, v in f.items()}, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == [] and got[0].dtype == bf
    want = run_ort(make_model([n], f, ["y"], opset=20), f)[0]
    np.testing.assert_allclose(got[0].astype(np.float32), want.astype(bf).astype(np.float32), rtol=1e-2, atol=1e-2)


def test_grid_sample_empty_output():
    feeds = _feeds((2, 3, 4, 5), (2, 0, 3, 2))
    assert _run(feeds, 20, run_ort, 0).shape == (2, 3, 0, 3)


def test_grid_sample_bad_grid():
    """Oracle: none -- a grid whose batch or last dim does not fit X raises InvalidArgument naming the node; the
    session still runs good input afterwards."""
    feeds = _feeds((2, 3, 4, 5), (2, 3, 3, 2))
    m = make_model([node("GridSample", ["x", "g"], ["y"])], feeds, ["y"], opset=20,
                   input_shapes={"x": ["N", 3, "H", "W"], "g": ["M", "h", "w", "k"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"gridsample_0.*grid has shape \(1, 3, 3, 2\)"):
        sess.run(None, {**feeds, "g": feeds["g"][:1]})
    with pytest.raises(InvalidArgument, match=r"gridsample_0.*grid has shape \(2, 3, 3, 3\)"):
        sess.run(None, {**feeds, "g": np.concatenate([feeds["g"], feeds["g"][..., :1]], -1)})
    np.testing.assert_allclose(sess.run(None, feeds)[0], run_ort(m, feeds)[0], rtol=1e-5, atol=1e-6)


def test_grid_sample_bad_mode():
    """A mode the opset does not name is refused when the session is made (bicubic is opset 16's name)."""
    feeds = _feeds((1, 1, 3, 3), (1, 2, 2, 2))
    m = make_model([node("GridSample", ["x", "g"], ["y"], mode="bicubic")], feeds, ["y"], opset=20)
    with pytest.raises(InvalidArgument, match="mode must be one of linear, nearest, cubic at opset 20, got 'bicubic'"):
        onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())


def test_grid_sample_size_check():
    """The output size follows the grid's shape: an absurd one is refused by name before anything is allocated."""
    x = np.zeros((1, 1 << 20, 1, 1), np.float32)                 # 4 MiB
    g = np.zeros((1, 1 << 10, 1 << 11, 2), np.float32)           # 16 MiB; the output would be 8 TiB
    m = make_model([node("GridSample", ["x", "g"], ["y"])], {"x": x, "g": g}, ["y"], opset=20,
                   input_shapes={"x": [1, "C", 1, 1], "g": [1, "h", "w", 2]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.Fail, match="GridSample output: shape .* over the"):
        sess.run(None, {"x": x, "g": g})
