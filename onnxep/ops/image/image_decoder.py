"""ImageDecoder with Pillow, an optional dependency: imported lazily, and without it supports() is False (the node then
goes to the reference backend, which needs Pillow too and says so). onnxruntime has no ImageDecoder kernel; the outputs
match onnx.reference's (which decodes with Pillow) for RGB / BGR / Grayscale images, and, unlike it, an image whose
mode is not the requested one (RGBA, palette, grayscale, CMYK) is converted (Pillow's convert) so the output always
has the (H, W, 3) or (H, W, 1) shape the spec gives."""
from __future__ import annotations

import io

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel, attr
from onnxep.ops.tensor._helpers import new_output

_FORMATS = {"RGB": ("RGB", 3), "BGR": ("RGB", 3), "Grayscale": ("L", 1)}


def _pil():
    """PIL.Image, or None when Pillow is not installed."""
    try:
        import PIL.Image
    except ImportError:
        return None
    return PIL.Image


class ImageDecoder_20(OpKernel):
    """image := the encoded_stream (1-D uint8: a JPEG, PNG, BMP, TIFF, WebP, PNM, JPEG 2000... file) decoded to
    (H, W, 3) RGB or BGR, or (H, W, 1) grayscale, uint8 (opset 20). The output size is checked from the image header
    before the pixels are decoded."""

    domain, op_type, since = "", "ImageDecoder", 20
    type_constraints = {"T1": ("uint8",), "T2": ("uint8",)}
    pixel_format = "RGB"

    @classmethod
    def supports(cls, op):
        return attr(op, "pixel_format", "RGB") in _FORMATS and _pil() is not None

    def compute(self, ctx):
        what = f"ImageDecoder node {self.name!r}"
        data = ctx.input(0)
        if data.ndim != 1:
            raise InvalidArgument(f"{what}: encoded_stream must be 1-D, got shape {data.shape}")
        image = _pil()
        if image is None:
            raise InvalidArgument(f"{what}: decoding needs Pillow (pip install pillow)")
        mode, channels = _FORMATS[self.pixel_format]
        try:
            img = image.open(io.BytesIO(data.tobytes()))
        except Exception as e:         # UnidentifiedImageError, a truncated header, a decompression bomb...
            raise InvalidArgument(f"{what}: encoded_stream ({data.size} bytes) is not an image Pillow can read: "
                                  f"{type(e).__name__}: {e}") from None
        w, h = img.size
        check_size((h, w, channels), np.uint8, what)
        try:
            if img.mode != mode:
                img = img.convert(mode)
            pixels = np.asarray(img)
        except Exception as e:
            raise InvalidArgument(f"{what}: decoding the {img.format} image failed: {type(e).__name__}: {e}") from None
        if pixels.dtype != np.uint8 or pixels.shape[:2] != (h, w):
            raise InvalidArgument(f"{what}: the {img.format} image decoded to {pixels.dtype} {pixels.shape}, expected "
                                  f"uint8 ({h}, {w}, {channels})")
        pixels = pixels.reshape(h, w, channels)
        y = new_output(ctx, 0, (h, w, channels), np.uint8, what)
        np.copyto(y, pixels[:, :, ::-1] if self.pixel_format == "BGR" else pixels)
