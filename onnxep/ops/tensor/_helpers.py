"""Shared helpers of the tensor family: dtype sets with strings, outputs of any dtype (object arrays for strings,
which the arena cannot hold), and the checks the index ops repeat."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._data import DATA_TYPES

#: DATA_TYPES and string (numpy object arrays of str, as onnxruntime's Python API gives them).
WITH_STRING = DATA_TYPES + ("string",)
#: WITH_STRING and bfloat16 (ml_dtypes.bfloat16 arrays, as onnx's numpy_helper reads them): every type numpy can
#: hold that the data-movement schemas allow (float8, int4/int2 and float4 are left to the reference backend)
ALL_TYPES = WITH_STRING + ("bfloat16",)
#: DATA_TYPES and bfloat16 (the ops whose schemas have no string)
NUMERIC_BOOL_BF16 = DATA_TYPES + ("bfloat16",)
#: the numeric types (no bool, no string)
NUMERIC = tuple(t for t in DATA_TYPES if t != "bool")
INDEX_TYPES = ("int32", "int64")


def new_output(ctx, i, shape, dtype, what):
    """Output i of `shape`, size-checked first (`what` names the op and node in the error): from the run's
    allocator, or for strings (object dtype, never in the arena) a fresh object array."""
    dtype = np.dtype(dtype)
    shape = tuple(int(d) for d in shape)
    check_size(shape, dtype, what)
    if dtype.hasobject:
        y = np.empty(shape, object)
        ctx.set_output(i, y)
        return y
    return ctx.output(i, shape, dtype)


def fill_value(dtype):
    """The zero of dtype ('' for strings)."""
    return "" if np.dtype(dtype).hasobject else np.zeros((), dtype)


def normalize_indices(idx, n, what, where=""):
    """idx (integer array) with negatives counted from the end of a dim of size n; raises InvalidArgument when any is
    outside [-n, n-1]."""
    if idx.size:
        lo, hi = idx.min(), idx.max()
        if lo < -n or hi >= n:
            raise InvalidArgument(f"{what}: indices must be in [{-n}, {n - 1}]{where}, got values in [{lo}, {hi}]")
        if lo < 0:
            idx = np.where(idx < 0, idx + n, idx)
    return idx


def ints(v, what) -> list:
    """A 1-D (or scalar) integer tensor or attribute as a list of Python ints."""
    a = np.asarray(v)
    if a.ndim > 1:
        raise InvalidArgument(f"{what}: must be 1-D, got shape {a.shape}")
    return [int(d) for d in a.reshape(-1)]


def first_input_type_ok(op, allowed) -> bool:
    """check_types for opset-1 forms whose outputs shape inference leaves untyped (Split-1, Pad-1): input 0's type is
    one of allowed (the outputs take it)."""
    from onnxep.ops._base import _DTYPE_NAMES
    vt = op.input_types[0] if op.input_types else None
    return vt is not None and vt.kind == "tensor" and _DTYPE_NAMES.get(vt.type_str) in allowed
