"""Shared helpers of the numpy-vectorized nn ops (normalizations, ConvTranspose, Resize, LpPool, ...)."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import _DTYPE_NAMES
from onnxep.ops._data import norm_axes, norm_axis

#: float types these ops compute in numpy (bfloat16 has no numpy arithmetic; float8 / int4 are not numeric here)
FLOATS = ("float16", "float32", "float64")


def acc_dtype(dtype):
    """The type statistics are accumulated in: float64 for float64 input, else float32 (float16 input included)."""
    return np.float64 if np.dtype(dtype) == np.float64 else np.float32


def centred_and_std(xr, yr, epsilon):
    """(x - mean, sqrt(var + epsilon)) over the last axis of the 3-D view `xr`, the variance of the centred values:
    the centred values go into `yr` (the output's matching view) when x's type is its own accumulation type, else into
    a new array of acc_dtype; the std has shape (xr.shape[0], xr.shape[1], 1)."""
    acc = acc_dtype(xr.dtype)
    d = yr if acc == xr.dtype else np.empty(xr.shape, acc)
    mean = np.mean(xr, axis=2, keepdims=True, dtype=acc)
    np.subtract(xr, mean, out=d)
    std = np.einsum("ijs,ijs->ij", d, d)[:, :, None]
    std /= d.shape[2]
    std += epsilon
    np.sqrt(std, out=std)
    return d, std


def bad(op, msg):
    """InvalidArgument saying which op and what was wrong (the executor adds the node name)."""
    return InvalidArgument(f"{op}: {msg}")


def axis_of(axis, x, op) -> int:
    """The attribute `axis` of an op over x, in [0, x.ndim), or InvalidArgument naming op and x's shape."""
    try:
        return norm_axis(axis, x.ndim, op)
    except ValueError as e:
        raise bad(op, f"{e} (input shape {x.shape})") from None


def axes_of(axes, x, op) -> tuple:
    """The attribute `axes` of an op over x, each in [0, x.ndim), or InvalidArgument as axis_of."""
    try:
        return tuple(norm_axes(axes, x.ndim, op))
    except ValueError as e:
        raise bad(op, f"{e} (input shape {x.shape})") from None


def ints(v, n=None, fill=None):
    """An attribute's ints as a tuple; `fill` repeated n times when the attribute is absent or empty."""
    if v is None or len(v) == 0:
        return None if fill is None else (fill,) * n
    return tuple(int(i) for i in v)


def rank_of(vt):
    return None if vt is None or vt.shape is None else len(vt.shape)


def inputs_typed(op, allowed, indices) -> bool:
    """Inputs `indices` (present ones) are tensors of one of the `allowed` dtype names: the type check of ops whose
    output type onnx's shape inference leaves unknown (function ops such as GroupNormalization-18)."""
    for i in indices:
        if i >= len(op.node.inputs) or not op.node.inputs[i]:
            continue
        vt = op.input_types[i] if i < len(op.input_types) else None
        if vt is None or vt.kind != "tensor" or _DTYPE_NAMES.get(vt.type_str) not in allowed:
            return False
    return True
