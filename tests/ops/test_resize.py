"""Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9) on the cpu backend. Oracles: onnx.reference (opsets 11+:
every mode, coordinate transformation, nearest_mode, cubic option, antialias, axes, keep_aspect_ratio_policy, roi),
onnxruntime (opset 10 and Upsample, which onnx.reference does not run, and the modes exporters write), numpy (nearest
upsampling by integer factors is np.repeat)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort, \
    run_reference
from tests.ops._eltshape import node, rand

E = ""   # an omitted optional input


def _resize(x, scales=None, sizes=None, roi=None, opset=19, **attrs):
    feeds = {"x": x}
    inits = {}
    ins = ["x", E, E, E]
    if roi is not None:
        inits["roi"] = np.asarray(roi, np.float32)
        ins[1] = "roi"
    if scales is not None:
        inits["scales"] = np.asarray(scales, np.float32)
        ins[2] = "scales"
    if sizes is not None:
        inits["sizes"] = np.asarray(sizes, np.int64)
        ins[3] = "sizes"
    if opset == 11 and ins[2] == E:   # Resize-11: roi and scales are required (empty when unused)
        inits["scales"] = np.zeros(0, np.float32)
        ins[2] = "scales"
    if opset == 11 and ins[1] == E:
        inits["roi"] = np.zeros(0, np.float32)
        ins[1] = "roi"
    while ins[-1] == E:
        ins.pop()
    m = make_model([node("Resize", ins, ["y"], **attrs)], feeds, ["y"], opset=opset, initializers=inits)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    return m, feeds, got


def _check_ref(x, tol=1e-5, **kw):
    m, feeds, got = _resize(x, **kw)
    assert_outputs_match(got, run_reference(m, feeds), rtol=tol, atol=tol)
    return got[0]


X = rand((1, 2, 4, 5), 0) * 4
CTMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "half_pixel_symmetric"]


@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [(1, 1, 2, 1.5), (1, 1, 0.6, 0.5), (1, 1, 1.7, 0.8)])
def test_resize_scales(scales, mode, ctm):
    _check_ref(X, scales=scales, mode=mode, coordinate_transformation_mode=ctm)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("ctm", ["half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn"])
@pytest.mark.parametrize("sizes", [(1, 2, 9, 7), (1, 2, 3, 2)])
def test_resize_nearest_modes(sizes, ctm, nearest_mode):
    if ctm != "tf_half_pixel_for_nn":
        _check_ref(X, sizes=sizes, mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=ctm)
        return
    # opset 11 only; onnx.reference does not implement it: onnxruntime is the oracle
    m, feeds, got = _resize(X, sizes=sizes, mode="nearest", nearest_mode=nearest_mode,
                            coordinate_transformation_mode=ctm, opset=11)
    assert_outputs_match(got, run_ort(m, feeds), rtol=0, atol=0)


@pytest.mark.parametrize("exclude_outside", [0, 1])
@pytest.mark.parametrize("a", [-0.75, -0.5])
def test_resize_cubic_options(a, exclude_outside):
    _check_ref(X, sizes=(1, 2, 7, 3), mode="cubic", cubic_coeff_a=a, exclude_outside=exclude_outside)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("kw", [{"scales": (1, 1, 0.6, 0.3)}, {"sizes": (1, 2, 3, 2)}, {"scales": (1, 1, 2, 0.5)}])
def test_resize_antialias(kw, mode):
    _check_ref(rand((1, 2, 8, 11), 3), mode=mode, antialias=1, **kw)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("axes", [(2, 3), (3, 2), (3,), (1, 3)])
def test_resize_axes_policy(axes, policy):
    sizes = (7, 3)[:len(axes)]
    _check_ref(X, sizes=sizes, axes=list(axes), keep_aspect_ratio_policy=policy, mode="linear")
    _check_ref(X, scales=(1.5, 0.7)[:len(axes)], axes=list(axes), mode="nearest")


def test_resize_negative_axes():
    """Oracle: the same node with the axes written non-negative (onnx.reference fails on negative axes)."""
    a = _resize(X, sizes=(7, 3), axes=[-1, -2], mode="linear")[2][0]
    np.testing.assert_array_equal(a, _resize(X, sizes=(7, 3), axes=[3, 2], mode="linear")[2][0])


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize(mode):
    _check_ref(X, sizes=(1, 2, 5, 4), roi=(0, 0, 0.2, -0.3, 1, 1, 1.2, 0.9), mode=mode,
               coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=7.5)


@pytest.mark.parametrize("opset", [11, 13, 18])
@pytest.mark.parametrize("dtype", [np.float16, np.float64, np.uint8, np.int8, np.int32, np.int64])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_dtypes(mode, dtype, opset):
    x = (rand((1, 3, 4, 4), 5) * 50).astype(dtype) if dtype != np.uint8 else \
        np.random.default_rng(5).integers(0, 256, (1, 3, 4, 4)).astype(np.uint8)
    m, feeds, got = _resize(x, scales=(1, 1, 1.5, 0.75), mode=mode, opset=opset)
    want = run_reference(m, feeds)[0]
    assert got[0].dtype == dtype and got[0].shape == want.shape
    if dtype == np.float16:
        np.testing.assert_allclose(got[0], want, rtol=2e-3, atol=5e-2)
    elif dtype == np.float64:   # onnx.reference computes its cubic coefficients in float32 (a float32 attribute)
        np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-4)
    else:   # ties of the rounding may differ by one between float32 / float64 arithmetic
        np.testing.assert_allclose(got[0].astype(np.float64), want.astype(np.float64), atol=1)


@pytest.mark.parametrize("dtype", [np.bool_, object])
def test_resize_nearest_bool_string(dtype):
    """Oracle: numpy -- nearest upsampling by integer factors (asymmetric, floor) repeats every element."""
    if dtype == object:
        x = np.array([["a", "bc"], ["d", "e"]], dtype=object)
        feeds = {"x": x}
        ins = [helper.make_tensor_value_info("x", TensorProto.STRING, [2, 2])]
        g = helper.make_graph([node("Resize", ["x", E, "s"], ["y"], coordinate_transformation_mode="asymmetric",
                                    nearest_mode="floor")],
                              "t", ins, [helper.make_tensor_value_info("y", TensorProto.STRING, None)],
                              [helper.make_tensor("s", TensorProto.FLOAT, [2], [2.0, 3.0])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)
        got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    else:
        x = np.array([[True, False], [False, True]])
        m, feeds, got = _resize(x, scales=(2, 3), coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    np.testing.assert_array_equal(got[0], np.repeat(np.repeat(x, 2, 0), 3, 1))


EXPORTER_CASES = [  # what torch.onnx writes
    {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
    {"mode": "linear", "coordinate_transformation_mode": "pytorch_half_pixel"},
    {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
    {"mode": "linear", "coordinate_transformation_mode": "half_pixel"},
    {"mode": "cubic", "coordinate_transformation_mode": "pytorch_half_pixel", "cubic_coeff_a": -0.75},
]


@pytest.mark.parametrize("kw", [{"scales": (1, 1, 2, 2)}, {"sizes": (2, 3, 12, 20)}, {"sizes": (2, 3, 5, 7)}])
@pytest.mark.parametrize("attrs", EXPORTER_CASES)
def test_resize_matches_onnxruntime(attrs, kw):
    """Oracle: onnxruntime."""
    m, feeds, got = _resize(rand((2, 3, 6, 10), 7), opset=13, **attrs, **kw)
    assert_outputs_match(got, run_ort(m, feeds), rtol=1e-4, atol=1e-4)


def _ort_only(op, opset, x, scales, mode, attr_scales=False):
    feeds = {"x": x}
    if attr_scales:
        n = node(op, ["x"], ["y"], mode=mode, scales=[float(v) for v in scales])
        m = make_model([n], feeds, ["y"], opset=opset)
    else:
        m = make_model([node(op, ["x", "s"], ["y"], mode=mode)], feeds, ["y"], opset=opset,
                       initializers={"s": np.asarray(scales, np.float32)})
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, run_ort(m, feeds), rtol=1e-5, atol=1e-5)
    return got[0]


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [(1, 1, 2, 3), (1, 1, 1.5, 2.5), (1, 1, 0.5, 0.7)])
def test_resize_10(scales, mode):
    """Oracle: onnxruntime (onnx.reference has no opset-10 coordinate rule)."""
    _ort_only("Resize", 10, rand((1, 2, 4, 6)), scales, mode)


@pytest.mark.parametrize("opset", [7, 9])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [(1, 1, 2, 3), (1, 1, 1.5, 2.5)])
def test_upsample(scales, mode, opset):
    """Oracles: onnxruntime, and numpy for integer nearest factors."""
    x = rand((1, 2, 3, 4))
    got = _ort_only("Upsample", opset, x, scales, mode, attr_scales=opset == 7)
    if mode == "nearest" and scales == (1, 1, 2, 3):
        np.testing.assert_array_equal(got, np.repeat(np.repeat(x, 2, 2), 3, 3))


def test_resize_size_bomb():
    """Oracle: none -- sizes asking for ~4 TB are refused with a named error before allocating; a scale that
    overflows the dimension too; the session still runs afterwards."""
    feeds = {"x": rand((1, 1, 2, 2)), "sz": np.array([1, 1, 1 << 20, 1 << 20], np.int64)}
    m = make_model([node("Resize", ["x", E, E, "sz"], ["y"])], feeds, ["y"], opset=19)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(Fail, match="resize_0.*bytes"):
        sess.run(None, feeds)
    assert sess.run(None, {**feeds, "sz": np.array([1, 1, 3, 3], np.int64)})[0].shape == (1, 1, 3, 3)
    feeds = {"x": rand((1, 1, 2, 2)), "sc": np.array([1, 1, 1e30, 1], np.float32)}
    m = make_model([node("Resize", ["x", E, "sc"], ["y"])], feeds, ["y"], opset=19)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises((Fail, InvalidArgument), match="resize_0"):
        sess.run(None, feeds)


def test_resize_bad_inputs():
    """Oracle: none -- scales and sizes together, or a scales of the wrong length, raise InvalidArgument."""
    feeds = {"x": rand((1, 1, 2, 2)), "sc": np.array([1, 1, 2, 2], np.float32),
             "sz": np.array([1, 1, 4, 4], np.int64)}
    m = make_model([node("Resize", ["x", E, "sc", "sz"], ["y"])], feeds, ["y"], opset=19)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="resize_0.*exactly one of scales and sizes"):
        sess.run(None, feeds)
    feeds = {"x": rand((1, 1, 2, 2)), "sc": np.array([2, 2], np.float32)}
    m = make_model([node("Resize", ["x", E, "sc"], ["y"])], feeds, ["y"], opset=19, input_shapes={"sc": ["K"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"resize_0.*scales has shape \(2,\), expected \(4,\)"):
        sess.run(None, feeds)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_strong_antialias(mode):
    """Many taps per output (a 20x antialiased downsample): the gather-all path."""
    _check_ref(rand((1, 2, 3, 200), 4), scales=(1, 1, 1, 0.05), mode=mode, antialias=1)


@pytest.mark.parametrize("scales,opset", [((1, 1, 2, 2), 13), ((1, 2, 3, 1), 13), ((1, 1, 2, 3), 10), ((2, 1, 1, 4), 19)])
def test_resize_nearest_repeat_run_loop(scales, opset):
    """Integer-factor nearest upsampling: one broadcast copy, and in the compiled run loop (second run) a strided
    copy step. Oracle: onnxruntime; the compiled run equals the first."""
    x = rand((2, 3, 5, 4), 9)
    feeds = {"x": x}
    ins = ["x", "s"] if opset == 10 else ["x", "", "s"]
    m = make_model([node("Resize", ins, ["y"], mode="nearest", **({} if opset == 10 else {
        "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}))], feeds, ["y"], opset=opset,
        initializers={"s": np.asarray(scales, np.float32)})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    first = sess.run(None, feeds)[0]
    second = sess.run(None, feeds)[0]
    want = run_ort(m, feeds)[0]
    np.testing.assert_array_equal(first, want)
    np.testing.assert_array_equal(second, want)
    x2 = rand((2, 3, 5, 4), 10)           # new values, same signature: the compiled step reads the new input
    np.testing.assert_array_equal(sess.run(None, {"x": x2})[0], run_ort(m, {"x": x2})[0])


@pytest.mark.parametrize("shape,sizes", [((2, 3, 8, 8), (2, 3, 16, 16)), ((1, 4, 5, 7), (1, 4, 5, 19)),
                                         ((2, 3, 9, 6), (2, 3, 4, 6)), ((3, 10), (5, 10)), ((2, 5, 11), (2, 5, 4))])
@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners", "pytorch_half_pixel", "asymmetric"])
def test_resize_linear_native_run_loop(shape, sizes, ctm):
    """Linear resize of the last two axes: the native 2-tap kernel, then its compiled run loop step (second run and
    new values). Oracle: onnxruntime."""
    x = rand(shape, 11)
    m = make_model([node("Resize", ["x", "", "", "s"], ["y"], mode="linear", coordinate_transformation_mode=ctm)],
                   {"x": x}, ["y"], opset=13, initializers={"s": np.asarray(sizes, np.int64)})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    for feeds in ({"x": x}, {"x": x}, {"x": rand(shape, 12)}):
        assert_outputs_match(sess.run(None, feeds), run_ort(m, feeds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
def test_resize_to_own_size_run_loop(mode):
    """A resize to the input's own size changes nothing: a copy, and in the compiled run loop a strided copy step
    that reads each run's input (second run, new values). Oracle: onnxruntime (and x itself)."""
    x = rand((2, 3, 6, 5), 13)
    m = make_model([node("Resize", ["x", "", "", "s"], ["y"], mode=mode, coordinate_transformation_mode="half_pixel")],
                   {"x": x}, ["y"], opset=13, initializers={"s": np.asarray(x.shape, np.int64)})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    for feeds in ({"x": x}, {"x": x}, {"x": rand(x.shape, 14)}):
        got = sess.run(None, feeds)[0]
        np.testing.assert_array_equal(got, run_ort(m, feeds)[0])
        np.testing.assert_array_equal(got, feeds["x"])
