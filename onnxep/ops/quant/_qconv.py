"""The native channel-last quantized conv (onnxep/_native/qconv.h through _kernels.qconv_nhwc): its weights prepared
once (packed for the int8 GEMM, or centred int16 for a depthwise conv), its multipliers and its parameter vector.
Used by com.onnxep QLinearConvNhwc and by QLinearConv (NCHW, through two transposes) where it applies: 2-D, group 1
or depthwise (group == C == M), 8-bit x / w / y, per-tensor x and y parameters, w per tensor or per output channel."""
from __future__ import annotations

import numpy as np

from onnxep import _kernels

F32 = np.dtype(np.float32)
_BYTES = (np.dtype(np.int8), np.dtype(np.uint8))
#: int8 / uint8 -> (min, max)
RANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255)}


def available() -> bool:
    return hasattr(_kernels, "qconv_nhwc")


def applies(x_dtype, w, group, kernel_shape_ok=True) -> bool:
    """Whether the native conv computes this case: 2-D (w (M, C/g, kh, kw)), 8-bit x and w, group 1 or depthwise."""
    if not available() or not kernel_shape_ok or w is None or w.ndim != 4 or np.dtype(x_dtype) not in _BYTES \
            or w.dtype not in _BYTES:
        return False
    m = w.shape[0]
    return group == 1 or (w.shape[1] == 1 and group == m)


class Prepared:
    """A conv's constant side: weight bytes for the kernel (w8), shifted weight zero points (zb, int32), the float32
    multipliers x_scale * w_scale / y_scale (mult, as quant/_common.py computes them for QLinearConv), the int32 bias
    (or None) and whether the conv is depthwise."""

    __slots__ = ("w8", "zb", "mult", "bias", "depthwise", "M", "kh", "kw", "C")

    def __init__(self, w, wz, ws, xs, ys, bias, group):
        m, cg, kh, kw = w.shape
        self.M, self.kh, self.kw = m, kh, kw
        self.depthwise = group != 1
        self.C = m if self.depthwise else cg
        wz = np.zeros(1, np.int64) if wz is None else np.asarray(wz).reshape(-1).astype(np.int64)
        if self.depthwise:
            wc = w.reshape(m, kh * kw).astype(np.int16) - wz.reshape(-1, 1).astype(np.int16)
            self.w8 = np.ascontiguousarray(wc.T).view(np.uint8).reshape(-1)
            self.zb = np.zeros(1, np.int32)
        else:
            k = kh * kw * cg
            b = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k, m))
            self.w8 = np.empty(_kernels.qgemm_pack_b_size(k, m), np.uint8)
            _kernels.qgemm_pack_b(b.view(np.uint8), w.dtype == np.int8, self.w8)
            self.zb = (wz - (128 if w.dtype == np.uint8 else 0)).astype(np.int32)
            if self.zb.size > 1 and np.all(self.zb == self.zb[0]):
                self.zb = self.zb[:1].copy()      # one value (a per-channel zero point of zeros): no row sums needed
        self.mult = np.ascontiguousarray(
            np.asarray(xs.astype(F32).reshape(()) * ws.astype(F32) / ys.astype(F32).reshape(()), F32).reshape(-1))
        self.bias = None if bias is None else np.ascontiguousarray(bias.astype(np.int32).reshape(-1))

    def params(self, x_dtype, y_dtype, xshape_nhwc, out_hw, strides, pads_begin, dilations, x_zp):
        """The QCONV_PARAMS vector (_k_qconv.pxi) of a call on an NHWC x of shape xshape_nhwc."""
        n, h, w_, c = xshape_nhwc
        return np.array([np.dtype(x_dtype) == np.int8, np.dtype(y_dtype) == np.int8, n, h, w_, c, out_hw[0],
                         out_hw[1], self.M, self.kh, self.kw, strides[0], strides[1], pads_begin[0], pads_begin[1],
                         dilations[0], dilations[1], x_zp, 1 if self.zb.size > 1 else 0,
                         1 if self.mult.size > 1 else 0, int(self.depthwise)], np.intp)


def run(prep, x, params, y, y_zp, qlo, qhi, nthreads=0):
    """y (NHWC, int8 / uint8) := the conv of x (NHWC) by prep."""
    _kernels.qconv_nhwc(x.reshape(-1).view(np.uint8), prep.w8, prep.zb, prep.bias, prep.mult,
                        y.reshape(-1).view(np.uint8), params, float(y_zp), float(qlo), float(qhi), nthreads)
