"""Attention (opsets 23, 24, 25): Y := softmax(Q K^T * scale (softcapped) + bias) V per head, float16 / bfloat16 /
float32 / float64 (the 16-bit types accumulate in float32, rounded to their type at each step of the spec's graph).
3-D inputs are split into heads (q_num_heads / kv_num_heads); grouped-query heads share their K / V head (no repeat
copy); past_key / past_value are prepended (present_key / present_value); the bias is the attention mask (bool: -inf
where false; numeric: added; padded with masked columns up to the total key length), is_causal (bottom-right
aligned: query i sees key j <= i + past length, or + nonpad_kv_seqlen - q_len), sliding windows (25), and
nonpad_kv_seqlen padding (24). A fully masked row gives zeros. qk_matmul_output: mode 0 the scaled product, 1 after
softcap, 2 with the bias, 3 the softmax. The products are one BLAS GEMM per (batch, head) pair: numpy's stacked
matmul does not call BLAS (a thousand times slower here)."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, bad

_OP = "Attention"
_MASK_TYPES = ("bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64") + FLOATS
_PRECISIONS = {1: np.float32, 10: np.float16, 11: np.float64}


def _heads(t, n, name):
    """(B, S, n * D) -> (B, n, S, D) view, or a 4-D tensor as is."""
    if t.ndim == 4:
        return t
    if t.ndim != 3 or n is None or n <= 0 or t.shape[2] % n:
        raise bad(_OP, f"{name} of shape {t.shape} needs rank 4, or rank 3 with a head count dividing its last dim "
                       f"(got {n})")
    return t.reshape(t.shape[0], t.shape[1], n, t.shape[2] // n).transpose(0, 2, 1, 3)


class Attention_23(OpKernel):
    domain, op_type, since = "", "Attention", 23
    type_constraints = {"T1": FLOATS + ("bfloat16",), "T2": FLOATS + ("bfloat16",), "U": _MASK_TYPES + ("bfloat16",)}
    is_causal = 0
    q_num_heads = None
    kv_num_heads = None
    scale = None
    softcap = 0.0
    softmax_precision = None
    qk_matmul_output_mode = 0
    left_window_size = -1
    right_window_size = -1

    @classmethod
    def supports(cls, op):
        sp = op.node.attrs.get("softmax_precision")
        return sp is None or int(sp) in _PRECISIONS

    def compute(self, ctx):
        Q, K, V = ctx.input(0), ctx.input(1), ctx.input(2)
        mask, pk, pv = ctx.input(3), ctx.input(4), ctx.input(5)
        nonpad = ctx.input(6) if self.since >= 24 else None
        if not Q.ndim == K.ndim == V.ndim:
            raise bad(_OP, f"Q {Q.shape}, K {K.shape}, V {V.shape} must have one rank")
        if (pk is None) != (pv is None):
            raise bad(_OP, "past_key and past_value must be given together")
        if nonpad is not None and pk is not None:
            raise bad(_OP, "nonpad_kv_seqlen cannot be combined with past_key / past_value")
        qn = None if self.q_num_heads is None else int(self.q_num_heads)
        kvn = None if self.kv_num_heads is None else int(self.kv_num_heads)
        q, k, v = _heads(Q, qn, "Q"), _heads(K, kvn, "K"), _heads(V, kvn, "V")
        B, Hq, Sq, D = q.shape
        Hk, Dv = k.shape[1], v.shape[3]
        if k.shape[0] != B or v.shape[:3] != k.shape[:3] or k.shape[3] != D or Hk == 0 or Hq % Hk:
            raise bad(_OP, f"Q heads {q.shape}, K heads {k.shape}, V heads {v.shape} do not fit (query heads must be "
                           f"a multiple of the key / value heads)")
        past = 0
        if pk is not None:
            past = pk.shape[2]
            if pk.shape != (B, Hk, past, D) or pv.shape != (B, Hk, past, Dv):
                raise bad(_OP, f"past_key {pk.shape} / past_value {pv.shape} do not fit K heads {k.shape} / V heads "
                               f"{v.shape}")
        Skv = past + k.shape[2]
        # present key / value: the outputs when asked for, else temporaries
        kk = ctx.output(1, (B, Hk, Skv, D), K.dtype) if ctx.has_output(1) else None
        vv = ctx.output(2, (B, Hk, Skv, Dv), V.dtype) if ctx.has_output(2) else None
        if pk is None:
            kk = k if kk is None else _fill(kk, k)
            vv = v if vv is None else _fill(vv, v)
        else:
            kk = np.concatenate((pk, k), axis=2, out=kk)
            vv = np.concatenate((pv, v), axis=2, out=vv)
        acc = np.float64 if Q.dtype == np.float64 else np.float32
        # float16: the products accumulate in float32, but every step of the spec's graph (Q and K times
        # sqrt(scale), the product, the bias, the softmax) rounds to float16 as its float16 nodes would
        half = Q.dtype.itemsize == 2          # float16 / bfloat16
        prec = _PRECISIONS.get(None if self.softmax_precision is None else int(self.softmax_precision),
                               Q.dtype.type if half else acc)
        bias = self._bias(mask, nonpad, B, Sq, Skv, past, acc)
        scale = float(self.scale) if self.scale is not None else 1.0 / np.sqrt(D)
        rep = Hq // Hk
        out_shape = (B, Sq, Hq * Dv) if Q.ndim == 3 else (B, Hq, Sq, Dv)
        y = ctx.output(0, out_shape, Q.dtype)
        yh = y.reshape(B, Sq, Hq, Dv).transpose(0, 2, 1, 3) if Q.ndim == 3 else y
        qk_out = ctx.output(3, (B, Hq, Sq, Skv), Q.dtype) if ctx.has_output(3) else None
        mode = int(self.qk_matmul_output_mode)
        softcap = float(self.softcap or 0.0)
        if half:
            root = Q.dtype.type(np.sqrt(scale))
            qa, ka = (q * root).astype(acc), (kk * root).astype(acc)
            scale = 1.0
        else:
            qa, ka = q.astype(acc, copy=False), kk.astype(acc, copy=False)
        va = vv.astype(acc, copy=False)
        s = np.empty((Sq, Skv), acc)
        for b in range(B):               # one GEMM per (batch, head): BLAS
            for h in range(Hq):
                # np.dot: np.matmul with out= and a transposed operand leaves BLAS (35x slower)
                np.dot(qa[b, h], ka[b, h // rep].T, out=s)
                if half:
                    s[...] = s.astype(Q.dtype)
                else:
                    s *= scale
                if qk_out is not None and mode == 0:
                    qk_out[b, h] = s
                if softcap > 0:
                    s /= softcap
                    np.tanh(s, out=s)
                    s *= softcap
                if qk_out is not None and mode == 1:
                    qk_out[b, h] = s
                sb = s if bias is None else s + bias[min(b, bias.shape[0] - 1), min(h, bias.shape[1] - 1)]
                if half:
                    sb = sb.astype(Q.dtype)
                if qk_out is not None and mode == 2:
                    qk_out[b, h] = sb
                p = _softmax(sb.astype(prec, copy=False))
                if qk_out is not None and mode == 3:
                    qk_out[b, h] = p
                # the softmax is cast to the input type before the product with V, as the spec's graph does
                if p.dtype != Q.dtype:
                    p = p.astype(Q.dtype).astype(acc)
                np.copyto(yh[b, h], p @ va[b, h // rep], casting="same_kind")

    def _bias(self, mask, nonpad, B, Sq, Skv, past, acc):
        """The additive bias (B or 1, H or 1, Sq, Skv) in `acc`, or None."""
        bias = None
        if mask is not None:
            if not 1 <= mask.ndim <= 4 or (mask.ndim > 1 and mask.shape[-2] not in (1, Sq)) or mask.shape[-1] > Skv:
                raise bad(_OP, f"attn_mask of shape {mask.shape} does not fit ({Sq} queries, {Skv} keys)")
            if mask.dtype == np.bool_:
                m = np.where(mask, acc(0), acc(-np.inf))
            else:
                m = mask.astype(acc)
            if m.shape[-1] < Skv:       # the missing columns are masked
                m = np.concatenate((m, np.full(m.shape[:-1] + (Skv - m.shape[-1],), -np.inf, acc)), axis=-1)
            bias = m.reshape((1,) * (4 - m.ndim) + m.shape)
        i = np.arange(Sq)[:, None]
        j = np.arange(Skv)[None, :]
        offset = past if nonpad is None else (nonpad.reshape(-1).astype(np.int64) - Sq)[:, None, None, None]
        allowed = None
        if int(self.is_causal):
            allowed = j <= i + offset
        left, right = int(self.left_window_size), int(self.right_window_size)
        if left >= 0 or right >= 0:
            diff = (i + offset) - j
            win = np.ones(np.shape(diff), bool)
            if left >= 0:
                win &= diff <= left
            if right >= 0:
                win &= -diff <= right
            allowed = win if allowed is None else allowed & win
        if nonpad is not None:
            if nonpad.shape != (B,):
                raise bad(_OP, f"nonpad_kv_seqlen has shape {nonpad.shape}, expected ({B},)")
            keep = (np.arange(Skv)[None, :] < nonpad.reshape(-1, 1))[:, None, None, :]
            allowed = keep if allowed is None else allowed & keep
        if allowed is not None:
            extra = np.where(allowed, acc(0), acc(-np.inf))
            extra = extra.reshape((1,) * (4 - extra.ndim) + extra.shape)
            bias = extra if bias is None else bias + extra
        return bias


def _fill(dst, src):
    dst[...] = src
    return dst


def _softmax(s):
    """Row softmax; a row masked entirely (all -inf) gives zeros."""
    m = np.max(s, axis=-1, keepdims=True)
    dead = np.isneginf(m)
    e = np.exp(s - np.where(dead, 0, m))
    tot = np.sum(e, axis=-1, keepdims=True)
    e /= np.where(tot == 0, 1, tot)
    if dead.any():
        e[np.broadcast_to(dead, e.shape)] = 0
    return e


class Attention_24(Attention_23):
    """Adds the nonpad_kv_seqlen input."""

    since = 24


class Attention_25(Attention_23):
    """Adds left_window_size / right_window_size (sliding windows)."""

    since = 25
