"""ImageDecoder runs on the reference backend (onnx.reference decodes with Pillow). Oracle: Pillow itself; without
Pillow the session refuses the model with an error that says so."""
import io
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep

PIL = pytest.importorskip("PIL.Image")


def _model():
    n = helper.make_node("ImageDecoder", ["data"], ["img"], pixel_format="RGB", name="decoder_0")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("data", TensorProto.UINT8, [None])],
                          [helper.make_tensor_value_info("img", TensorProto.UINT8, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def _png():
    rgb = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    buf = io.BytesIO()
    PIL.fromarray(rgb).save(buf, format="PNG")
    return rgb, np.frombuffer(buf.getvalue(), np.uint8)


def test_image_decoder_png():
    rgb, data = _png()
    sess = onnxep.InferenceSession(_model().SerializeToString())
    assert sess.node_assignment["decoder_0"] == "reference"
    np.testing.assert_array_equal(sess.run(None, {"data": data})[0], rgb)


def test_image_decoder_without_pillow_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` now raises ImportError
    with pytest.raises(onnxep.NotImplemented, match=r"ImageDecoder node 'decoder_0'.*Pillow"):
        onnxep.InferenceSession(_model().SerializeToString())
