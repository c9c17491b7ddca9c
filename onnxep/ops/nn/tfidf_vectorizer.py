"""TfIdfVectorizer (opset 9): count the pool's n-grams (min_gram_length..max_gram_length, items max_skip_count + 1
apart at most; unigrams counted once) in each row of int32 / int64 / string tokens, then TF (counts), IDF (weight,
or 1, where counted) or TFIDF (weight * count, or count), float32 (C,) or (N, C).

Vectorized per (gram length, skip distance) -- a handful of pairs: tokens become ids in the pool's sorted vocabulary,
every window of ids one integer key (np.ravel_multi_index), matched against the pool's sorted keys with
np.searchsorted, and the hits counted with one np.bincount."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import bad

_OP = "TfIdfVectorizer"


def _pool(attrs):
    """(vocabulary sorted, {n: (sorted keys, output indexes)}, output size) of the node's pool, or None."""
    ints_pool, strs_pool = attrs.get("pool_int64s"), attrs.get("pool_strings")
    pool = list(ints_pool) if ints_pool else list(strs_pool or [])
    counts = [int(c) for c in attrs.get("ngram_counts") or []]
    indexes = [int(i) for i in attrs.get("ngram_indexes") or []]
    lo, hi = int(attrs.get("min_gram_length", 1)), int(attrs.get("max_gram_length", 1))
    if not pool or not counts or not indexes:
        return None
    vocab = np.unique(np.array(pool, dtype=object if strs_pool else np.int64))
    V = len(vocab)
    grams, gid = {}, 0
    for n, start in enumerate(counts, start=1):
        end = counts[n] if n < len(counts) else len(pool)
        m = (end - start) // n
        if lo <= n <= hi and m > 0:
            if V ** n >= 2 ** 62:
                return None             # keys would overflow int64
            rows = np.array(pool[start:start + m * n], dtype=vocab.dtype).reshape(m, n)
            ids = np.searchsorted(vocab, rows)
            keys = np.ravel_multi_index(tuple(ids.T), (V,) * n) if n > 1 else ids[:, 0]
            out = np.array(indexes[gid:gid + m], np.int64)
            order = np.argsort(keys, kind="stable")
            grams[n] = (keys[order], out[order])
        gid += m
    return vocab, grams, max(indexes) + 1


class TfIdfVectorizer_9(OpKernel):
    domain, op_type, since = "", "TfIdfVectorizer", 9
    type_constraints = {"T": ("string", "int32", "int64"), "T1": ("float32",)}
    max_gram_length = 1
    min_gram_length = 1
    max_skip_count = 0
    mode = "TF"
    weights = None

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        mode = a.get("mode")
        if mode not in ("TF", "IDF", "TFIDF"):
            return False
        try:
            return _pool(a) is not None
        except (ValueError, IndexError, TypeError):
            return False

    def __init__(self, info):
        super().__init__(info)
        self._vocab, self._grams, self._size = _pool(info.attrs)
        self._mode = self.mode

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim > 2 or (x.ndim == 2 and x.shape[0] < 1):
            raise bad(_OP, f"input must be (C,) or (N, C) with N > 0, got shape {x.shape}")
        rows = x.reshape(1, -1) if x.ndim < 2 else x
        N, C = rows.shape
        size = self._size
        y = ctx.output(0, (size,) if x.ndim < 2 else (N, size), np.float32)
        vocab = self._vocab
        V = len(vocab)
        tok = rows.astype(vocab.dtype) if vocab.dtype != object else rows
        pos = np.searchsorted(vocab, tok)
        found = vocab[np.minimum(pos, V - 1)] == tok
        ids = np.where(found, pos, -1)                      # -1: a token no pool n-gram holds
        hits = []
        lo, hi, dmax = int(self.min_gram_length), int(self.max_gram_length), int(self.max_skip_count) + 1
        for d in range(1, dmax + 1):
            for n in range(max(lo, 1 if d == 1 else 2), hi + 1):
                if n not in self._grams or (n - 1) * d >= C:
                    continue
                keys_sorted, outs = self._grams[n]
                starts = C - (n - 1) * d
                win = np.stack([ids[:, j * d:j * d + starts] for j in range(n)], axis=-1)   # (N, starts, n)
                ok = (win >= 0).all(axis=-1)
                w = np.where(ok[..., None], win, 0)
                keys = np.ravel_multi_index(tuple(np.moveaxis(w, -1, 0)), (V,) * n) if n > 1 else w[..., 0]
                at = np.minimum(np.searchsorted(keys_sorted, keys), len(keys_sorted) - 1)
                match = ok & (keys_sorted[at] == keys)
                r = np.nonzero(match)
                hits.append(r[0] * size + outs[at[match]])
        freq = np.bincount(np.concatenate(hits), minlength=N * size).reshape(N, size) if hits else \
            np.zeros((N, size), np.int64)
        w = None if self.weights is None or len(self.weights) == 0 else np.asarray(self.weights, np.float32)
        if self._mode == "TF":
            res = freq
        elif self._mode == "IDF":
            res = (freq > 0) * (np.float32(1) if w is None else w[:size])
        else:
            res = freq if w is None else freq * w[:size]
        np.copyto(y.reshape(N, size), res, casting="unsafe")

