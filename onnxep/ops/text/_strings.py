"""Shared helpers of the string ops: string tensors are numpy object arrays of Python str (as onnxruntime's Python
API gives them); an element that arrives as bytes is decoded as UTF-8."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument

#: the only element type of the string ops' string inputs and outputs
STRING = ("string",)


def as_str(x: np.ndarray, what: str) -> np.ndarray:
    """x as an object array of str (bytes elements decoded as UTF-8, a "U" array converted), else InvalidArgument."""
    x = np.asarray(x)
    if x.dtype.kind in "US":
        return x.astype(str).astype(object)
    if x.dtype != object:
        raise InvalidArgument(f"{what}: expected a string tensor, got dtype {x.dtype}")
    if x.size and any(not isinstance(s, str) for s in x.flat):
        return np.array([s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in x.flat],
                        object).reshape(x.shape)
    return x


def object_array(values, shape) -> np.ndarray:
    """A fresh object array of `shape` holding the str `values` (a list, in row-major order): never a "U" array."""
    y = np.empty(len(values), object)
    y[:] = values
    return y.reshape(shape)
