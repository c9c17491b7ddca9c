"""NhwcConv (com.onnxep): Conv over NHWC activations with a residual input and a fused Relu.

Oracle: onnxruntime's Conv (+ Add, Relu) on the NCHW-transposed data. The packing modes (W constant and pre-packed,
prepacking disabled, W fed at run time) must agree bit for bit."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from tests._util import run_ort
from tests.kernels.test_conv_winograd import _tol as wino_tol

RNG = np.random.default_rng(11)
CASES = [  # x NCHW shape, w shape, attributes
    ("3x3_pad", (1, 8, 9, 9), (16, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("1x1", (2, 33, 5, 7), (17, 33, 1, 1), {}),
    ("stride2_asym", (1, 5, 10, 11), (7, 5, 3, 2), {"strides": [2, 2], "pads": [0, 1, 2, 1]}),
    ("dilated_group", (1, 6, 12, 12), (9, 2, 3, 3), {"dilations": [2, 1], "group": 3, "pads": [1, 1, 1, 1]}),
    ("same_upper", (1, 4, 7, 6), (5, 4, 4, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 1]}),
    # Winograd (3x3, stride 1, group 1, >= 16 channels; F(2x2, 3x3) on images this small): odd sizes, asymmetric
    # pads, 'same' padding
    ("winograd_pad", (2, 16, 9, 10), (20, 16, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("winograd_asym", (1, 33, 7, 6), (40, 33, 3, 3), {"pads": [0, 2, 1, 0]}),
    ("winograd_same_lower", (1, 17, 5, 8), (16, 17, 3, 3), {"auto_pad": "SAME_LOWER"}),
]


def _nhwc_model(xs, ws, attrs, residual, relu, w_is_input):
    ys = _ort_conv(np.zeros(xs, np.float32), np.zeros(ws, np.float32), attrs).shape
    yh = (ys[0], ys[2], ys[3], ys[1])
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, (xs[0], xs[2], xs[3], xs[1]))]
    names = ["x", "w", "b"] + (["z"] if residual else [])
    if residual:
        ins.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, yh))
    if w_is_input:
        ins.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, ws))
    node = helper.make_node("NhwcConv", names, ["y"], domain="com.onnxep", activation="Relu" if relu else "",
                            **attrs)
    return node, ins, yh


def _ort_conv(x, w, attrs, b=None, z=None, relu=False):
    nodes = [helper.make_node("Conv", ["x", "w"] + (["b"] if b is not None else []), ["c"], **attrs)]
    feeds = {"x": x}
    inits = [numpy_helper.from_array(w, "w")] + ([numpy_helper.from_array(b, "b")] if b is not None else [])
    last = "c"
    if z is not None:
        nodes.append(helper.make_node("Add", ["c", "z"], ["s"]))
        feeds["z"] = z
        last = "s"
    if relu:
        nodes.append(helper.make_node("Relu", [last], ["r"]))
        last = "r"
    nodes.append(helper.make_node("Identity", [last], ["y"]))
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()]
    g = helper.make_graph(nodes, "g", ins, [helper.make_empty_tensor_value_info("y")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return run_ort(m, feeds)[0]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
@pytest.mark.parametrize("residual,relu", [(False, False), (True, True), (False, True)])
def test_nhwc_conv_matches_ort_conv(case, residual, relu):
    """Oracle: onnxruntime Conv(+Add)(+Relu) on NCHW data; packed, unpacked and W-as-input runs bit-identical."""
    _, xs, ws, attrs = case
    if residual and attrs.get("group", 1) > 1 and ws[1] == 1:
        pytest.skip("depthwise NhwcConv takes no residual")
    x = RNG.uniform(-1, 1, xs).astype(np.float32)
    w = RNG.uniform(-1, 1, ws).astype(np.float32)
    b = RNG.uniform(-1, 1, ws[0]).astype(np.float32)
    node, ins, yh = _nhwc_model(xs, ws, attrs, residual, relu, False)
    z = RNG.uniform(-1, 1, yh).astype(np.float32) if residual else None
    want = _ort_conv(x, w, attrs, b, None if z is None else np.ascontiguousarray(z.transpose(0, 3, 1, 2)), relu)
    feeds = {"x": np.ascontiguousarray(x.transpose(0, 2, 3, 1))}
    if residual:
        feeds["z"] = z
    outs = []
    for w_is_input, disable in ((False, False), (False, True), (True, False)):
        node, ins, _ = _nhwc_model(xs, ws, attrs, residual, relu, w_is_input)
        inits = [numpy_helper.from_array(b, "b")] + ([] if w_is_input else [numpy_helper.from_array(w, "w")])
        g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, yh)], inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.onnxep", 1)],
                              ir_version=8)
        so = onnxep.SessionOptions()
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        if disable:
            so.add_session_config_entry("session.disable_prepacking", "1")
        sess = onnxep.InferenceSession(m.SerializeToString(), so)
        f = dict(feeds, w=w) if w_is_input else feeds
        outs.append(sess.run(None, f)[0])
    # the Winograd cases: its error bound (tests/kernels/test_conv_winograd.py; |x|, |w|, |b|, |z| <= 1)
    atol = max(1e-5, wino_tol(ws[1], 2)) if case[0].startswith("winograd") else 1e-5
    np.testing.assert_allclose(outs[0].transpose(0, 3, 1, 2), want, rtol=1e-5, atol=atol)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])


def test_nhwc_conv_bad_input_names_the_node():
    """A wrong channel count raises onnxruntime's exception type naming the node (oracle: the error contract)."""
    node, ins, yh = _nhwc_model((1, 4, 5, 5), (3, 4, 1, 1), {}, False, False, False)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 5, 5, None))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.zeros((3, 4, 1, 1), np.float32), "w"),
                           numpy_helper.from_array(np.zeros(3, np.float32), "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.onnxep", 1)],
                          ir_version=8)
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxep.capi.onnxruntime_pybind11_state.RuntimeException, match="NhwcConv.*channels"):
        sess.run(None, {"x": np.zeros((1, 5, 5, 6), np.float32)})
    assert sess.run(None, {"x": np.ones((1, 5, 5, 4), np.float32)})[0].shape == (1, 5, 5, 3)


@pytest.mark.parametrize("ws,attrs,tile", [
    ((16, 16, 3, 3), {"pads": [1, 1, 1, 1]}, 4),
    ((16, 16, 3, 3), {"pads": [1, 1, 1, 1], "small": True}, 2),   # an image of fewer than 24 * 24 pixels: F(2x2)
    ((15, 16, 3, 3), {"pads": [1, 1, 1, 1]}, 0),           # fewer than 16 output channels
    ((16, 8, 3, 3), {"pads": [1, 1, 1, 1]}, 0),            # fewer than 16 input channels
    ((16, 16, 3, 3), {"strides": [2, 2]}, 0),
    ((16, 16, 3, 3), {"dilations": [2, 2]}, 0),
    ((16, 8, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, 0),
    ((16, 16, 5, 5), {}, 0),
    ((256, 256, 3, 3), {"pads": [1, 1, 1, 1]}, 4),        # F(4x4): 6.75 MiB more packed weight
    ((320, 256, 3, 3), {"pads": [1, 1, 1, 1]}, 2),        # F(4x4) would add 8.4 MiB, F(2x2) adds 2.2 MiB
    # small images: F(2x2) with at least MR 2x2 tiles in the batch (6x7: 12 a image), 4 * MR past 2 MiB of weight
    ((256, 256, 3, 3), {"pads": [1, 1, 1, 1], "small": True}, 0),   # 4 MiB of F(2x2) weight, 12 tiles: not
    ((256, 256, 3, 3), {"pads": [1, 1, 1, 1], "small": True, "batch": 4}, 2),   # 48 tiles
    ((512, 512, 3, 3), {"pads": [1, 1, 1, 1], "small": True, "batch": 4}, 2),   # F(2x2): 7 MiB more
    ((640, 512, 3, 3), {"pads": [1, 1, 1, 1], "small": True, "batch": 4}, 0),   # F(2x2) would add 8.75 MiB
    ((64, 64, 3, 3), {"pads": [1, 1, 1, 1], "tiny": True}, 0),      # a 2x2 image: 1 tile
    ((64, 64, 3, 3), {"pads": [1, 1, 1, 1], "tiny": True, "batch": 12}, 2),    # 12 tiles, 256 KiB
])
def test_nhwc_conv_packs_for_winograd_where_it_applies(monkeypatch, ws, attrs, tile):
    """The weight is packed for (and run on) a Winograd path exactly for 3x3, stride 1, dilation 1, group 1, at
    least 16 input and output channels, on SIMD variants: F(4x4, 3x3) where it adds at most 8 MiB of packed weight
    over the direct path's and the image has at least 24 * 24 pixels, else F(2x2, 3x3) where that one fits the
    budget (on smaller images with enough 2x2 tiles in the batch: WINOGRAD_F2_CACHED_WEIGHT_BYTES); the session's output matches onnxruntime's Conv either way (oracle; tolerance: the Winograd bound of
    tests/kernels/test_conv_winograd.py)."""
    from onnxep import _kernels
    calls = []
    real = _kernels.conv_wino_pack_weight
    monkeypatch.setattr(_kernels, "conv_wino_pack_weight",
                        lambda w, out, m: (calls.append((w.shape, m)), real(w, out, m)))
    attrs = dict(attrs)
    hw = (6, 7) if attrs.pop("small", False) else (2, 2) if attrs.pop("tiny", False) else (24, 25)
    xs = (attrs.pop("batch", 1), ws[1] * attrs.get("group", 1)) + hw
    x = RNG.uniform(-1, 1, xs).astype(np.float32)
    w = RNG.uniform(-1, 1, ws).astype(np.float32)
    b = RNG.uniform(-1, 1, ws[0]).astype(np.float32)
    node, ins, yh = _nhwc_model(xs, ws, attrs, False, False, False)
    g = helper.make_graph([node], "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, yh)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.onnxep", 1)],
                          ir_version=8)
    y = onnxep.InferenceSession(m.SerializeToString()).run(None, {"x": np.ascontiguousarray(x.transpose(0, 2, 3, 1))})
    kc = ws[1] * ws[2] * ws[3]        # |x|, |w| <= 1: both sides within about kc * eps32 of the exact sums
    simd = _kernels.wino_applies((3, 3), (1, 1), (1, 1), 1, 16)
    atol = wino_tol(ws[1], tile) if tile and simd else 2 * kc * np.finfo(np.float32).eps
    np.testing.assert_allclose(y[0].transpose(0, 3, 1, 2), _ort_conv(x, w, attrs, b), rtol=1e-5, atol=max(1e-5, atol))
    assert calls == ([(ws, tile)] if tile and simd else [])


@pytest.mark.parametrize("op", ["Conv", "NhwcConv"])
def test_bias_of_wrong_length_named_then_session_still_runs(op):
    """Conv and NhwcConv share one bias check (ConvAttrs._check_bias): a B fed at run time with the wrong length
    raises onnxruntime's exception type naming the node and the shapes; the next run with a right one works and
    matches onnxruntime (oracle), and a wrong one after it is still refused."""
    x = RNG.standard_normal((1, 4, 5, 5)).astype(np.float32)
    w = RNG.standard_normal((3, 4, 1, 1)).astype(np.float32)
    xin = x if op == "Conv" else x.transpose(0, 2, 3, 1).copy()
    node = helper.make_node(op, ["x", "w", "b"], ["y"], domain="" if op == "Conv" else "com.onnxep")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, xin.shape),
                                        helper.make_tensor_value_info("b", TensorProto.FLOAT, ("n",))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.onnxep", 1)],
                          ir_version=8)
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(onnxep.capi.onnxruntime_pybind11_state.RuntimeException,
                       match=rf"{op}.*B has shape \(4,\), expected \(3,\)"):
        sess.run(None, {"x": xin, "b": np.zeros(4, np.float32)})
    b = RNG.standard_normal(3).astype(np.float32)
    got = sess.run(None, {"x": xin, "b": b})[0]
    ref = _ort_conv(x, w, {}, b=b)
    np.testing.assert_allclose(got if op == "Conv" else got.transpose(0, 3, 1, 2), ref, rtol=1e-5, atol=1e-5)
    with pytest.raises(onnxep.capi.onnxruntime_pybind11_state.RuntimeException, match="B has shape"):
        sess.run(None, {"x": xin, "b": np.zeros(2, np.float32)})
