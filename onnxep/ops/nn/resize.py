"""Resize (opsets 10, 11, 13, 18, 19): nearest (every nearest_mode), linear and cubic (cubic_coeff_a,
exclude_outside, antialias), every coordinate_transformation_mode, scales or sizes, roi, axes, keep_aspect_ratio_policy.

Separable: per resized axis, each output index gets its source taps (index array) and weights, computed for the whole
axis at once; nearest gathers every axis in one fancy-indexing call (exact in every dtype, strings too), linear and
cubic apply one axis after the other as a loop over the taps (2 or 4; more with antialias when downsampling) of
np.take and a multiply-add. float16 / float32 interpolate in float32, the other types in float64; integer results are
rounded half to even and saturated, as onnx.reference does. Native paths (float32, also the compiled run loop's steps):
an integer-factor nearest upsampling is one strided copy from the input broadcast over the repeat axes; a 2-tap
linear resize of the last two axes runs _kernels.resize2_f32 on tables kept per input signature.

Source coordinates follow onnx.reference (the oracle of the conformance cases): the "output length" that
align_corners, pytorch_half_pixel and half_pixel_symmetric read is scale * input length, as a float. Opset 10 (and
Upsample) has no coordinate attribute: asymmetric, and nearest rounds like onnxruntime (floor when upsampling, ceil
when downsampling)."""
import math

import numpy as np

from onnxep import _kernels
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops._data import DATA_TYPES
from onnxep.ops.nn._helpers import bad, inputs_typed

_OP = "Resize"
_T1 = DATA_TYPES + ("string",)
_COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                "tf_half_pixel_for_nn", "tf_crop_and_resize")
_LOOP_TAPS = 8        # up to this many taps per output: one np.take per tap; more: one gather of all
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple")


def _attr_str(v, default):
    if v is None:
        return default
    return str(v)


def _source_coords(ctm, n_out, scale, n_in, roi):
    """(x_original float64 (n_out,), extrapolated mask or None) of one axis."""
    y = np.arange(n_out, dtype=np.float64)
    out_len = scale * n_in
    if ctm == "align_corners":
        x = np.zeros(n_out) if out_len == 1 else y * ((n_in - 1) / (out_len - 1))
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_half_pixel_for_nn":
        x = (y + 0.5) / scale
    elif ctm == "pytorch_half_pixel":
        x = np.full(n_out, -0.5) if out_len == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel_symmetric":
        offset = (n_in / 2) * (1 - n_out / out_len)
        x = offset + (y + 0.5) / scale - 0.5
    else:   # tf_crop_and_resize
        r0, r1 = roi
        if out_len == 1:
            x = np.full(n_out, (r1 - r0) * (n_in - 1) / 2)
        else:
            x = y * ((r1 - r0) * (n_in - 1) / (out_len - 1))
        x = x + r0 * (n_in - 1)
        return x, (x < 0) | (x > n_in - 1)
    return x, None


def _nearest_index(x, nearest_mode, scale, n_in):
    """Index of the nearest input pixel of each source coordinate, clamped to the axis."""
    fl = np.floor(x)
    frac = x - fl
    if nearest_mode == "round_prefer_floor":
        idx = np.where(frac <= 0.5, fl, fl + 1)
    elif nearest_mode == "round_prefer_ceil":
        idx = np.where(frac < 0.5, fl, fl + 1)
    elif nearest_mode == "floor":
        idx = fl
    elif nearest_mode == "ceil":
        idx = np.ceil(x)
    else:  # simple (opset 10 / Upsample, onnxruntime): ceil when downsampling, floor (truncation) when upsampling
        idx = np.ceil(x) if scale < 1 else np.trunc(x)
    return np.clip(idx, 0, n_in - 1).astype(np.intp)


def _repeat_factor(idx, n_in):
    """r when the nearest indices repeat every input pixel r times in order (idx == arange(r * n_in) // r), else 0."""
    n = len(idx)
    if n_in == 0 or n % n_in:
        return 0
    r = n // n_in
    return r if np.array_equal(idx, np.arange(n) // r) else 0


def _repeat_views(x, reps, out):
    """(source, destination) views of one integer-factor nearest upsampling (axis a repeated reps[a] times): out
    split as (..., n, r, ...) and x broadcast over the r axes (stride 0), so one copy fills every phase."""
    split, src_shape = [], []
    for a, n in enumerate(x.shape):
        split += [n, reps[a]] if a in reps else [n]
        src_shape += [n, 1] if a in reps else [n]
    dst = out.reshape(split)
    return np.broadcast_to(x.reshape(src_shape), dst.shape), dst


def _repeat_into(x, reps, out):
    """out := x with axis a repeated reps[a] times, in one strided copy (numpy's inner loop runs over the last axis's
    phases)."""
    src, dst = _repeat_views(x, reps, out)
    np.copyto(dst, src)


def _cubic(t, a):
    """The cubic convolution kernel of |t| (Keys, coefficient a)."""
    t = np.abs(t)
    t2, t3 = t * t, t * t * t
    near = (a + 2) * t3 - (a + 3) * t2 + 1
    far = a * t3 - 5 * a * t2 + 8 * a * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def _taps(x, n_in, mode, scale, cubic_a, antialias, exclude_outside):
    """(indices (n_out, n) clamped to the axis, weights (n_out, n)) of linear / cubic interpolation, as
    onnx.reference picks its n neighbours and coefficients."""
    x_int = np.floor(x)
    ratio = np.where(x == x_int, 1.0, x - x_int)
    s = min(scale, 1.0)
    if not antialias:
        if mode == "linear":
            w = np.stack([1 - ratio, ratio], axis=1)
        else:
            w = _cubic(np.array([-1.0, 0.0, 1.0, 2.0])[None, :] - ratio[:, None], cubic_a)
    else:   # the kernel stretched by 1 / scale when downsampling, normalized
        support = 1 if mode == "linear" else 2
        start = int(math.floor(-support / s) + 1)
        t = (np.arange(start, 2 - start, dtype=np.float64)[None, :] - ratio[:, None]) * s
        w = np.clip(1 - np.abs(t), 0, 1) if mode == "linear" else _cubic(t, cubic_a)
        w = w / w.sum(axis=1, keepdims=True)
    n = w.shape[1]
    # onnx.reference's neighbour choice: the n nearest indices, ties to the smaller ones
    pad = -(-n // 2)
    xp = x + pad
    p = np.floor(xp)
    frac = xp - p
    if n % 2 == 0:
        off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        base = -((n - 1) // 2)
        off = np.where(frac <= 0.5, base, base + 1)
    idx = (p + off).astype(np.int64)[:, None] + np.arange(n)[None, :] - pad
    if exclude_outside:
        w = np.where((idx < 0) | (idx >= n_in), 0.0, w)
        tot = w.sum(axis=1, keepdims=True)
        w = w / np.where(tot == 0, 1.0, tot)
    return np.clip(idx, 0, n_in - 1).astype(np.intp), w


def resize(x, out_shape, scales, axes, mode, ctm, nearest_mode, cubic_a, exclude_outside, extrapolation, antialias,
           roi, out):
    """x resized to out_shape, written to `out` (None: a new array, for strings) and returned; scales: per axis
    (all axes); axes: the axes that change; roi: per axis (start, end) or None."""
    if mode == "nearest":
        cur = x
        extrap = None
        plan = []
        for ax in axes:
            xs, ext = _source_coords(ctm, out_shape[ax], scales[ax], x.shape[ax], roi[ax] if roi else None)
            idx = _nearest_index(xs, nearest_mode, scales[ax], x.shape[ax])
            if ext is not None and ext.any():
                shape = [1] * x.ndim
                shape[ax] = -1
                m = ext.reshape(shape)
                extrap = m if extrap is None else (extrap | m)
            plan.append((ax, idx))
        reps = [_repeat_factor(idx, x.shape[ax]) for ax, idx in plan]
        if out is not None and extrap is None and all(reps) and math.prod(reps) <= 64:   # one copy per phase
            _repeat_into(x, dict(zip(axes, reps)), out)
            return out
        for i, (ax, idx) in enumerate(plan):
            if i == len(axes) - 1 and out is not None:
                np.take(cur, idx, axis=ax, out=out, mode="clip")
                cur = out
            else:
                shape = list(cur.shape)
                shape[ax] = out_shape[ax]
                check_size(shape, x.dtype, f"{_OP} intermediate")
                cur = np.take(cur, idx, axis=ax, mode="clip")
        if extrap is not None:
            np.copyto(cur, np.asarray(extrapolation).astype(cur.dtype), where=np.broadcast_to(extrap, cur.shape))
        return cur
    work = np.float32 if x.dtype in (np.float16, np.float32) else np.float64
    cur = x.astype(work, copy=False)
    extrap = None
    for ax in axes:
        n_in = cur.shape[ax]
        xs, ext = _source_coords(ctm, out_shape[ax], scales[ax], n_in, roi[ax] if roi else None)
        idx, w = _taps(xs, n_in, mode, scales[ax], cubic_a, antialias, exclude_outside)
        shape = list(cur.shape)
        shape[ax] = out_shape[ax]
        check_size(shape, work, f"{_OP} intermediate")
        wshape = [1] * cur.ndim
        wshape[ax] = -1
        w = w.astype(work)
        n_taps = idx.shape[1]
        if n_taps <= _LOOP_TAPS:   # the taps (2 linear, 4 cubic, a few more antialiasing a mild downsample)
            nxt = np.empty(shape, work)
            tmp = np.empty(shape, work)
            np.take(cur, idx[:, 0], axis=ax, out=nxt, mode="clip")
            nxt *= w[:, 0].reshape(wshape)
            for j in range(1, n_taps):
                np.take(cur, idx[:, j], axis=ax, out=tmp, mode="clip")
                tmp *= w[:, j].reshape(wshape)
                nxt += tmp
        else:   # antialiasing a strong downsample: ~2 / scale taps, gathered at once (about 2x the input's size)
            gshape = shape[:ax] + [shape[ax], n_taps] + shape[ax + 1:]
            check_size(gshape, work, f"{_OP} antialias taps")
            g = np.take(cur, idx.reshape(-1), axis=ax, mode="clip").reshape(gshape)
            g *= w.reshape([1] * ax + [shape[ax], n_taps] + [1] * (cur.ndim - ax - 1))
            nxt = g.sum(axis=ax + 1)
        if ext is not None and ext.any():
            m = ext.reshape(wshape)
            extrap = m if extrap is None else (extrap | m)
        cur = nxt
    if extrap is not None:
        np.copyto(cur, work(extrapolation), where=np.broadcast_to(extrap, cur.shape))
    if out.dtype.kind in "iu":
        info = np.iinfo(out.dtype)
        np.rint(cur, out=cur)
        np.clip(cur, info.min, info.max, out=cur)
        np.copyto(out, cur, casting="unsafe")
    else:
        np.copyto(out, cur, casting="same_kind")
    return out


class _ResizeBase(OpKernel):
    domain, op_type = "", "Resize"
    type_constraints = {"T1": _T1, "T": _T1}
    mode = "nearest"
    coordinate_transformation_mode = "half_pixel"
    nearest_mode = "round_prefer_floor"
    cubic_coeff_a = -0.75
    exclude_outside = 0
    extrapolation_value = 0.0
    antialias = 0
    axes = None
    keep_aspect_ratio_policy = "stretch"
    _modes = ("nearest", "linear", "cubic")

    @classmethod
    def check_types(cls, op):
        # X alone (Y has its type): onnx's shape inference gives up on some valid nodes (sizes from a graph input)
        # and on the invalid ones compute must report
        return inputs_typed(op, _T1, (0,))

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        mode = _attr_str(a.get("mode"), "nearest")
        if mode not in cls._modes:
            return False
        if _attr_str(a.get("coordinate_transformation_mode"), "half_pixel") not in _COORD_MODES:
            return False
        if _attr_str(a.get("nearest_mode"), "round_prefer_floor") not in _NEAREST_MODES[:4]:
            return False
        if _attr_str(a.get("keep_aspect_ratio_policy"), "stretch") not in ("stretch", "not_larger", "not_smaller"):
            return False
        vt = op.input_types[0] if op.input_types else None
        if mode != "nearest" and vt is not None and vt.type_str in ("tensor(string)", "tensor(bool)"):
            return False
        return True

    # --------------------------------------------------------------------------------------------- plan
    def _inputs(self, ctx):
        """(x, roi, scales, sizes) of this opset's input layout."""
        return ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)

    def _ctm(self):
        return _attr_str(self.coordinate_transformation_mode, "half_pixel")

    def _nearest_mode(self):
        return _attr_str(self.nearest_mode, "round_prefer_floor")

    def compute(self, ctx):
        x, roi, scales, sizes = self._inputs(ctx)
        r = x.ndim
        axes = list(range(r))
        if self.axes is not None and len(self.axes):
            axes = []
            for a in self.axes:
                a = int(a)
                if not -r <= a < r:
                    raise bad(_OP, f"axis {a} out of range for X of rank {r}")
                axes.append(a % r)
            if len(set(axes)) != len(axes):
                raise bad(_OP, f"repeated axis in axes {list(self.axes)}")
        na = len(axes)
        has_scales = scales is not None and scales.size > 0
        has_sizes = sizes is not None and sizes.size > 0
        if has_scales == has_sizes:
            raise bad(_OP, "exactly one of scales and sizes must be given (non-empty)")
        full_scales = [1.0] * r
        out_shape = list(x.shape)
        if has_scales:
            if scales.shape != (na,):
                raise bad(_OP, f"scales has shape {scales.shape}, expected ({na},) for X {x.shape}")
            sv = [float(s) for s in scales.astype(np.float32)]
            if not all(s > 0 and math.isfinite(s) for s in sv):
                raise bad(_OP, f"scales must be positive and finite, got {sv}")
            for a, s in zip(axes, sv):
                full_scales[a] = s
                d = s * x.shape[a]
                if d >= 2.0 ** 62:
                    raise bad(_OP, f"scale {s} gives an output dimension of {d:.3g} on axis {a}")
                out_shape[a] = int(d)
        else:
            if sizes.shape != (na,):
                raise bad(_OP, f"sizes has shape {sizes.shape}, expected ({na},) for X {x.shape}")
            sz = [int(v) for v in sizes]
            if min(sz) < 0:
                raise bad(_OP, f"sizes must be >= 0, got {sz}")
            policy = _attr_str(self.keep_aspect_ratio_policy, "stretch")
            if any(x.shape[a] == 0 for a in axes):
                raise bad(_OP, f"cannot resize an empty axis to sizes {sz} (X {x.shape})")
            if policy == "stretch":
                for a, n in zip(axes, sz):
                    out_shape[a] = n
                    full_scales[a] = n / x.shape[a]
            else:
                ratios = [n / x.shape[a] for a, n in zip(axes, sz)]
                s = min(ratios) if policy == "not_larger" else max(ratios)
                for a in axes:
                    full_scales[a] = s
                    out_shape[a] = int(s * x.shape[a] + 0.5)
        check_size(out_shape, x.dtype, f"{_OP} output")
        ctm = self._ctm()
        roi_pairs = None
        if ctm == "tf_crop_and_resize":
            if roi is None or roi.size == 0:
                raise bad(_OP, "coordinate_transformation_mode tf_crop_and_resize needs the roi input")
            rv = [float(v) for v in roi.reshape(-1)]
            if len(rv) != 2 * na:
                raise bad(_OP, f"roi has {len(rv)} values, expected {2 * na}")
            roi_pairs = [(0.0, 1.0)] * r
            for i, a in enumerate(axes):
                roi_pairs[a] = (rv[i], rv[na + i])
        # axes that change (onnx.reference skips an axis of scale 1, same length and a full roi)
        moving = [a for a in axes if not (math.isclose(full_scales[a], 1.0) and out_shape[a] == x.shape[a]
                                          and (roi_pairs is None or (math.isclose(roi_pairs[a][0], 0.0)
                                                                     and math.isclose(roi_pairs[a][1], 1.0))))]
        if x.dtype == object:    # strings: not arena memory
            y = None
            if not moving or math.prod(out_shape) == 0:
                ctx.set_output(0, np.empty(out_shape, object) if math.prod(out_shape) == 0 else x.copy())
                return
        else:
            y = ctx.output(0, out_shape, x.dtype)
            if y.size == 0:
                return
            if not moving:
                self._copy = _signature(x, roi, scales, sizes)
                np.copyto(y, x)
                return
        mode = _attr_str(self.mode, "nearest")
        if mode in ("nearest", "linear") and y is not None and roi_pairs is None and x.dtype == np.float32:
            key = _signature(x, roi, scales, sizes)
            tables = self._linear[1] if self._linear is not None and self._linear[0] == key else _tables_2d(
                mode, x.shape, out_shape, full_scales, moving, ctm, self._nearest_mode(), float(self.cubic_coeff_a),
                bool(self.antialias), bool(self.exclude_outside))
            if tables is not None:
                self._linear = (key, tables)
                xc = np.ascontiguousarray(x)
                _kernels.resize2_f32(xc.reshape(-1), y.reshape(-1), *_planes(x.shape, out_shape), *tables,
                                     ctx.num_threads)
                return
        if mode == "nearest" and y is not None and roi_pairs is None:
            reps = _nearest_reps(x.shape, out_shape, full_scales, moving, ctm, self._nearest_mode())
            if reps is not None:
                self._repeat = (_signature(x, roi, scales, sizes), reps)
                _repeat_into(x, reps, y)
                return
        res = resize(x, out_shape, full_scales, moving, mode, ctm, self._nearest_mode(), float(self.cubic_coeff_a),
                     bool(self.exclude_outside), float(self.extrapolation_value), bool(self.antialias), roi_pairs, y)
        if y is None:
            ctx.set_output(0, res)


    _repeat = None           # (input signature, reps) of the last integer-factor nearest upsampling compute ran
    _linear = None           # (input signature, 2-tap tables) of the last native 2-D resize compute ran
    _copy = None             # input signature of the last resize compute found to change nothing (a copy)

    c_value_inputs = (1, 2, 3)   # roi / scales / sizes: the C step bakes in the factors they give

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry for what compute found for these inputs: the native 2-D resize (RL resize2),
        an integer-factor nearest upsampling (one RL_STRIDED copy from x broadcast over the repeat axes), or a
        resize that changes nothing (an RL_STRIDED copy)."""
        from onnxep.ops._c_steps import strided
        if not ins or ins[0] is None:
            return None
        x, y = ins[0], outs[0]
        if self.since <= 10:       # Resize-10 and Upsample: (X, scales)
            roi, scales, sizes = None, ins[1] if len(ins) > 1 else None, None
        else:
            roi, scales, sizes = (ins[i] if len(ins) > i else None for i in (1, 2, 3))
        key = _signature(x, roi, scales, sizes)
        if not x.flags.c_contiguous or x.dtype == object:
            return None
        if self._linear is not None and key == self._linear[0]:
            if np.may_share_memory(x, y):
                return None
            ih, wh, iw, ww = self._linear[1]
            return "resize2", [0, ih, wh, iw, ww, ~0], list(_planes(x.shape, y.shape)), []
        if self._copy is not None and key == self._copy:
            return strided(x, x, y)     # (e.g. a decoder head's upsampling of its finest stage to its own size)
        if self._repeat is None or key != self._repeat[0]:
            return None
        src, dst = _repeat_views(x, self._repeat[1], y)
        return strided(x, src, dst)


def _signature(x, roi, scales, sizes):
    """What an upsampling plan depends on: X's shape and dtype, the values of roi, scales and sizes."""
    return (x.shape, x.dtype.str) + tuple(None if v is None else (v.dtype.str, v.tobytes()) for v in (roi, scales, sizes))


def _planes(in_shape, out_shape):
    """(planes, IH, IW, OH, OW) of a resize of the last two axes."""
    return math.prod(in_shape[:-2]), in_shape[-2], in_shape[-1], out_shape[-2], out_shape[-1]


def _tables_2d(mode, in_shape, out_shape, scales, axes, ctm, nearest_mode, cubic_a, antialias, exclude_outside):
    """(ih, wh, iw, ww): the 2-tap tables of _kernels.resize2_f32 for a linear or nearest (wh, ww None: the first
    index only) resize moving only the last two axes (a still axis gets the identity), as _taps / _nearest_index
    compute them; None when it does not apply (another axis moves, more than 2 taps, extrapolation, an empty axis,
    rows beyond the kernel's scratch)."""
    r = len(in_shape)
    if r < 2 or any(a < r - 2 for a in axes) or 0 in in_shape[-2:] \
            or in_shape[-1] > _kernels.RESIZE2_IW_LIMIT:
        return None
    out = []
    for ax in (r - 2, r - 1):
        n_in, n_out = in_shape[ax], out_shape[ax]
        if ax in axes:
            xs, ext = _source_coords(ctm, n_out, scales[ax], n_in, None)
            if ext is not None and ext.any():
                return None
            if mode == "nearest":
                idx = np.repeat(_nearest_index(xs, nearest_mode, scales[ax], n_in), 2).reshape(-1, 2)
                w = None
            else:
                idx, w = _taps(xs, n_in, "linear", scales[ax], cubic_a, antialias, exclude_outside)
                if idx.shape[1] != 2:
                    return None
        else:
            idx = np.repeat(np.arange(n_in), 2).reshape(n_in, 2)
            w = np.tile([1.0, 0.0], (n_in, 1))
        out += [np.ascontiguousarray(idx.reshape(-1), np.int64),
                None if mode == "nearest" else np.ascontiguousarray(w.reshape(-1), np.float32)]
    return tuple(out)


def _nearest_reps(in_shape, out_shape, scales, axes, ctm, nearest_mode):
    """{axis: r} when nearest resizing repeats every input pixel r times in order along each moving axis (no
    extrapolation, at most 64 phases), else None."""
    reps = {}
    for ax in axes:
        xs, ext = _source_coords(ctm, out_shape[ax], scales[ax], in_shape[ax], None)
        if ext is not None and ext.any():
            return None
        r = _repeat_factor(_nearest_index(xs, nearest_mode, scales[ax], in_shape[ax]), in_shape[ax])
        if not r:
            return None
        reps[ax] = r
    return reps if math.prod(reps.values()) <= 64 else None


class Resize_10(_ResizeBase):
    """Resize-10: Resize(X, scales), nearest or linear, asymmetric coordinates."""

    since = 10
    type_constraints = {"T": _T1}
    _modes = ("nearest", "linear")

    def _inputs(self, ctx):
        return ctx.input(0), None, ctx.input(1), None

    def _ctm(self):
        return "asymmetric"

    def _nearest_mode(self):
        return "simple"


class Resize_11(_ResizeBase):
    since = 11
    type_constraints = {"T1": _T1}


class Resize_18(_ResizeBase):
    """Resize-18 and -19 (19 adds half_pixel_symmetric): antialias, axes, keep_aspect_ratio_policy."""

    since = 18
    type_constraints = {"T1": _T1}
