"""DeformConv (opsets 19, 22), 2-D, on the cpu backend: groups, offset groups, mask, bias, strides, pads, dilations;
float16 / float32 / float64. Oracles: onnx.reference (its per-pixel GridSample loop: small shapes only), and numpy
(zero offsets and no mask make it an ordinary Conv, checked against onnxruntime's Conv)."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort, \
    run_reference
from tests.ops._eltshape import node, rand

CASES = [  # X shape, W shape, attributes, mask, bias
    ((1, 2, 4, 4), (2, 2, 2, 2), {}, False, False),
    ((2, 2, 4, 5), (3, 2, 2, 2), {"pads": [1, 1, 1, 1]}, True, True),
    ((1, 4, 5, 4), (4, 2, 3, 2), {"group": 2, "offset_group": 2, "strides": [2, 1]}, True, False),
    ((1, 2, 6, 6), (2, 1, 2, 2), {"group": 2, "dilations": [2, 2], "pads": [1, 0, 0, 1]}, False, True),
]


def _feeds(xs, ws, attrs, mask, bias, dtype, scale=1.5):
    og = attrs.get("offset_group", 1)
    st = attrs.get("strides", [1, 1])
    d = attrs.get("dilations", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    oh = (xs[2] + p[0] + p[2] - ((ws[2] - 1) * d[0] + 1)) // st[0] + 1
    ow = (xs[3] + p[1] + p[3] - ((ws[3] - 1) * d[1] + 1)) // st[1] + 1
    K = ws[2] * ws[3]
    feeds = {"x": rand(xs, 0, dtype), "w": rand(ws, 1, dtype),
             "off": (rand((xs[0], og * K * 2, oh, ow), 2) * scale).astype(dtype)}
    ins = ["x", "w", "off", "", ""]
    if bias:
        feeds["b"] = rand((ws[0],), 3, dtype)
        ins[3] = "b"
    if mask:
        feeds["m"] = np.random.default_rng(4).random((xs[0], og * K, oh, ow)).astype(dtype)
        ins[4] = "m"
    while not ins[-1]:
        ins.pop()
    return feeds, ins


@pytest.mark.parametrize("opset", [19, 22])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("xs,ws,attrs,mask,bias", CASES)
def test_deform_conv(xs, ws, attrs, mask, bias, dtype, opset):
    feeds, ins = _feeds(xs, ws, attrs, mask, bias, dtype)
    m = make_model([node("DeformConv", ins, ["y"], **attrs)], feeds, ["y"], opset=opset)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    tol = 2e-2 if dtype == np.float16 else 1e-5
    assert_outputs_match(got, run_reference(m, feeds), rtol=tol, atol=tol)


def test_deform_conv_zero_offsets_is_conv():
    """Oracle: onnxruntime's Conv on the same X, W, B (zero offsets, no mask)."""
    feeds, ins = _feeds((2, 4, 9, 8), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}, False,
                        True, np.float32, scale=0)
    attrs = {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 1]}
    m = make_model([node("DeformConv", ins, ["y"], **attrs)], feeds, ["y"], opset=19)
    got, _ = run_onnxep(m, feeds, sess_options=cpu_only_options())
    cf = {k: feeds[k] for k in ("x", "w", "b")}
    conv = make_model([node("Conv", ["x", "w", "b"], ["y"], **attrs)], cf, ["y"], opset=17)
    assert_outputs_match(got, run_ort(conv, cf), rtol=1e-5, atol=1e-5)


def test_deform_conv_bad_offset():
    """Oracle: none -- an offset of the wrong shape raises InvalidArgument naming the node."""
    feeds, ins = _feeds((1, 2, 4, 4), (2, 2, 2, 2), {}, False, False, np.float32)
    m = make_model([node("DeformConv", ins, ["y"])], feeds, ["y"], opset=19, input_shapes={"off": ["N", "K", "H", "W"]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="deformconv_0.*offset has shape"):
        sess.run(None, {**feeds, "off": feeds["off"][:, :4]})
