"""ImageDecoder on the cpu backend (Pillow, imported lazily). Oracle: onnx.reference (which decodes with Pillow;
onnxruntime has no ImageDecoder kernel) where it is right, else Pillow itself: onnx.reference returns an RGBA or
palette image's raw array for RGB, onnxep converts it to (H, W, 3). Without Pillow the node goes to the reference
backend, and the session refuses the model with an error that says Pillow is needed."""
import io
import struct
import sys
import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests.ops._tensor_cases import cpu_session, reference

PIL = pytest.importorskip("PIL.Image")


def _model(pixel_format="RGB"):
    n = helper.make_node("ImageDecoder", ["data"], ["img"], pixel_format=pixel_format, name="decoder_0")
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info("data", TensorProto.UINT8, [None])],
                          [helper.make_tensor_value_info("img", TensorProto.UINT8, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def _encode(arr, fmt, mode=None, **kw):
    buf = io.BytesIO()
    img = PIL.fromarray(arr)
    if mode:
        img = img.convert(mode)
    img.save(buf, format=fmt, **kw)
    return np.frombuffer(buf.getvalue(), np.uint8)


RGB = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)


@pytest.mark.parametrize("fmt", ["PNG", "BMP", "JPEG", "WEBP", "TIFF", "PPM"])
@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_image_decoder_formats(fmt, pixel_format):
    data = _encode(RGB, fmt)
    m = _model(pixel_format)
    sess = cpu_session(m)
    assert sess.node_assignment["decoder_0"] == "cpu"
    got = sess.run(None, {"data": data})[0]
    want = reference(m, {"data": data})[0]
    assert got.dtype == np.uint8 and got.shape == want.shape == (5, 7, 1 if pixel_format == "Grayscale" else 3)
    np.testing.assert_array_equal(got, want)
    if fmt in ("PNG", "BMP", "TIFF", "PPM") and pixel_format != "Grayscale":   # lossless: the pixels themselves
        np.testing.assert_array_equal(got, RGB if pixel_format == "RGB" else RGB[:, :, ::-1])


@pytest.mark.parametrize("mode", ["RGBA", "P", "L", "LA", "1"])
@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_image_decoder_converts_modes(mode, pixel_format):
    """A PNG whose mode is not the requested one is converted with Pillow (the oracle)."""
    data = _encode(RGB, "PNG", mode)
    got = cpu_session(_model(pixel_format)).run(None, {"data": data})[0]
    want = np.asarray(PIL.open(io.BytesIO(data.tobytes())).convert("L" if pixel_format == "Grayscale" else "RGB"))
    want = want[:, :, None] if pixel_format == "Grayscale" else want[:, :, ::-1] if pixel_format == "BGR" else want
    np.testing.assert_array_equal(got, want)


def test_image_decoder_bad_data():
    """Not an image, a truncated one, a 2-D input: InvalidArgument naming the node; the session still runs."""
    data = _encode(RGB, "PNG")
    sess = onnxep.InferenceSession(_model().SerializeToString(), onnxep.SessionOptions())
    for bad in (np.arange(20, dtype=np.uint8), data[:40], data[:0]):
        with pytest.raises(InvalidArgument, match="ImageDecoder node 'decoder_0'"):
            sess.run(None, {"data": bad})
    np.testing.assert_array_equal(sess.run(None, {"data": data})[0], RGB)


def _png_header(w, h):
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))  # noqa: E731
    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")
    return np.frombuffer(raw, np.uint8)


def test_image_decoder_size_bomb(monkeypatch):
    """A 100-byte PNG whose header says 2^20 x 2^20 pixels: refused before decoding -- by Pillow's decompression-bomb
    check, and with that check off (MAX_IMAGE_PIXELS None) by onnxep's size check (Fail naming node and shape)."""
    sess = cpu_session(_model())
    bomb = _png_header(1 << 20, 1 << 20)
    with pytest.raises(InvalidArgument, match="decoder_0.*DecompressionBomb"):
        sess.run(None, {"data": bomb})
    monkeypatch.setattr(PIL, "MAX_IMAGE_PIXELS", None)
    with pytest.raises(Fail, match=r"decoder_0.*\(1048576, 1048576, 3\).*over the"):
        sess.run(None, {"data": bomb})
    np.testing.assert_array_equal(sess.run(None, {"data": _encode(RGB, "PNG")})[0], RGB)


def test_image_decoder_without_pillow_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # `import PIL` now raises ImportError
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(onnxep.NotImplemented, match=r"ImageDecoder node 'decoder_0'.*Pillow"):
        onnxep.InferenceSession(_model().SerializeToString())
