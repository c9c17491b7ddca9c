"""Window-pooling geometry shared by MaxPool, AveragePool and com.onnxep NhwcPool (not an op module: not listed in
the registry).

Semantics (the ONNX spec, as onnxruntime implements it): window o of a spatial dim covers taps o*s - pb + k*d,
k in [0, kernel). Explicit pads: out = floor((in + pb + pe - sw) / s) + 1 with sw = (kernel - 1) * d + 1, or ceil(...)
under ceil_mode, minus one when that last window would start past the input plus left padding. VALID: no padding,
out = floor((in - sw) / s) + 1. SAME_UPPER / SAME_LOWER: out = ceil(in / s), total pad (out - 1) * s + kernel - in,
the odd pixel at the end (UPPER) or the beginning (LOWER).
"""
from __future__ import annotations

import numpy as np

from onnxep.ops._base import static_shape


class PoolAttrs:
    """The pooling attributes of one node, normalised (defaults filled, lists of ints)."""

    def __init__(self, kernel_shape, strides=None, pads=None, dilations=None, auto_pad="NOTSET", ceil_mode=0):
        r = len(kernel_shape)
        self.rank = r
        self.kernel = [int(k) for k in kernel_shape]
        self.strides = [int(s) for s in strides] if strides else [1] * r
        self.pads = [int(p) for p in pads] if pads else [0] * (2 * r)
        self.dilations = [int(d) for d in dilations] if dilations else [1] * r
        self.auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else (auto_pad or "NOTSET")
        self.ceil_mode = int(ceil_mode or 0)

    def valid(self) -> bool:
        """Attributes this implementation handles exactly (anything else is left to another backend)."""
        r = self.rank
        if r not in (1, 2, 3) or len(self.strides) != r or len(self.pads) != 2 * r or len(self.dilations) != r:
            return False
        if min(self.kernel) < 1 or min(self.strides) < 1 or min(self.dilations) < 1 or min(self.pads) < 0:
            return False
        if any(self.pads[i] >= self.kernel[i] or self.pads[r + i] >= self.kernel[i] for i in range(r)):
            return False  # onnxruntime refuses pads >= kernel; onnx.reference pads them: no single answer
        if self.auto_pad not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
            return False
        if self.auto_pad != "NOTSET":
            # onnx.reference refuses ceil_mode with auto_pad and ignores dilations in auto_pad's shape rule while
            # onnxruntime applies them: no single answer to match, so these go to the reference backend.
            if self.ceil_mode or any(d != 1 for d in self.dilations):
                return False
        return True

    def geometry(self, in_spatial):
        """(out_spatial, pads_begin, pads_end), or raise ValueError when the output would be empty or some window
        would cover no input pixel."""
        r = self.rank
        if len(in_spatial) != r:
            raise ValueError(f"input has {len(in_spatial)} spatial dims, kernel_shape has {r}")
        out, pb, pe = [], [], []
        for i in range(r):
            n, k, s, d = int(in_spatial[i]), self.kernel[i], self.strides[i], self.dilations[i]
            sw = (k - 1) * d + 1
            if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
                o = -(-n // s)
                total = (o - 1) * s + k - n
                if total < 0:
                    raise ValueError(f"auto_pad={self.auto_pad} with a negative total pad on spatial dim {i}")
                b = total // 2 if self.auto_pad == "SAME_UPPER" else total - total // 2
                e = total - b
            elif self.auto_pad == "VALID":
                b = e = 0
                o = (n - sw) // s + 1 if n >= sw else 0
            else:
                b, e = self.pads[i], self.pads[r + i]
                span = n + b + e - sw
                if self.ceil_mode:
                    # ceil(span / s) + 1: one window even when the kernel overhangs the padded input by less than a
                    # stride (a kernel larger than the input, as onnxruntime and torch count it)
                    o = -(-span // s) + 1
                    if o > 0 and (o - 1) * s >= n + b:
                        o -= 1
                else:
                    o = span // s + 1 if span >= 0 else 0
            if o < 1:
                raise ValueError(f"pooling output would be empty on spatial dim {i} (input {n}, kernel {k}, "
                                 f"stride {s}, dilation {d}, pads {b}/{e})")
            for j in range(o):
                # window j's taps are st + t * d, t in [0, k): one lands in [0, n) iff the first tap at or past 0
                # comes no later than the last one before n (arithmetic, not a walk over the taps)
                st = j * s - b
                if max(0, -(st // d)) > min(k - 1, (n - 1 - st) // d):
                    raise ValueError(f"pooling window {j} of spatial dim {i} covers no input pixel (input {n}, "
                                     f"kernel {k}, stride {s}, dilation {d}, pads {b}/{e})")
            out.append(o)
            pb.append(b)
            pe.append(e)
        return out, pb, pe

    def statically_ok(self, in_shape) -> bool:
        """Every window is non-empty for this input shape (known, or provably for any size)."""
        if in_shape is None or len(in_shape) != self.rank + 2:
            return False
        spatial = in_shape[2:]
        if all(isinstance(d, int) for d in spatial):
            try:
                self.geometry(spatial)
            except ValueError:
                return False
            return True
        # Unknown spatial size: windows are provably non-empty when taps are contiguous and pads < kernel (the first
        # tap of a window >= -pb > -kernel; the last window starts inside the input) and SAME's pad cannot be negative.
        if any(d != 1 for d in self.dilations):
            return False
        if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            return all(s == 1 for s in self.strides)
        if self.auto_pad == "NOTSET":
            r = self.rank
            return all(self.pads[i] < self.kernel[i] and self.pads[r + i] < self.kernel[i] for i in range(r))
        return True

    def geom_vector(self, in_spatial):
        """(out_spatial, int64 vector of 21) for the native kernels: spatial dims left-padded to 3 with size 1."""
        out, pb, pe = self.geometry(in_spatial)
        pad = 3 - self.rank

        def p3(v, fill):
            return [fill] * pad + list(v)

        g = (p3(in_spatial, 1) + p3(out, 1) + p3(self.kernel, 1) + p3(self.strides, 1) + p3(pb, 0) + p3(pe, 0)
             + p3(self.dilations, 1))
        return out, np.asarray(g, dtype=np.int64)


class GeomCache(dict):
    """in_spatial -> PoolAttrs.geom_vector(in_spatial), computed on the first run of a shape (a plain dict hit on
    every later run; a shape whose geometry raises is not stored)."""

    def __init__(self, pool):
        super().__init__()
        self.pool = pool

    def __missing__(self, key):
        v = self[key] = self.pool.geom_vector(key)
        return v


class WindowPool:
    """Mixin of the window-pooling kernels (MaxPool, AveragePool, LpPool, com.onnxep NhwcMaxPool / NhwcAveragePool),
    before OpKernel: the pooling attributes' defaults, normalised at construction into `self.pool` (PoolAttrs) and
    `self._geom` (GeomCache: `out, g = self._geom[spatial]`)."""

    kernel_shape = None
    auto_pad = "NOTSET"
    ceil_mode = 0
    dilations = None
    pads = None
    strides = None

    def __init__(self, info):
        super().__init__(info)
        self.pool = PoolAttrs(self.kernel_shape, self.strides, self.pads, self.dilations, self.auto_pad,
                              self.ceil_mode)
        self._geom = GeomCache(self.pool)

    def out_spatial(self, x):
        """The output's spatial dims for the NC... input x (the numpy paths; the native ones read self._geom), or
        ValueError."""
        if x.ndim != self.pool.rank + 2:
            raise ValueError(f"{self.op_type}: input rank {x.ndim}, kernel_shape has {self.pool.rank} dims")
        return tuple(self.pool.geometry(x.shape[2:])[0])


def pool_attrs_of(op_or_kernel, get):
    """PoolAttrs from an attribute getter `get(name, default)`."""
    return PoolAttrs(get("kernel_shape", None) or [], get("strides", None), get("pads", None),
                     get("dilations", None), get("auto_pad", "NOTSET"), get("ceil_mode", 0))


def supports_pool(op) -> PoolAttrs | None:
    """PoolAttrs when the node is a float32 NCHW pooling this implementation handles, else None."""
    a = op.node.attrs
    if not a.get("kernel_shape"):
        return None
    pa = pool_attrs_of(op, lambda n, d: a.get(n) if a.get(n) is not None else d)
    if not pa.valid():
        return None
    shape = op.input_types[0].shape if op.input_types and op.input_types[0] is not None else None
    if not pa.statically_ok(shape):
        return None
    return pa


__all__ = ["GeomCache", "PoolAttrs", "WindowPool", "pool_attrs_of", "supports_pool", "static_shape"]
