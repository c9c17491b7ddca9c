"""DeformConv (opsets 19, 22), 2-D, float16 / float32 / float64: every kernel tap of every output pixel samples X
bilinearly (zeros outside) at its regular position plus the learned offset, times the mask; the samples form the
columns of an ordinary convolution, multiplied by the weight with one GEMM per group. Sampling is vectorized over
batch, offset group, taps and pixels at once (4 take_along_axis calls, one per bilinear corner). float16 is computed
in float32."""
import numpy as np

from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, acc_dtype, bad, ints, rank_of

_OP = "DeformConv"


class DeformConv_19(OpKernel):
    domain, op_type, since = "", "DeformConv", 19
    type_constraints = {"T": FLOATS}
    dilations = None
    group = 1
    kernel_shape = None
    offset_group = 1
    pads = None
    strides = None

    @classmethod
    def supports(cls, op):
        return rank_of(op.input_types[0]) in (None, 4)

    def compute(self, ctx):
        x, w, off, b, mask = (ctx.input(i) for i in range(5))
        if x.ndim != 4 or w.ndim != 4:
            raise bad(_OP, f"only 2-D is implemented: X {x.shape}, W {w.shape}")
        N, C, ih, iw = x.shape
        oc, icg, kh, kw = w.shape
        g, og = int(self.group), int(self.offset_group)
        if g <= 0 or og <= 0 or C != icg * g or oc % g or C % og:
            raise bad(_OP, f"X {x.shape}, W {w.shape}, group {g}, offset_group {og} are inconsistent")
        if self.kernel_shape is not None and len(self.kernel_shape) and ints(self.kernel_shape) != (kh, kw):
            raise bad(_OP, f"kernel_shape {list(self.kernel_shape)} does not match W's {(kh, kw)}")
        sh, sw = ints(self.strides, 2, 1)
        dh, dw = ints(self.dilations, 2, 1)
        pt, pl, pb, pr = ints(self.pads, 4, 0)
        oh = (ih + pt + pb - ((kh - 1) * dh + 1)) // sh + 1
        ow = (iw + pl + pr - ((kw - 1) * dw + 1)) // sw + 1
        K, P = kh * kw, oh * ow
        if off.shape != (N, og * K * 2, oh, ow):
            raise bad(_OP, f"offset has shape {off.shape}, expected {(N, og * K * 2, oh, ow)}")
        if mask is not None and mask.shape != (N, og * K, oh, ow):
            raise bad(_OP, f"mask has shape {mask.shape}, expected {(N, og * K, oh, ow)}")
        if b is not None and b.shape != (oc,):
            raise bad(_OP, f"B has shape {b.shape}, expected ({oc},)")
        y = ctx.output(0, (N, oc, oh, ow), x.dtype)
        if y.size == 0:
            return
        acc = acc_dtype(x.dtype)
        cpo = C // og
        check_size((N, C, K, P), acc, f"{_OP} columns")
        o = off.astype(acc, copy=False).reshape(N, og, kh, kw, 2, oh, ow)
        base_h = (np.arange(kh) * dh)[:, None, None, None] + (np.arange(oh) * sh - pt)[None, None, :, None]
        base_w = (np.arange(kw) * dw)[None, :, None, None] + (np.arange(ow) * sw - pl)[None, None, None, :]
        hs = (o[:, :, :, :, 0] + base_h).reshape(N, og, 1, K * P)     # (N, og, 1, K*P) sampling rows
        ws = (o[:, :, :, :, 1] + base_w).reshape(N, og, 1, K * P)
        h0, w0 = np.floor(hs), np.floor(ws)
        lh, lw = hs - h0, ws - w0
        xr = x.astype(acc, copy=False).reshape(N, og, cpo, ih * iw)
        cols = np.zeros((N, og, cpo, K * P), acc)
        for dy, wy in ((0, 1 - lh), (1, lh)):       # the 4 bilinear corners, zero outside the image
            for dx, wx in ((0, 1 - lw), (1, lw)):
                hc, wc = h0 + dy, w0 + dx
                inside = (hc >= 0) & (hc < ih) & (wc >= 0) & (wc < iw)
                idx = (np.clip(hc, 0, ih - 1) * iw + np.clip(wc, 0, iw - 1)).astype(np.intp)
                cols += np.take_along_axis(xr, idx, axis=3) * (wy * wx * inside)
        if mask is not None:
            cols *= mask.astype(acc, copy=False).reshape(N, og, 1, K * P)
        # (C * K, N * P) so one GEMM per group covers every image
        ct = np.ascontiguousarray(cols.reshape(N, C, K, P).transpose(1, 2, 0, 3)).reshape(C * K, N * P)
        wg = w.astype(acc, copy=False).reshape(g, oc // g, icg * K)
        res = np.empty((oc, N * P), acc)
        ocg = oc // g
        for gi in range(g):
            np.matmul(wg[gi], ct[gi * icg * K:(gi + 1) * icg * K], out=res[gi * ocg:(gi + 1) * ocg])
        res = res.reshape(oc, N, oh, ow).transpose(1, 0, 2, 3)
        if b is not None:
            res = res + b.astype(acc, copy=False)[:, None, None]
        np.copyto(y, res, casting="same_kind")
