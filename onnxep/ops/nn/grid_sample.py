"""GridSample (opsets 16, 20, 22): Y[n, c, p] := X[n, c] sampled at grid[n, p] (normalized coordinates in [-1, 1],
the last spatial axis first), modes nearest / (bi)linear / (bi)cubic (Keys, alpha -0.75), padding zeros / border /
reflection, align_corners. Opset 16: 4-D input; from opset 20 any number of spatial axes.

As onnxruntime: the coordinate is unnormalized (rounded half to even for nearest); in nearest and linear modes it is
moved back inside [0, d-1] (border) or reflected (reflection) when it lies outside the sampling range ([-0.5, d-0.5],
or [0, d-1] with align_corners); then each tap of the 1 / 2^k / 4^k neighbourhood reads its pixel with the padding
mode (zeros: 0 outside; border: clamped index; reflection: reflected index). Cubic mode pads the taps only, as
onnxruntime and PyTorch do (onnx.reference also clamps / reflects the cubic coordinate first: with border padding
its results differ from onnxruntime's for points outside the image).

Vectorized: per axis, the tap indices / validity / coefficients of every output point are computed at once; then
one gather (take_along_axis over the flattened spatial axes, all batches and channels) and one multiply-add per tap
of the neighbourhood (1, 2^k or 4^k taps). Floats accumulate in float32 (float16, bfloat16) or their own type;
nearest mode also gathers integer, bool and complex tensors (linear / cubic: floats and complex)."""
from __future__ import annotations

import itertools

import numpy as np

from onnxep.graph.model import check_size
from onnxep.ops.math._numpy import NumpyKernel
from onnxep.ops.nn._helpers import bad

_OP = "GridSample"
_CUBIC_A = -0.75
_FLOAT_T = ("float16", "float32", "float64")
_T1 = ("uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "bool", "complex64",
       "complex128") + _FLOAT_T
_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic", "cubic": "cubic"}
_PADDINGS = ("zeros", "border", "reflection")


def _reflect(c, lo, hi):
    """c reflected by the near border until it lies in [lo, hi] (onnxruntime's GsReflect)."""
    rng = hi - lo
    below, above = c < lo, c > hi
    if not (below.any() or above.any()):
        return c
    if rng <= 0:
        return np.where(below | above, lo, c).astype(c.dtype, copy=False)
    dx = np.where(below, lo - c, c - hi)
    n = np.floor(dx / rng)
    r = dx - n * rng
    even = (n % 2) == 0
    from_lo, from_hi = lo + r, hi - r
    return np.where(below, np.where(even, from_lo, from_hi), np.where(above, np.where(even, from_hi, from_lo), c))


def _cubic_coeffs(t):
    """The four Keys weights of the taps -1, 0, 1, 2 at fraction t in [0, 1)."""
    a = _CUBIC_A
    t1, u, u1 = t + 1, 1 - t, 2 - t
    return (((a * t1 - 5 * a) * t1 + 8 * a) * t1 - 4 * a,
            ((a + 2) * t - (a + 3)) * t * t + 1,
            ((a + 2) * u - (a + 3)) * u * u + 1,
            ((a * u1 - 5 * a) * u1 + 8 * a) * u1 - 4 * a)


def _axis_taps(c, d, lo, hi, mode, padding):
    """For one spatial axis of size d and the unnormalized coordinates c (N, P): a list of (index, valid, coeff) per
    tap: index (N, P) intp within [0, d), valid (N, P) bool or None (all valid), coeff (N, P) or None (1)."""
    if mode == "nearest":
        base, offsets, coeffs = c, (0,), (None,)
    else:
        base = np.floor(c)
        t = c - base
        if mode == "linear":
            offsets, coeffs = (0, 1), (1 - t, t)
        else:
            offsets, coeffs = (-1, 0, 1, 2), _cubic_coeffs(t)
    base = base.astype(np.int64)
    taps = []
    for off, w in zip(offsets, coeffs):
        i = base + off if off else base
        valid = None
        if padding == "zeros":
            valid = (i >= 0) & (i < d)
            if valid.all():
                valid = None
            i = np.clip(i, 0, d - 1)
        elif padding == "border":
            i = np.clip(i, 0, d - 1)
        else:
            i = np.clip(_reflect(i.astype(c.dtype), lo, hi).astype(np.int64), 0, d - 1)
        taps.append((i, valid, w))
    return taps


def grid_sample(x, grid, mode, padding, align_corners, y):
    """Fill y (N, C, *grid.shape[1:-1]) with X sampled at grid (see the module docstring)."""
    n, ch = x.shape[:2]
    dims = x.shape[2:]
    k = len(dims)
    p = int(np.prod(grid.shape[1:-1], dtype=np.int64))
    if y.size == 0:
        return
    cdt = np.float64 if grid.dtype == np.float64 else np.float32
    g = grid.reshape(n, p, k).astype(cdt, copy=False)
    strides = [int(np.prod(dims[i + 1:], dtype=np.int64)) for i in range(k)]
    axes = []
    for i, d in enumerate(dims):
        gi = g[:, :, k - 1 - i]
        if align_corners:
            c = (gi + 1) / 2 * (d - 1)
            lo, hi = 0.0, d - 1.0
        else:
            c = ((gi + 1) * d - 1) / 2
            lo, hi = -0.5, d - 0.5
        if mode == "nearest":
            c = np.rint(c)
        if padding != "zeros" and mode != "cubic":
            out = (c < lo) | (c > hi)
            if out.any():
                c = np.where(out, np.clip(c, 0, d - 1) if padding == "border" else _reflect(c, lo, hi), c)
        axes.append(_axis_taps(c.astype(cdt, copy=False), d, lo, hi, mode, padding))
    xf = x.reshape(n, ch, -1)
    if mode == "nearest" or x.dtype.kind == "c":
        acc_t = x.dtype
    else:
        acc_t = np.float64 if x.dtype == np.float64 else np.float32
    yv = y.reshape(n, ch, p)
    acc = None if mode == "nearest" else np.zeros((n, ch, p), acc_t)
    zero = np.zeros((), x.dtype)
    for combo in itertools.product(*axes):
        flat = combo[0][0] * strides[0] if strides[0] != 1 else combo[0][0]
        valid, w = combo[0][1], combo[0][2]
        for (i, v, wi), s in zip(combo[1:], strides[1:]):
            flat = flat + (i * s if s != 1 else i)
            if v is not None:
                valid = v if valid is None else valid & v
            if wi is not None:
                w = wi if w is None else w * wi
        vals = np.take_along_axis(xf, flat[:, None, :], axis=2)          # (N, C, P)
        if valid is not None:
            vals = np.where(valid[:, None, :], vals, zero)
        if acc is None:
            yv[...] = vals
        else:
            acc += vals * w[:, None, :].astype(acc_t, copy=False)
    if acc is not None:
        np.copyto(yv, acc, casting="unsafe")


class _GridSample(NumpyKernel):
    domain, op_type = "", _OP
    type_constraints = {"T1": _T1, "T2": _FLOAT_T}
    align_corners = 0
    padding_mode = "zeros"
    max_rank = None          # opset 16: 4-D only
    modes = ("bilinear", "nearest", "bicubic")

    def __init__(self, info):
        super().__init__(info)
        if self.mode not in self.modes:
            raise bad(f"{_OP} node {self.name!r}", f"mode must be one of {', '.join(self.modes)} at opset "
                                                   f"{self.since}, got {self.mode!r}")
        if self.padding_mode not in _PADDINGS:
            raise bad(f"{_OP} node {self.name!r}", f"padding_mode must be one of {', '.join(_PADDINGS)}, got "
                                                   f"{self.padding_mode!r}")
        self._mode = _MODES[self.mode]

    @classmethod
    def supports(cls, op):
        mode = _MODES.get(op.node.attrs.get("mode") or ("bilinear" if cls.since < 20 else "linear"))
        vt = op.input_types[0] if op.input_types else None
        if mode in ("linear", "cubic") and vt is not None and vt.type_str not in (
                "tensor(float16)", "tensor(float)", "tensor(double)", "tensor(bfloat16)",
                "tensor(complex64)", "tensor(complex128)"):
            return False     # integer / bool interpolation: not defined well enough to claim
        return True

    def compute(self, ctx):
        x, grid = ctx.input(0), ctx.input(1)
        if x.ndim < 3 or (self.max_rank is not None and x.ndim != self.max_rank):
            want = f"{self.max_rank}-D" if self.max_rank else "rank >= 3"
            raise bad(_OP, f"X must be {want} (N, C, spatial...), got shape {x.shape}")
        k = x.ndim - 2
        if grid.ndim != k + 2 or grid.shape[0] != x.shape[0] or grid.shape[-1] != k:
            raise bad(_OP, f"grid has shape {grid.shape}, expected ({x.shape[0]}, <{k} output dims>, {k}) for X "
                           f"{x.shape}")
        if self._mode != "nearest" and x.dtype.kind not in "fc":
            raise bad(_OP, f"{self.mode} mode needs a float or complex X, got {x.dtype}")
        shape = x.shape[:2] + grid.shape[1:-1]
        check_size(shape, x.dtype, f"{_OP} output")
        # the per-tap (N, C, P) gathers and the accumulator
        check_size(shape, np.complex128 if x.dtype.kind == "c" else np.float64, f"{_OP} work arrays")
        y = ctx.output(0, shape, x.dtype)
        with np.errstate(invalid="ignore", over="ignore"):
            grid_sample(x, grid, self._mode, self.padding_mode, int(self.align_corners), y)


class GridSample_16(_GridSample):
    since = 16
    max_rank = 4


class GridSample_20(_GridSample):
    since = 20
    modes = ("linear", "nearest", "cubic")


class GridSample_22(GridSample_20):
    since = 22
    type_constraints = {"T1": _T1 + ("bfloat16",), "T2": _FLOAT_T + ("bfloat16",)}
