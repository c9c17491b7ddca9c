"""Shared helpers of the ai.onnx.ml family: the score post-transforms as onnxruntime computes them (float32, its
approximate erfinv for PROBIT, its two-class expansions), label outputs, lookups of keys in a table, and the checks the
ops repeat. Everything is vectorized over rows."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import _DTYPE_NAMES
from onnxep.ops.tensor._helpers import new_output

F32 = np.float32
#: the numeric input types of most ml ops (T1 / T of LinearClassifier, Scaler, Normalizer, ...)
NUM4 = ("float32", "float64", "int64", "int32")
LABELS = ("string", "int64")

#: post_transform names, and TreeEnsemble-5's integer codes for them
TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
TRANSFORM_CODES = {0: "NONE", 1: "SOFTMAX", 2: "LOGISTIC", 3: "SOFTMAX_ZERO", 4: "PROBIT"}


def logistic(x):
    """onnxruntime's ComputeLogistic: 1 / (1 + exp(-|x|)), mirrored for x < 0 (float32)."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore"):
        v = F32(1) / (F32(1) + np.exp(-np.abs(x)))
    return np.where(x < 0, F32(1) - v, v).astype(F32, copy=False)


def _erfinv(x):
    """onnxruntime's ErfInv: Winitzki's approximation with a = 0.147 (float32), not the exact inverse."""
    x = np.asarray(x, F32)
    sgn = np.where(x < 0, F32(-1), F32(1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (F32(1) - x) * (F32(1) + x)
        lg = np.log(t)
        v = F32(2) / (F32(np.pi) * F32(0.147)) + F32(0.5) * lg
        v2 = F32(1) / F32(0.147) * lg
        v3 = -v + np.sqrt(v * v - v2)
        return (sgn * np.sqrt(v3)).astype(F32, copy=False)


def probit(x):
    return (F32(np.sqrt(2)) * _erfinv(F32(2) * np.asarray(x, F32) - F32(1))).astype(F32, copy=False)


def softmax(s):
    s = np.asarray(s, F32)
    m = np.maximum(s.max(axis=1, keepdims=True), F32(-np.finfo(F32).max))
    e = np.exp(s - m)
    return (e / e.sum(axis=1, keepdims=True)).astype(F32, copy=False)


def softmax_zero(s):
    """Softmax over the values that are not (nearly) zero; the others become 0 * exp(-max) (onnxruntime)."""
    s = np.asarray(s, F32)
    m = np.maximum(s.max(axis=1, keepdims=True), F32(-np.finfo(F32).max))
    nz = (s > F32(1e-7)) | (s < F32(-1e-7))
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.where(nz, np.exp(s - m), s * np.exp(-m))
        tot = np.where(nz, e, F32(0)).sum(axis=1, keepdims=True)
        return (e / tot).astype(F32, copy=False)


def transform(scores, post):
    """The post transform of a [N, K] score matrix, K >= 2 (each row on its own)."""
    if post == "LOGISTIC":
        return logistic(scores)
    if post == "SOFTMAX":
        return softmax(scores)
    if post == "SOFTMAX_ZERO":
        return softmax_zero(scores)
    if post == "PROBIT":
        return probit(scores)
    return np.asarray(scores, F32)


def update_scores(scores, post, add_second_class=-1):
    """onnxruntime's batched_update_scores_inplace / write_scores on [N, K] scores: K >= 2 -> the transform; K == 1 ->
    PROBIT alone, or when add_second_class >= 0 the two-class expansion: 0/1 -> [1 - s, s]; 2/3 -> LOGISTIC:
    [logistic(-s), logistic(s)], else [-s, s]. Other single scores stay as they are."""
    scores = np.asarray(scores, F32)
    if scores.shape[1] >= 2:
        return transform(scores, post)
    if post == "PROBIT":
        return probit(scores)
    if add_second_class in (0, 1):
        return np.concatenate([F32(1) - scores, scores], axis=1)
    if add_second_class in (2, 3):
        if post == "LOGISTIC":
            return np.concatenate([logistic(-scores), logistic(scores)], axis=1)
        return np.concatenate([-scores, scores], axis=1)
    return scores


def map_types(type_str):
    """'map(int64,tensor(float))' -> 'map(int64,float)' (key and value element types only, no spaces)."""
    return type_str.replace(" ", "").replace("tensor(", "").replace("))", ")")


def check_post(op, name="post_transform"):
    v = op.node.attrs.get(name)
    return v is None or v in TRANSFORMS


def first_max(scores):
    """Index of the first maximum of each row (a strict > scan, as onnxruntime's loops)."""
    return np.argmax(scores, axis=1)


def label_array(labels, idx, using_strings):
    """labels[idx] as an int64 or string (object) tensor."""
    if using_strings:
        return np.asarray(labels, dtype=object)[idx] if len(labels) else np.full(np.shape(idx), "", object)
    return np.asarray(labels, np.int64)[idx]


def as_2d(x, what):
    """(N, F) view of a 1-D (one row) or 2-D input; onnxruntime's ml ops read X this way."""
    if x.ndim == 1:
        return x.reshape(1, -1)
    if x.ndim == 2:
        return x
    raise InvalidArgument(f"{what}: X must be 1-D or 2-D, got shape {x.shape}")


def to_f32(x):
    return x if x.dtype == F32 else x.astype(F32)


def one_of(op, a, b) -> bool:
    """Exactly one of the node's attributes a and b is given (and not empty): the either / or of the ml schemas
    (cats_int64s or cats_strings, classlabels_strings or classlabels_int64s, ...)."""
    attrs = op.node.attrs
    return bool(attrs.get(a)) != bool(attrs.get(b))


def input_type_name(op, i=0):
    vts = op.input_types
    vt = vts[i] if i < len(vts) else None
    return _DTYPE_NAMES.get(vt.type_str) if vt is not None and vt.kind == "tensor" else None


#: output(ctx, i, shape, dtype, what): output i, size-checked; strings as an object array
output = new_output


def put_classified(ctx, n, labels, scores, strings, what):
    """The two outputs of a classifier of n rows: Y := labels (strings as objects, else int64), and when it is wired
    Z := scores (float32)."""
    y = output(ctx, 0, (n,), object if strings else np.int64, what)
    y[...] = labels
    if ctx.has_output(1):
        z = output(ctx, 1, scores.shape, F32, what)
        z[...] = scores


def put(ctx, i, value, what):
    """Publish a computed array as output i (size checked by the caller's shapes), copied into the run's buffer."""
    value = np.asarray(value)
    y = output(ctx, i, value.shape, value.dtype, what)
    y[...] = value
    return y


class Table:
    """A key -> value lookup vectorized with searchsorted: keys (numbers or strings), values (any array), `first`:
    the first of duplicate keys wins (a hash map's emplace) else the last; nan_matches: a NaN key matches NaN inputs
    (LabelEncoder-4)."""

    def __init__(self, keys, values, first=True, nan_matches=False):
        keys = np.asarray(keys)
        values = np.asarray(values)
        if keys.dtype.kind in "US":
            keys = keys.astype(object)
        if len(keys) != len(values):
            raise ValueError("keys and values differ in length")
        self.nan_value = None
        if keys.dtype.kind == "f":
            nan = np.isnan(keys)
            if nan.any():
                if nan_matches:
                    pos = np.flatnonzero(nan)
                    self.nan_value = values[pos[0] if first else pos[-1]]
                keys, values = keys[~nan], values[~nan]
        order = np.arange(len(keys)) if first else np.arange(len(keys))[::-1]
        if len(keys):
            k = keys[order]
            uniq, idx = np.unique(k, return_index=True)
            self.keys, self.values = uniq, values[order][idx]
        else:
            self.keys, self.values = keys, values

    def lookup(self, x):
        """(found mask, values at the found positions: garbage elsewhere) for an input array x."""
        flat = np.asarray(x).reshape(-1)
        n = len(self.keys)
        if n == 0:
            found = np.zeros(flat.shape, bool)
            vals = np.empty(flat.shape, self.values.dtype)
        else:
            keys = self.keys
            if keys.dtype == object and flat.dtype != object:
                flat = flat.astype(object)
            pos = np.searchsorted(keys, flat)
            pos = np.minimum(pos, n - 1)
            found = np.asarray(keys[pos] == flat, bool)
            vals = self.values[pos]
        if self.nan_value is not None and flat.dtype.kind == "f":
            isn = np.isnan(flat)
            if isn.any():
                vals = vals.copy()
                vals[isn] = self.nan_value
                found = found | isn
        return found.reshape(np.shape(x)), vals.reshape(np.shape(x))
