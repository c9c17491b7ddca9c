"""numpy paths of the float32-native nn kernels (Conv, MaxPool, AveragePool, GlobalAveragePool / GlobalMaxPool,
BatchNormalization, LRN, LayerNormalization) for the other types their schemas allow (float16, float64; MaxPool also
int8 / uint8). A kernel picks its path once, at construction, from its input's static type (check_types makes it
known): the float32 path is unchanged and pays nothing. float16 computes in float32.

Each is a few whole-array numpy calls: window ops are a loop over the kernel taps (strided slices of the padded
input), Conv is im2col by taps plus one BLAS GEMM per group."""
from __future__ import annotations

import itertools

import numpy as np

from onnxep.graph.model import check_size
from onnxep.ops._base import static_dtype
from onnxep.ops.nn._helpers import acc_dtype, bad

#: dtypes of the numpy paths beside float32
FLOAT_OTHERS = ("float16", "float64")


def bind_numpy_path(kernel, info, inputs=(0,)):
    """Make `kernel._compute_numpy` the kernel's compute when one of `inputs` is declared a dtype other than float32;
    a float32 node keeps the native compute and pays no per-call dtype test."""
    dts = [static_dtype(info, i) for i in inputs]
    if any(dt is not None and dt != np.float32 for dt in dts):   # not `dt in (None, ...)`: dtype == None is float64
        kernel.compute = kernel._compute_numpy


class NumpyPath:
    """Mixin (before OpKernel) of a kernel with a native float32 `compute` and a numpy `_compute_numpy` for float16 /
    float64: bind_numpy_path over `numpy_path_inputs` at construction."""

    numpy_path_inputs = (0,)

    def __init__(self, info):
        super().__init__(info)
        bind_numpy_path(self, info, self.numpy_path_inputs)


def _taps(kernel):
    return itertools.product(*(range(k) for k in kernel))


def _window(tap, dil, out, strides):
    return tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dil, out, strides))


def _padded(x, pb, out, kernel, strides, dil, fill, dtype):
    """x in a buffer padded with `fill`, long enough for every window."""
    ext = [max(b + n, (o - 1) * s + (k - 1) * d + 1)
           for b, n, o, s, k, d in zip(pb, x.shape[2:], out, strides, kernel, dil)]
    check_size(x.shape[:2] + tuple(ext), dtype, "padded input")
    xp = np.full(x.shape[:2] + tuple(ext), fill, dtype)
    xp[(slice(None), slice(None)) + tuple(slice(b, b + n) for b, n in zip(pb, x.shape[2:]))] = x
    return xp


def conv(x, w, b, group, pb, outs, strides, dilations, y):
    """Y := Conv(X, W, B) into y (any float type; float16 via float32)."""
    acc = acc_dtype(x.dtype)
    N, C = x.shape[:2]
    M, Cg = w.shape[:2]
    k = tuple(w.shape[2:])
    K, P = int(np.prod(k)), int(np.prod(outs))
    lead = (slice(None), slice(None))
    xp = _padded(x, pb, outs, k, strides, dilations, 0, acc)
    check_size((C, K, N, P), acc, "Conv columns")
    cols = np.empty((C, K, N) + tuple(outs), acc)
    xt = xp.swapaxes(0, 1)                                        # (C, N, ...)
    for t, tap in enumerate(_taps(k)):
        cols[:, t] = xt[lead + _window(tap, dilations, outs, strides)]
    cols = cols.reshape(C * K, N * P)
    wg = w.astype(acc, copy=False).reshape(group, M // group, Cg * K)
    res = np.empty((M, N * P), acc)
    mg = M // group
    for g in range(group):
        np.matmul(wg[g], cols[g * Cg * K:(g + 1) * Cg * K], out=res[g * mg:(g + 1) * mg])
    res = res.reshape((M, N) + tuple(outs)).swapaxes(0, 1)
    if b is not None:
        res = res + b.astype(acc, copy=False).reshape((M,) + (1,) * len(outs))
    np.copyto(y, res, casting="same_kind")


def max_pool(x, pool, y, ind, storage_order):
    """MaxPool into y (and the flat index of each maximum into ind when given: the first one in window order)."""
    out, pb, _ = pool.geometry(x.shape[2:])
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    xp = _padded(x, pb, out, pool.kernel, pool.strides, pool.dilations, fill, x.dtype)
    lead = (slice(None), slice(None))
    best = np.full(y.shape, fill, x.dtype)
    if ind is not None:
        arg = np.zeros(y.shape, np.int64)
        seen = np.zeros(y.shape[2:], bool)       # a real pixel was seen in this window
    for tap in _taps(pool.kernel):
        cand = xp[lead + _window(tap, pool.dilations, out, pool.strides)]
        if ind is None:
            np.maximum(best, cand, out=best)
            continue
        coords = [np.arange(o) * s + t * d - b for o, s, t, d, b in zip(out, pool.strides, tap, pool.dilations, pb)]
        inside = np.ones(y.shape[2:], bool)
        for ax, c in enumerate(coords):
            shp = [1] * len(coords)
            shp[ax] = -1
            inside &= ((c >= 0) & (c < x.shape[2 + ax])).reshape(shp)
        better = ((cand > best) | ~seen) & inside     # strict: the first maximum wins; padding never does
        np.copyto(best, cand, where=better)
        np.copyto(arg, _flat_index(x.shape, coords, storage_order), where=better)
        seen |= inside
    y[...] = best
    if ind is not None:
        ind[...] = arg


def _flat_index(xshape, coords, storage_order):
    """Flat index into X (N, C, spatial...) of every (n, c, output position) for the per-axis input coordinates;
    storage_order 1 counts the spatial dims column-major."""
    N, C = xshape[:2]
    sp = xshape[2:]
    nd = len(sp)
    grids = np.meshgrid(*[np.clip(c, 0, s - 1) for c, s in zip(coords, sp)], indexing="ij")
    if storage_order == 1:
        lin = np.zeros(grids[0].shape, np.int64)
        mult = 1
        for ax in range(nd):
            lin += grids[ax] * mult
            mult *= sp[ax]
    else:
        lin = np.ravel_multi_index(grids, sp).astype(np.int64)
    plane = int(np.prod(sp))
    base = (np.arange(N)[:, None] * C + np.arange(C)[None, :]).astype(np.int64) * plane
    return base.reshape((N, C) + (1,) * nd) + lin


def avg_pool(x, pool, y, count_include_pad):
    """AveragePool into y: the divisor counts the taps inside the input, or inside the padded input when
    count_include_pad (never the ceil_mode overhang past the end pad)."""
    acc = acc_dtype(x.dtype)
    out, pb, pe = pool.geometry(x.shape[2:])
    xp = _padded(x, pb, out, pool.kernel, pool.strides, pool.dilations, 0, acc)
    inside = np.zeros(xp.shape[2:], acc)
    if count_include_pad:
        inside[tuple(slice(0, b + n + e) for b, n, e in zip(pb, x.shape[2:], pe))] = 1
    else:
        inside[tuple(slice(b, b + n) for b, n in zip(pb, x.shape[2:]))] = 1
    total = np.zeros(x.shape[:2] + tuple(out), acc)
    count = np.zeros(tuple(out), acc)
    lead = (slice(None), slice(None))
    for tap in _taps(pool.kernel):
        win = _window(tap, pool.dilations, out, pool.strides)
        total += xp[lead + win]
        count += inside[win]
    np.divide(total, count, out=total)
    np.copyto(y, total, casting="same_kind")


def global_pool(x, y, is_max):
    axes = tuple(range(2, x.ndim))
    if is_max:
        y[...] = np.max(x, axis=axes, keepdims=True)
    else:
        np.copyto(y, np.mean(x, axis=axes, keepdims=True, dtype=acc_dtype(x.dtype)), casting="same_kind")


def batch_norm(x, scale, b, mean, var, epsilon, y):
    c = x.shape[1]
    for nm, v in (("scale", scale), ("B", b), ("input_mean", mean), ("input_var", var)):
        if v.shape != (c,):
            raise bad("BatchNormalization", f"{nm} has shape {v.shape}, expected ({c},)")
    acc = acc_dtype(x.dtype)
    a = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + float(epsilon))
    shift = b.astype(np.float64) - mean.astype(np.float64) * a
    shp = (c,) + (1,) * (x.ndim - 2)
    res = x.astype(acc) * a.astype(acc).reshape(shp)
    res += shift.astype(acc).reshape(shp)
    np.copyto(y, res, casting="same_kind")


def lrn(x, size, alpha, beta, bias, y):
    acc = acc_dtype(x.dtype)
    c = x.shape[1]
    sq = np.square(x, dtype=acc)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    csum = np.zeros((x.shape[0], c + 1) + x.shape[2:], acc)
    np.cumsum(sq, axis=1, out=csum[:, 1:])
    idx = np.arange(c)
    upper = np.minimum(idx + hi, c - 1) + 1
    lower = np.maximum(idx - lo, 0)
    s = np.take(csum, upper, axis=1) - np.take(csum, lower, axis=1)
    s *= alpha / size
    s += bias
    np.power(s, beta, out=s)
    np.divide(x, s, out=y, casting="same_kind")


def layer_norm(x, scale, bias, axis, epsilon, y, mean_out, inv_out):
    acc = acc_dtype(x.dtype)
    axes = tuple(range(axis, x.ndim))
    xa = x.astype(acc, copy=False)
    mean = np.mean(xa, axis=axes, keepdims=True)
    d = xa - mean
    var = np.mean(np.square(d), axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + epsilon)
    res = d * inv
    res *= scale
    if bias is not None:
        res += bias
    np.copyto(y, res, casting="same_kind")
    if mean_out is not None:
        np.copyto(mean_out, mean, casting="same_kind")
    if inv_out is not None:
        np.copyto(inv_out, inv, casting="same_kind")
