"""NonMaxSuppression (opsets 10, 11): greedy selection per batch and class, as onnxruntime computes it.

For each (batch, class): the boxes whose score is > score_threshold (all when it is absent), highest score first (ties:
lower box index first); a box is kept unless its IoU with an already kept box is > iou_threshold; at most
max_output_boxes_per_class kept (absent or 0: none). Boxes are [y1, x1, y2, x2] with either corner first
(center_point_box 0) or [x_center, y_center, width, height] (1). A box pair with no overlap, or a box of zero area,
never suppresses. IoU in float32, as onnxruntime. Output [num_selected, 3] int64 rows (batch, class, box), batch then
class then selection order: its size is known only once every class is done, and is checked before it is allocated.

The loop runs over (batch, class); a class's candidates are resolved in blocks of _BLOCK (IoU matrices of a block
against itself and against the boxes already kept: no K x K matrix), so the Python work per class is a loop over the
rows of a block, one small numpy update per kept box."""
import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops.tensor._helpers import new_output
from onnxep.ops._base import OpKernel

_F = np.float32


def _corners(boxes, center):
    """(y_min, x_min, y_max, x_max) float32 arrays of shape boxes.shape[:-1]."""
    b = boxes.astype(_F, copy=False)
    if center:
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        hw, hh = w / _F(2), h / _F(2)
        return yc - hh, xc - hw, yc + hh, xc + hw
    y1, x1, y2, x2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


#: candidates resolved per block, at most (one [block, block] IoU matrix, one [block, kept] against the boxes kept
#: before)
_BLOCK = 256


def _over(a, b, thr):
    """[len(a), len(b)] bool: IoU(a_i, b_j) > thr, a pair with no overlap or a box of no area never over (onnxruntime's
    rules); a and b are [y_min, x_min, y_max, x_max, area] lists of float32 arrays."""
    ay0, ax0, ay1, ax1, aa = (v[:, None] for v in a)
    by0, bx0, by1, bx1, ba = (v[None, :] for v in b)
    iy = np.minimum(ay1, by1) - np.maximum(ay0, by0)
    ix = np.minimum(ax1, bx1) - np.maximum(ax0, bx0)
    inter = ix * iy
    union = aa + ba - inter
    with np.errstate(divide="ignore", invalid="ignore"):
        over = (inter / union) > thr
    over &= (ix > 0) & (iy > 0) & (aa > 0) & (ba > 0) & (union > 0)
    return over


def _greedy(boxes, thr, max_out):
    """Indices (into the score-sorted candidates `boxes`) that greedy NMS keeps, at most max_out: the candidates are
    taken in blocks; a block is first cut by every box kept before it (one matrix), then resolved in order with its
    own IoU matrix (a Python loop over the block's rows, one small numpy update per kept box)."""
    n = len(boxes[0])
    kept = []
    start = 0
    size = max(32, min(_BLOCK, 2 * max_out))   # small first block: most kept boxes are among the top-scored
    while start < n:
        stop = min(n, start + size)
        size = min(2 * size, _BLOCK)
        blk = [v[start:stop] for v in boxes]
        alive = np.ones(stop - start, bool)
        if kept:
            ki = np.asarray(kept)
            alive &= ~_over(blk, [v[ki] for v in boxes], thr).any(axis=1)
        over = _over(blk, blk, thr)
        for j in np.flatnonzero(alive):
            if not alive[j]:
                continue
            kept.append(start + int(j))
            if len(kept) >= max_out:
                return np.asarray(kept, np.int64)
            alive[j + 1:] &= ~over[j, j + 1:]
        start = stop
    return np.asarray(kept, np.int64)


class NonMaxSuppression_10(OpKernel):
    domain, op_type, since = "", "NonMaxSuppression", 10
    center_point_box = 0

    @classmethod
    def check_types(cls, op):
        want = ("tensor(float)", "tensor(float)", "tensor(int64)", "tensor(float)", "tensor(float)")
        for i, name in enumerate(op.node.inputs):
            if not name:
                continue
            vt = op.input_types[i] if i < len(op.input_types) else None
            if i >= len(want) or vt is None or vt.kind != "tensor" or vt.type_str != want[i]:
                return False
        return True

    @classmethod
    def supports(cls, op):
        return int(op.node.attrs.get("center_point_box", 0) or 0) in (0, 1)

    def _scalar(self, v, what, default):
        if v is None:
            return default
        a = np.asarray(v).reshape(-1)
        if a.size != 1:
            raise InvalidArgument(f"NonMaxSuppression node {self.name!r}: {what} must hold one value, got shape "
                                  f"{np.shape(v)}")
        return a[0]

    def compute(self, ctx):
        boxes, scores = ctx.input(0), ctx.input(1)
        where = f"NonMaxSuppression node {self.name!r}"
        if boxes.ndim != 3 or boxes.shape[2] != 4:
            raise InvalidArgument(f"{where}: boxes must have shape [num_batches, spatial_dimension, 4], got "
                                  f"{boxes.shape}")
        if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
            raise InvalidArgument(f"{where}: scores must have shape [{boxes.shape[0]}, num_classes, {boxes.shape[1]}] "
                                  f"to match boxes {boxes.shape}, got {scores.shape}")
        max_out = int(self._scalar(ctx.input(2), "max_output_boxes_per_class", 0))
        iou_thr = _F(self._scalar(ctx.input(3), "iou_threshold", 0.0))
        score_thr = ctx.input(4)
        score_thr = None if score_thr is None else _F(self._scalar(score_thr, "score_threshold", 0.0))
        if not 0 <= iou_thr <= 1:
            raise InvalidArgument(f"{where}: iou_threshold must be in [0, 1], got {iou_thr}")
        nb, nc, n = scores.shape
        picked = []
        if max_out > 0 and n > 0:
            ymin, xmin, ymax, xmax = _corners(boxes, self.center_point_box)
            area = (ymax - ymin) * (xmax - xmin)
            sc_all = scores.astype(_F, copy=False)
            for b in range(nb):
                by0, bx0, by1, bx1, ba = ymin[b], xmin[b], ymax[b], xmax[b], area[b]
                for c in range(nc):
                    sc = sc_all[b, c]
                    cand = np.flatnonzero(sc > score_thr) if score_thr is not None else np.arange(n)
                    if cand.size == 0:
                        continue
                    # highest score first, ties by box index (a stable sort of the ascending indices)
                    cand = cand[np.argsort(-sc[cand], kind="stable")]
                    kept = _greedy([by0[cand], bx0[cand], by1[cand], bx1[cand], ba[cand]], iou_thr, max_out)
                    kept = cand[kept]
                    if len(kept):
                        rows = np.empty((len(kept), 3), np.int64)
                        rows[:, 0], rows[:, 1], rows[:, 2] = b, c, kept
                        picked.append(rows)
        total = sum(len(p) for p in picked)
        y = new_output(ctx, 0, (total, 3), np.int64, where)
        if total:
            np.concatenate(picked, out=y)
