"""ConvTranspose (opsets 1, 11, 22), 1-D to 3-D, float16 / float32 / float64: groups, strides, pads, dilations,
output_padding, output_shape, auto_pad. One GEMM per group (np.matmul of the transposed weight on every image at
once) gives the columns (M, kernel taps, N, input pixels); col2im then adds each kernel tap's columns into its slice
of the full output -- a loop over the taps (9 for 3x3), never over elements -- and the padding is cropped off.
float16 is computed in float32. float32 2-D: the packed SGEMM and a native col2im (_k_resample.pxi) -- one group and
8 or more output channels channel-last (X^T W, each tap's channels added as one vector, W packed once when constant,
the result copied out to NCHW), else (up to 16 groups) into the NCHW planes, each starting from the bias.

Pads from output_shape / auto_pad follow the spec (and onnx.reference): total = full - output_shape; SAME_UPPER puts
total // 2 at the start, the others total - total // 2. A negative total (output_shape beyond the full output) pads
the end with zeros (bias only), as onnxruntime does."""
import itertools

import numpy as np

from onnxep import _kernels
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops.nn.conv import ConvAttrs
from onnxep.ops.nn._helpers import FLOATS, acc_dtype, bad, ints, rank_of

_OP = "ConvTranspose"


def transpose_geometry(in_sp, k, strides, dilations, output_padding, pads, auto_pad, output_shape):
    """(begin pads, output spatial size, full spatial size) of a ConvTranspose; raises InvalidArgument."""
    nsp = len(in_sp)
    full = tuple(s * (i - 1) + a + (kk - 1) * d + 1
                 for i, kk, s, d, a in zip(in_sp, k, strides, dilations, output_padding))
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if output_shape is None:
            out = tuple(i * s for i, s in zip(in_sp, strides))
        else:
            out = tuple(output_shape[-nsp:]) if len(output_shape) in (nsp, nsp + 2) else None
            if out is None:
                raise bad(_OP, f"output_shape {list(output_shape)} needs {nsp} (or {nsp + 2}) entries")
        begin = []
        for f, o in zip(full, out):
            total = max(f - o, 0)
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
        return tuple(begin), out, full
    if auto_pad == "VALID" or pads is None:
        pads = (0,) * (2 * nsp)
    if len(pads) != 2 * nsp:
        raise bad(_OP, f"pads {list(pads)} need {2 * nsp} entries")
    out = tuple(f - b - e for f, b, e in zip(full, pads[:nsp], pads[nsp:]))
    if any(o < 0 for o in out):
        raise bad(_OP, f"pads {list(pads)} crop more than the full output {full}")
    return tuple(pads[:nsp]), out, full


class ConvTranspose_1(ConvAttrs, OpKernel):
    domain, op_type, since = "", "ConvTranspose", 1
    type_constraints = {"T": FLOATS}
    output_padding = None
    output_shape = None

    @classmethod
    def supports(cls, op):
        r = rank_of(op.input_types[0]) if op.input_types else None
        if r is not None and not 3 <= r <= 5:
            return False
        pads = op.node.attrs.get("pads")
        return not pads or min(pads) >= 0

    def compute(self, ctx):
        x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
        if x.ndim < 3 or w.ndim != x.ndim:
            raise bad(_OP, f"X {x.shape} and W {w.shape} must have one rank >= 3")
        nsp = x.ndim - 2
        N, C = x.shape[:2]
        g = int(self.group)
        if g <= 0 or C % g or w.shape[0] != C:
            raise bad(_OP, f"W has shape {w.shape}: its first dim must be X's {C} channels, divisible by group {g}")
        Cg, Mg = C // g, w.shape[1]
        M = Mg * g
        k = tuple(w.shape[2:])
        if self.kernel_shape is not None and len(self.kernel_shape) and ints(self.kernel_shape) != k:
            raise bad(_OP, f"kernel_shape {list(self.kernel_shape)} does not match W's spatial shape {k}")
        if b is not None and b.shape != (M,):
            raise bad(_OP, f"B has shape {b.shape}, expected ({M},)")
        strides = ints(self.strides, nsp, 1)
        dilations = ints(self.dilations, nsp, 1)
        adj = ints(self.output_padding, nsp, 0)
        for name, v in (("strides", strides), ("dilations", dilations), ("output_padding", adj)):
            if len(v) != nsp:
                raise bad(_OP, f"{name} {list(v)} needs {nsp} entries")
        in_sp = x.shape[2:]
        begin, out_sp, full = transpose_geometry(in_sp, k, strides, dilations, adj, ints(self.pads),
                                                 self.auto_pad, ints(self.output_shape))
        y = ctx.output(0, (N, M) + out_sp, x.dtype)
        if y.size == 0:
            return
        acc = acc_dtype(x.dtype)
        P, K = int(np.prod(in_sp)), int(np.prod(k))
        if nsp == 2 and g == 1 and M >= 8 and x.dtype == w.dtype == np.float32 \
                and (b is None or b.dtype == np.float32):
            self._native_2d_nhwc(ctx, x, w, b, y, C, M, k, P, K, begin, strides, dilations)
            return
        if nsp == 2 and g <= 16 and x.dtype == w.dtype == np.float32 and (b is None or b.dtype == np.float32):
            self._native_2d(ctx, x, w, b, y, g, C, Cg, Mg, M, k, P, K, begin, strides, dilations)
            return
        check_size((M * K, N * P), acc, f"{_OP} columns")
        # X as (C, N*P): one GEMM per group covers every image (numpy's stacked matmul does not call BLAS)
        xt = x.reshape(N, C, P).astype(acc, copy=False)
        xt = xt.reshape(C, P) if N == 1 else np.ascontiguousarray(xt.transpose(1, 0, 2)).reshape(C, N * P)
        # (g, Mg*K, Cg) contiguous: np.matmul with out= leaves BLAS for a transposed operand (12 ms vs 0.3 ms)
        wt = np.ascontiguousarray(w.reshape(g, Cg, Mg * K).astype(acc, copy=False).transpose(0, 2, 1))
        cols = np.empty((M * K, N * P), acc)
        if g <= 16:
            for gi in range(g):
                np.matmul(wt[gi], xt[gi * Cg:(gi + 1) * Cg], out=cols[gi * Mg * K:(gi + 1) * Mg * K])
        else:      # many small groups (depthwise): one stacked product
            np.matmul(wt, xt.reshape(g, Cg, N * P), out=cols.reshape(g, Mg * K, N * P))
        cols = cols.reshape((M,) + k + (N,) + tuple(in_sp))
        lead = (slice(None), slice(None))
        if k == strides and all(d == 1 for d in dilations) and all(
                bg + o <= i * st for bg, o, i, st in zip(begin, out_sp, in_sp, strides)):
            # kernel == stride (the 2x2 / 2 upsampling of U-Nets): the taps never overlap, col2im is a copy per tap
            # into its phase (one 6-D transpose copy, whose inner loop runs over the 2 phases, is 3x slower)
            full_buf = np.empty((N, M) + tuple(a for i, st in zip(in_sp, strides) for a in (i, st)), acc)
            for tap in itertools.product(*(range(kk) for kk in k)):
                dst = lead + tuple(a for t in tap for a in (slice(None), t))
                full_buf[dst] = cols[(slice(None),) + tap].swapaxes(0, 1)
            full_buf = full_buf.reshape((N, M) + tuple(i * st for i, st in zip(in_sp, strides)))
        else:
            full_buf = self._col2im(cols, M, N, k, in_sp, full, begin, out_sp, strides, dilations, acc)
        crop = full_buf[lead + tuple(slice(bg, bg + o) for bg, o in zip(begin, out_sp))]
        if b is None:
            np.copyto(y, crop, casting="same_kind")
        else:
            np.add(crop, b.astype(acc, copy=False).reshape((M,) + (1,) * nsp), out=y, casting="same_kind")

    _w_packed = None          # W as (C, KH * KW * M), packed for the SGEMM (a constant W: packed once)

    def _native_2d_nhwc(self, ctx, x, w, b, y, C, M, k, P, K, begin, strides, dilations):
        """float32 2-D, one group, M >= 8: the columns (N * P, K * M) = X^T W (W as (C, KH, KW, M), packed once when
        constant) by the packed SGEMM, then the channel-last col2im adds each tap's M channels (contiguous on both
        sides) into a channel-last result from the bias, copied out to NCHW."""
        N = x.shape[0]
        OH, OW = y.shape[2], y.shape[3]
        check_size((N * P, M * K), np.float32, f"{_OP} columns")
        bp = self._w_packed
        if bp is None:
            wr = np.ascontiguousarray(np.asarray(w, np.float32).reshape(C, M, K).transpose(0, 2, 1)).reshape(C, K * M)
            bp = np.empty(_kernels.sgemm_pack_b_size(C, K * M), np.float32)
            _kernels.sgemm_pack_b(wr, False, bp)
            if 1 in self.info.constants:
                self._w_packed = bp
        xt = x.reshape(N, C, P)
        xt = np.ascontiguousarray(xt.reshape(C, P) if N == 1 else xt.transpose(1, 0, 2).reshape(C, N * P))
        cols = np.empty((N * P, K * M), np.float32)
        nt = ctx.num_threads
        _kernels.sgemm_packed_f32(True, 1.0, xt, bp, K * M, 0.0, cols, None, None, False, nt)
        y_nhwc = np.empty((N, OH, OW, M), np.float32)
        _kernels.col2im_nhwc_f32(cols, y_nhwc.reshape(-1), N, M, k[0], k[1], x.shape[2], x.shape[3], OH, OW,
                                 strides[0], strides[1], begin[0], begin[1], dilations[0], dilations[1],
                                 None if b is None else np.ascontiguousarray(b), nt)
        np.copyto(y, y_nhwc.transpose(0, 3, 1, 2))

    @staticmethod
    def _native_2d(ctx, x, w, b, y, g, C, Cg, Mg, M, k, P, K, begin, strides, dilations):
        """float32 2-D: the columns (M * K, N * P) = W^T X by the packed SGEMM (one per group, every image at once),
        then the native col2im sums them into y, starting from the bias."""
        N = x.shape[0]
        check_size((M * K, N * P), np.float32, f"{_OP} columns")
        xt = x.reshape(N, C, P)
        xt = np.ascontiguousarray(xt.reshape(C, P) if N == 1 else xt.transpose(1, 0, 2).reshape(C, N * P))
        w2 = np.ascontiguousarray(w).reshape(C, Mg * K)
        cols = np.empty((M * K, N * P), np.float32)
        nt = ctx.num_threads
        for gi in range(g):
            _kernels.sgemm_f32(True, False, 1.0, w2[gi * Cg:(gi + 1) * Cg], xt[gi * Cg:(gi + 1) * Cg], 0.0,
                               cols[gi * Mg * K:(gi + 1) * Mg * K], nt)
        _kernels.col2im_f32(cols, y.reshape(-1), N, M, k[0], k[1], x.shape[2], x.shape[3], y.shape[2], y.shape[3],
                            strides[0], strides[1], begin[0], begin[1], dilations[0], dilations[1],
                            None if b is None else np.ascontiguousarray(b), nt)

    @staticmethod
    def _col2im(cols, M, N, k, in_sp, full, begin, out_sp, strides, dilations, acc):
        """The full output (N, M, spatial...) of the columns (M, taps..., N, in_sp...), as a (possibly strided) view."""
        nsp = len(k)
        # col2im by phase: output o = i * s + t * d lands in phase (t * d) % s at row i + (t * d) // s of a
        # (M, N, s..., Q...) buffer, so each tap adds contiguous rows (a stride-s add runs ~4x slower in numpy)
        Q = tuple(-(-max(f, bg + o) // st) for f, bg, o, st in zip(full, begin, out_sp, strides))
        check_size((M, N) + strides + Q, acc, f"{_OP} output buffer")
        buf = np.zeros((M, N) + strides + Q, acc)
        lead = (slice(None), slice(None))
        for tap in itertools.product(*(range(kk) for kk in k)):
            offs = [t * d for t, d in zip(tap, dilations)]
            dst = tuple(o % st for o, st in zip(offs, strides)) + tuple(
                slice(o // st, o // st + i) for o, st, i in zip(offs, strides, in_sp))
            buf[lead + dst] += cols[(slice(None),) + tap]
        # interleave the phases back (N, M, Q1, s1, Q2, s2, ...) -> (N, M, Q1*s1, ...), then crop and add the bias
        if all(st == 1 for st in strides):    # one phase: a view
            full_buf = buf.reshape((M, N) + Q).swapaxes(0, 1)
        else:
            perm = (1, 0) + tuple(a for j in range(nsp) for a in (2 + nsp + j, 2 + j))
            full_buf = np.empty((N, M) + tuple(a for q, st in zip(Q, strides) for a in (q, st)), acc)
            np.copyto(full_buf, buf.transpose(perm))
            full_buf = full_buf.reshape((N, M) + tuple(q * st for q, st in zip(Q, strides)))
        return full_buf
