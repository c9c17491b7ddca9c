"""RoiAlign (opsets 10, 16, 22): Y[r, c, i, j] pools bin (i, j) of roi r over X[batch_indices[r], c], as onnxruntime
computes it.

roi (x1, y1, x2, y2) * spatial_scale, shifted by -0.5 under coordinate_transformation_mode half_pixel (the opset-16 / 22
default; opset 10 is output_half_pixel: no shift, and the roi at least 1 x 1). Each bin takes sampling_ratio x
sampling_ratio points (0: ceil(roi size / output size) per axis, adaptive per roi), each point bilinearly sampled (a
point outside [-1, size] is 0, one in [-1, 0] reads the edge). mode avg: the mean of the points; mode max: the largest
corner term w_k * x_k over every point and corner -- onnxruntime's definition, which onnx.reference's max mode shares
and the backend suite's data follows, rather than the max of the interpolated values.

Vectorized over rois, bins and sampling points: the bilinear weights are separable (a y part and an x part), the four
corners of every point of a chunk of rois are gathered in one take each from X in channel-last order. Rois are
processed in chunks of similar grid size so one large adaptive roi does not widen every other roi's grid."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel

#: elements gathered per chunk (per corner): bounds the temporaries
_CHUNK = 1 << 22


def _axis(start, bin_size, grid, pooled, G, size, dt):
    """Per roi, bin and grid point along one axis: (lo index, hi index, lo weight, hi weight), each [R, pooled, G].
    A grid point past the roi's own grid repeats its last point (a repeat leaves a maximum unchanged; compute zeroes
    its weights for an average); the weights are 0 for a point outside [-1, size], and for every point of a roi
    with an empty grid."""
    p = np.arange(pooled, dtype=dt)[None, :, None]
    g = np.minimum(np.arange(G)[None, None, :], np.maximum(grid, 1)[:, None, None] - 1)
    b = bin_size[:, None, None]
    gf = np.maximum(grid, 1).astype(dt)[:, None, None]
    pos = (start[:, None, None] + p * b) + (g + dt.type(0.5)).astype(dt) * b / gf
    valid = (pos >= -1) & (pos <= size) & (grid[:, None, None] > 0)
    q = np.maximum(pos, 0)
    lo = q.astype(np.int64)
    edge = lo >= size - 1
    lo = np.where(edge, size - 1, lo)
    hi = np.where(edge, size - 1, lo + 1)
    q = np.where(edge, lo.astype(dt), q)
    frac = q - lo
    w_hi = np.where(valid, frac, 0).astype(dt)
    w_lo = np.where(valid, 1 - frac, 0).astype(dt)
    return lo, hi, w_lo, w_hi


class RoiAlign_10(OpKernel):
    domain, op_type, since = "", "RoiAlign", 10
    type_constraints = {"T1": ("float16", "float32", "float64", "bfloat16"), "T2": ("int64",)}
    mode = "avg"
    output_height = 1
    output_width = 1
    sampling_ratio = 0
    spatial_scale = 1.0
    coordinate_transformation_mode = "output_half_pixel"   # opset 10 has no attribute: the legacy behaviour

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        return (a.get("mode", "avg") in ("avg", "max")
                and a.get("coordinate_transformation_mode", "half_pixel") in ("half_pixel", "output_half_pixel"))

    def compute(self, ctx):
        x, rois, bidx = ctx.input(0), ctx.input(1), ctx.input(2)
        where = f"RoiAlign node {self.name!r}"
        if x.ndim != 4:
            raise InvalidArgument(f"{where}: X must be 4-D [N, C, H, W], got shape {x.shape}")
        if rois.ndim != 2 or rois.shape[1] != 4:
            raise InvalidArgument(f"{where}: rois must have shape [num_rois, 4], got {rois.shape}")
        if bidx.shape != (rois.shape[0],):
            raise InvalidArgument(f"{where}: batch_indices must have shape ({rois.shape[0]},), got {bidx.shape}")
        N, C, H, W = x.shape
        R = rois.shape[0]
        if bidx.size and (bidx.min() < 0 or bidx.max() >= N):
            raise InvalidArgument(f"{where}: batch_indices must be in [0, {N - 1}], got values in "
                                  f"[{bidx.min()}, {bidx.max()}]")
        ph, pw = int(self.output_height), int(self.output_width)
        if ph <= 0 or pw <= 0 or int(self.sampling_ratio) < 0:
            raise InvalidArgument(f"{where}: output_height / output_width must be > 0 and sampling_ratio >= 0, got "
                                  f"{ph}, {pw}, {self.sampling_ratio}")
        odt = x.dtype
        y = ctx.output(0, (R, C, ph, pw), odt)   # size: the executor's allocator checks it first
        if y.size == 0:
            return
        if H == 0 or W == 0:
            y[...] = 0
            return
        dt = np.dtype(np.float64) if odt == np.float64 else np.dtype(np.float32)
        half = self.coordinate_transformation_mode == "half_pixel"
        r = rois.astype(dt, copy=False)
        scale, off = dt.type(self.spatial_scale), dt.type(0.5 if half else 0.0)
        x0, y0 = r[:, 0] * scale - off, r[:, 1] * scale - off
        x1, y1 = r[:, 2] * scale - off, r[:, 3] * scale - off
        rw, rh = x1 - x0, y1 - y0
        if not half:
            rw, rh = np.maximum(rw, dt.type(1)), np.maximum(rh, dt.type(1))
        bh, bw = rh / dt.type(ph), rw / dt.type(pw)
        sr = int(self.sampling_ratio)
        if not np.isfinite(r).all():
            raise InvalidArgument(f"{where}: rois must be finite")
        if sr > 0:
            ghf = gwf = np.full(R, float(sr))
        else:
            ghf = np.maximum(np.ceil(rh / dt.type(ph)).astype(np.float64), 0)
            gwf = np.maximum(np.ceil(rw / dt.type(pw)).astype(np.float64), 0)
        is_max = self.mode == "max"
        big = int(np.argmax(ghf * gwf))
        # the largest roi's sampling points, checked before any grid is built (and before int64 could wrap)
        check_size((1, ph, int(ghf[big]), pw, int(gwf[big]), C), dt, f"{where} sampling points")
        gh, gw = ghf.astype(np.int64), gwf.astype(np.int64)
        count = np.maximum(gh * gw, 1).astype(dt)
        xt = np.ascontiguousarray(x.astype(dt, copy=False).transpose(0, 2, 3, 1))   # channel-last: a point is C values
        per_roi = ph * pw * np.maximum(gh, 1) * np.maximum(gw, 1) * max(C, 1)
        order = np.argsort(per_roi, kind="stable")
        start = 0
        while start < R:
            # a chunk of rois of similar size, its temporaries bounded by _CHUNK elements
            stop = start + 1
            while stop < R and (stop - start + 1) * per_roi[order[stop]] <= _CHUNK:
                stop += 1
            idx = order[start:stop]
            Gh, Gw = max(int(gh[idx].max()), 1), max(int(gw[idx].max()), 1)
            ys = _axis(y0[idx], bh[idx], gh[idx], ph, Gh, H, dt)
            xs = _axis(x0[idx], bw[idx], gw[idx], pw, Gw, W, dt)
            if is_max:
                acc = self._gather(xt, bidx[idx], ys, xs, where, True)
            else:
                # points past a roi's own grid repeat its last point: zero weight in a sum
                ylo, yhi, wylo, wyhi = ys
                xlo, xhi, wxlo, wxhi = xs
                iy = np.arange(Gh)[None, None, :] < gh[idx][:, None, None]
                ix = np.arange(Gw)[None, None, :] < gw[idx][:, None, None]
                ys, xs = (ylo, yhi, wylo * iy, wyhi * iy), (xlo, xhi, wxlo * ix, wxhi * ix)
                acc = self._gather(xt, bidx[idx], ys, xs, where, False) / count[idx][:, None, None, None]
            y[idx] = acc.transpose(0, 3, 1, 2)
            start = stop

    @staticmethod
    def _gather(xt, b, ys, xs, where, is_max):
        """[n, ph, pw, C]: per bin, the sum (avg) or the largest (max) of the corner terms w_k * x_k of its points,
        the four corners of every point gathered in one take each."""
        N, H, W, C = xt.shape
        ylo, yhi, wylo, wyhi = ys
        xlo, xhi, wxlo, wxhi = xs
        check_size(ylo.shape + xlo.shape[1:] + (C,), xt.dtype, f"{where} sampling points")
        xflat = xt.reshape(N * H * W, C)       # row (n * H + y) * W + x
        rows = (b * H)[:, None, None, None, None]
        acc = None
        for yi, wy in ((ylo, wylo), (yhi, wyhi)):
            yrow = (rows + yi[:, :, :, None, None]) * W
            for xi, wx in ((xlo, wxlo), (xhi, wxhi)):
                v = np.take(xflat, yrow + xi[:, None, None, :, :], axis=0)     # [n, ph, Gh, pw, Gw, C]
                v *= (wy[:, :, :, None, None] * wx[:, None, None, :, :])[..., None]
                if acc is None:
                    acc = v
                elif is_max:
                    np.maximum(acc, v, out=acc)
                else:
                    acc += v
        return acc.max(axis=(2, 4)) if is_max else acc.sum(axis=(2, 4))


class RoiAlign_16(RoiAlign_10):
    """coordinate_transformation_mode (default half_pixel) (opsets 16, 22)."""

    since = 16
    coordinate_transformation_mode = "half_pixel"
