"""ConvTranspose (opsets 1, 11, 22) on the cpu backend: 1-D to 3-D, groups, strides, pads, dilations, output_padding,
output_shape, auto_pad; float16 / float32 / float64. Oracles: onnxruntime (float32; float16 / float64 against its
float32 result on the same values) and onnx.reference for group 1 (its group > 1 path slices W by output channel and
its explicit output_shape path fails, so onnxruntime is the oracle there)."""
import numpy as np
import pytest

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort, \
    run_reference
from tests.ops._eltshape import node, rand

CASES = [  # x shape, w shape, attributes
    ((1, 2, 4, 5), (2, 3, 3, 3), {}),
    ((2, 2, 4, 5), (2, 3, 3, 3), {"strides": [2, 2]}),
    ((1, 2, 4, 5), (2, 3, 3, 2), {"strides": [2, 3], "pads": [1, 0, 2, 1], "dilations": [2, 1],
                                  "output_padding": [1, 1]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"auto_pad": "VALID", "strides": [1, 2]}),
    ((1, 2, 4, 5), (2, 3, 3, 3), {"output_shape": [8, 10], "strides": [2, 2]}),
    ((1, 2, 3, 3), (2, 1, 3, 3), {"output_shape": [10, 8], "strides": [3, 2]}),
    ((2, 4, 3, 3), (4, 3, 2, 2), {"group": 2, "strides": [2, 1]}),
    ((1, 4, 3, 4), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((2, 20, 3, 3), (20, 1, 3, 3), {"group": 20, "strides": [2, 2]}),      # many groups: the stacked product
    ((2, 3, 7), (3, 2, 3), {"strides": [2], "pads": [1, 2]}),
    ((2, 4, 5, 6), (4, 3, 2, 2), {"strides": [2, 2]}),                  # kernel == stride: the transpose path
    ((1, 4, 5, 6), (4, 3, 2, 3), {"strides": [2, 3], "group": 2, "pads": [0, 1, 1, 0]}),
    ((1, 2, 3, 2, 2), (2, 2, 2, 2, 2), {"strides": [2, 2, 2]}),
    ((1, 2, 3, 3), (2, 2, 2, 2), {"strides": [2, 2], "output_padding": [1, 0]}),   # padding past the taps
    ((1, 2, 3, 4, 3), (2, 2, 2, 3, 2), {"strides": [1, 2, 2]}),
    ((3, 8, 4, 4), (8, 6, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),      # a U-Net's 2x upsampling
    ((1, 3, 5, 4), (3, 2, 3, 3), {"strides": [3, 2], "dilations": [2, 3], "pads": [2, 0, 1, 3]}),
    ((2, 64, 9, 7), (64, 5, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
]


def _model(xs, ws, attrs, dtype, bias=True, opset=17):
    feeds = {"x": rand(xs, 0, dtype), "w": rand(ws, 1, dtype)}
    ins = ["x", "w"]
    if bias:
        feeds["b"] = rand((ws[1] * attrs.get("group", 1),), 2, dtype)
        ins.append("b")
    return make_model([node("ConvTranspose", ins, ["y"], **attrs)], feeds, ["y"], opset=opset), feeds


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("xs,ws,attrs", CASES)
def test_conv_transpose(xs, ws, attrs, dtype):
    m, feeds = _model(xs, ws, attrs, dtype)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    m32, f32 = _model(xs, ws, attrs, np.float32)
    want = run_ort(m32, {k: v.astype(np.float32) for k, v in feeds.items()})[0]
    assert got[0].dtype == dtype and got[0].shape == want.shape
    tol = 1e-2 if dtype == np.float16 else 1e-5
    np.testing.assert_allclose(got[0].astype(np.float32), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("opset", [1, 11, 22])
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose_reference(bias, opset):
    """Oracle: onnx.reference (group 1)."""
    m, feeds = _model((2, 3, 4, 4), (3, 2, 3, 3), {"strides": [2, 2], "pads": [1, 1, 0, 0]}, np.float32, bias,
                      opset=opset)
    got, sess = run_onnxep(m, feeds)
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, run_reference(m, feeds), rtol=1e-5, atol=1e-5)


def test_conv_transpose_bad_weight():
    """Oracle: none -- W whose first dim is not X's channels raises InvalidArgument naming the node."""
    m, feeds = _model((1, 3, 4, 4), (3, 2, 3, 3), {}, np.float32)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    bad = {**feeds, "x": rand((1, 2, 4, 4))}
    m2 = make_model(m.graph.node, bad, ["y"], opset=17, input_shapes={"x": ["N", "C", "H", "W"]})
    sess = onnxep.InferenceSession(m2.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="convtranspose_0.*first dim must be X's 2 channels"):
        sess.run(None, {**feeds, "x": bad["x"]})
    assert sess.run(None, feeds)[0].shape == (1, 2, 6, 6)


def test_conv_transpose_size_bomb():
    """Oracle: none -- an output_shape of ~10^12 elements is refused with a named error before allocating."""
    m, feeds = _model((1, 1, 2, 2), (1, 1, 2, 2), {"output_shape": [1 << 20, 1 << 20]}, np.float32)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises((Fail, InvalidArgument), match="bytes"):
        sess.run(None, feeds)
