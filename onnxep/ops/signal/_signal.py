"""Shared helpers of the signal ops: scalar inputs, the output_datatype attribute of the window / mel ops, and the
[..., 2] real / imaginary layout of complex tensors."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from onnxep.errors import InvalidArgument

#: T1 of DFT / STFT (bfloat16 and float16 compute in float32)
SIGNAL_TYPES = ("float16", "float32", "float64", "bfloat16")
INDEX_TYPES = ("int32", "int64")
#: output_datatype values the window ops and MelWeightMatrix may produce (their T2 / T3)
OUTPUT_DATATYPES = {getattr(TensorProto, n) for n in (
    "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FLOAT16", "FLOAT", "DOUBLE",
    "BFLOAT16")}


def output_dtype(code) -> np.dtype:
    """The numpy dtype of a TensorProto element type (bfloat16 through ml_dtypes, as onnx's helper maps it)."""
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(code)))


def scalar(v, what, where) -> float | int:
    """The one value of a scalar (or one-element) tensor input."""
    a = np.asarray(v)
    if a.size != 1 or a.ndim > 1:
        raise InvalidArgument(f"{where}: {what} must be a scalar, got shape {a.shape}")
    return a.reshape(-1)[0].item()


def compute_dtype(dtype) -> np.dtype:
    """float64 stays float64; float32 / float16 / bfloat16 compute in float32."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def as_complex(x, where):
    """A [..., 1] (real) or [..., 2] (real, imaginary) tensor as (signal without the last dim, is_real), in the
    compute dtype (complex for complex input)."""
    if x.ndim < 1 or x.shape[-1] not in (1, 2):
        raise InvalidArgument(f"{where}: the last dimension of the input must be 1 (real) or 2 (complex), got shape "
                              f"{x.shape}")
    dt = compute_dtype(x.dtype)
    if x.shape[-1] == 1:
        return x[..., 0].astype(dt, copy=False), True
    xr = x.astype(dt, copy=False)
    c = np.empty(x.shape[:-1], np.complex128 if dt == np.float64 else np.complex64)
    c.real = xr[..., 0]
    c.imag = xr[..., 1]
    return c, False


def write_complex(y, out):
    """Complex y into out [..., 2] (real, imaginary), cast to out's dtype."""
    np.copyto(out[..., 0], y.real, casting="unsafe")
    np.copyto(out[..., 1], y.imag, casting="unsafe")
