"""NonMaxSuppression and RoiAlign on the cpu backend (no fallback).

Oracle: onnxruntime (float32 / float64 RoiAlign, NonMaxSuppression), onnx.reference for float16 RoiAlign (onnxruntime
has no float16 kernel). RoiAlign max mode: onnxruntime takes the largest corner term w_k * x_k over the sampling points,
and onnx.reference does the same (both are checked here; the backend suite's data agrees). onnx.reference's
RoiAlign-10 applies the half_pixel shift that only opset 16 introduced (onnxruntime and onnxep: output_half_pixel),
so opset 10 is checked against onnxruntime alone. onnxruntime has no RoiAlign-22: opset 22 is checked against its
RoiAlign-16 (same semantics)."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort, run_reference


def run_cpu(m, feeds):
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    return got


# ----------------------------------------------------------------------------------------------- NonMaxSuppression
def nms_model(boxes, scores, max_out=None, iou=None, score=None, center=0, opset=11):
    feeds = {"boxes": boxes, "scores": scores}
    names = ["boxes", "scores"]
    for n, v, dt in (("max_out", max_out, np.int64), ("iou", iou, np.float32), ("score", score, np.float32)):
        if v is not None:
            feeds[n] = np.array(v, dt)
        names.append(n if v is not None else "")
    while names[-1] == "":
        names.pop()
    node = helper.make_node("NonMaxSuppression", names, ["sel"], center_point_box=center)
    shapes = {k: [f"{k}{i}" for i in range(np.ndim(v))] for k, v in feeds.items()}
    return make_model([node], feeds, ["sel"], opset=opset, input_shapes=shapes), feeds


def random_boxes(rng, nb, n, center, grid=False):
    if grid:   # coordinates on a coarse grid: many exact ties in IoU and score
        a = rng.integers(0, 6, (nb, n, 4)).astype(np.float32)
    else:
        a = rng.uniform(0, 10, (nb, n, 4)).astype(np.float32)
    if center:
        a[..., 2:] = np.abs(a[..., 2:]) / 2 + 0.1
    return a


@pytest.mark.parametrize("opset", [10, 11])
@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("nb,nc,n", [(1, 1, 6), (2, 3, 40), (3, 2, 200)])
@pytest.mark.parametrize("max_out,iou,score", [(3, 0.5, None), (10, 0.3, 0.4), (1000, 0.0, 0.0), (5, 1.0, None),
                                               (2, 0.6, 0.99), (0, 0.5, None)])
@pytest.mark.parametrize("grid", [False, True])
def test_nms_random(opset, center, nb, nc, n, max_out, iou, score, grid):
    rng = np.random.default_rng(n + nc)
    boxes = random_boxes(rng, nb, n, center, grid)
    scores = rng.uniform(0, 1, (nb, nc, n)).astype(np.float32)
    if grid:
        scores = np.round(scores * 4) / 4     # ties in score
    m, f = nms_model(boxes, scores, max_out, iou, score, center, opset)
    got = run_cpu(m, f)
    want = run_ort(m, f)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0].dtype == np.int64


@pytest.mark.parametrize("inputs", [2, 3, 4])
def test_nms_optional_inputs(inputs):
    rng = np.random.default_rng(0)
    boxes, scores = random_boxes(rng, 2, 30, 0), rng.uniform(0, 1, (2, 2, 30)).astype(np.float32)
    args = [7, 0.4, 0.2][:inputs - 2]
    m, f = nms_model(boxes, scores, *args)
    got = run_cpu(m, f)
    np.testing.assert_array_equal(got[0], run_ort(m, f)[0])
    if inputs == 2:
        assert got[0].shape == (0, 3)        # no max_output_boxes_per_class: nothing selected


def test_nms_degenerate_boxes():
    """Zero-area boxes and disjoint boxes never suppress; flipped corners are normalised."""
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 1], [1, 1, 0, 0], [2, 2, 3, 3], [0, 0, 1, 1]]],
                     np.float32)
    scores = np.array([[[0.9, 0.8, 0.8, 0.7, 0.6, 0.5]]], np.float32)
    m, f = nms_model(boxes, scores, 10, 0.0)
    np.testing.assert_array_equal(run_cpu(m, f)[0], run_ort(m, f)[0])


def test_nms_bad_inputs_then_session_works():
    rng = np.random.default_rng(1)
    boxes, scores = random_boxes(rng, 1, 8, 0), rng.uniform(0, 1, (1, 2, 8)).astype(np.float32)
    m, f = nms_model(boxes, scores, 3, 0.5)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"NonMaxSuppression node .*scores must have shape \[1, num_classes, 8\]"):
        sess.run(None, dict(f, scores=scores[:, :, :5]))
    with pytest.raises(InvalidArgument, match=r"iou_threshold must be in \[0, 1\], got 1.5"):
        sess.run(None, dict(f, iou=np.array(1.5, np.float32)))
    np.testing.assert_array_equal(sess.run(None, f)[0], run_ort(m, f)[0])


def test_nms_output_size_depends_on_data():
    """The output's row count is the number of boxes kept: from 0 to every box."""
    boxes = np.tile(np.array([0, 0, 1, 1], np.float32), (1, 50, 1)) + np.arange(50, dtype=np.float32)[None, :, None] * 2
    scores = np.linspace(1, 0.5, 50, dtype=np.float32)[None, None]
    for thr, rows in ((0.4, 50), (0.8, 20), (1.0, 0)):
        m, f = nms_model(boxes, scores, 100, 0.5, thr)
        got = run_cpu(m, f)[0]
        assert got.shape == (rows, 3)
        np.testing.assert_array_equal(got, run_ort(m, f)[0])


# ------------------------------------------------------------------------------------------------------ RoiAlign
def roi_model(x, rois, bidx, opset=16, **attrs):
    node = helper.make_node("RoiAlign", ["X", "rois", "bi"], ["Y"], **attrs)
    feeds = {"X": x, "rois": rois, "bi": bidx}
    shapes = {k: [f"{k}{i}" for i in range(v.ndim)] for k, v in feeds.items()}
    return make_model([node], feeds, ["Y"], opset=opset, input_shapes=shapes), feeds


def random_rois(rng, n, H, W, dt=np.float32, scale=1.0):
    a = rng.uniform(-3, max(H, W) + 3, (n, 4)) / scale
    a[:, 2:] = a[:, :2] + np.abs(rng.uniform(-2, max(H, W), (n, 2))) / scale
    return a.astype(dt)


@pytest.mark.parametrize("opset,ctm", [(10, None)] + [(o, c) for o in (16, 22)
                                                       for c in (None, "half_pixel", "output_half_pixel")])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("sampling_ratio", [0, 1, 2, 3])
@pytest.mark.parametrize("out,scale", [((1, 1), 1.0), ((3, 4), 0.5), ((7, 7), 0.25)])
def test_roi_align(opset, mode, ctm, sampling_ratio, out, scale):
    rng = np.random.default_rng(sampling_ratio + out[0])
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    rois = random_rois(rng, 12, 9, 11, scale=scale)
    bidx = rng.integers(0, 2, 12).astype(np.int64)
    attrs = dict(mode=mode, sampling_ratio=sampling_ratio, output_height=out[0], output_width=out[1],
                 spatial_scale=scale)
    if ctm:
        attrs["coordinate_transformation_mode"] = ctm
    m, f = roi_model(x, rois, bidx, opset, **attrs)
    got = run_cpu(m, f)
    want = run_ort(roi_model(x, rois, bidx, min(opset, 16), **attrs)[0], f)   # onnxruntime stops at RoiAlign-16
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    if mode == "max" and opset >= 16:   # onnx.reference's RoiAlign-10 shifts by half a pixel (opset 16's default)
        np.testing.assert_allclose(got[0], run_reference(m, f)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["avg", "max"])
def test_roi_align_float64(mode):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 12, 10))
    rois = random_rois(rng, 9, 12, 10, np.float64)
    m, f = roi_model(x, rois, np.zeros(9, np.int64), mode=mode, output_height=4, output_width=3)
    got = run_cpu(m, f)
    assert got[0].dtype == np.float64
    np.testing.assert_allclose(got[0], run_ort(m, f)[0], rtol=1e-12, atol=1e-12)


def test_roi_align_float16():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 8, 8)).astype(np.float16)
    rois = random_rois(rng, 5, 8, 8, np.float16)
    m, f = roi_model(x, rois, np.zeros(5, np.int64), output_height=2, output_width=2, sampling_ratio=2)
    got = run_cpu(m, f)
    assert got[0].dtype == np.float16
    np.testing.assert_allclose(got[0].astype(np.float32), run_reference(m, f)[0].astype(np.float32), rtol=1e-2,
                               atol=1e-2)


def test_roi_align_mixed_grid_sizes():
    """Adaptive sampling with one huge roi among small ones (each roi keeps its own grid), more rois than a chunk."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 64, 64)).astype(np.float32)
    rois = random_rois(rng, 300, 8, 8)
    rois[7] = [0, 0, 63, 63]
    rois[100] = [-10, -5, 80, 70]
    m, f = roi_model(x, rois, np.zeros(300, np.int64), output_height=5, output_width=5)
    np.testing.assert_allclose(run_cpu(m, f)[0], run_ort(m, f)[0], rtol=1e-5, atol=1e-5)


def test_roi_align_no_rois():
    x = np.ones((1, 2, 4, 4), np.float32)
    m, f = roi_model(x, np.zeros((0, 4), np.float32), np.zeros(0, np.int64), output_height=2, output_width=2)
    assert run_cpu(m, f)[0].shape == (0, 2, 2, 2)


def test_roi_align_bad_inputs_then_session_works():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 2, 6, 6)).astype(np.float32)
    rois = random_rois(rng, 3, 6, 6)
    m, f = roi_model(x, rois, np.array([0, 1, 1], np.int64), output_height=2, output_width=2)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"RoiAlign node .*batch_indices must be in \[0, 1\], got values in"):
        sess.run(None, dict(f, bi=np.array([0, 2, 1], np.int64)))
    with pytest.raises(InvalidArgument, match=r"batch_indices must have shape \(3,\)"):
        sess.run(None, dict(f, bi=np.array([0, 1], np.int64)))
    np.testing.assert_allclose(sess.run(None, f)[0], run_ort(m, f)[0], rtol=1e-5, atol=1e-5)


def test_roi_align_sampling_grid_size_checked():
    """A roi of 1e12 pixels with adaptive sampling asks for ~1e21 sampling points: refused before allocating."""
    x = np.ones((1, 1, 4, 4), np.float32)
    rois = np.array([[0, 0, 1e12, 1e12]], np.float32)
    m, f = roi_model(x, rois, np.zeros(1, np.int64), output_height=1, output_width=1)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.Fail, match="RoiAlign node .*sampling points"):
        sess.run(None, f)
