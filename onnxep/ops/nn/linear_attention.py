"""LinearAttention (opset 27): recurrent linear attention with a (d_k, d_v) state per key/value head.
Per time step t: state *= exp(decay_t) (gated rules), v_t := beta_t * (v_t - state^T k_t) (delta rules),
state += k_t v_t^T, output_t := scale * q_t^T state (grouped query heads read their key head's state).
update_rule linear / gated / delta / gated_delta; decay per head or per key dim; beta per head or shared;
past_state in, present_state out. float16 / float32, computed in float32.

The recurrence is a loop over the time steps (the delta rules have no closed form), each step a few whole-array
operations over batch and heads, as recurrent ops are computed."""
import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import bad

_OP = "LinearAttention"
_RULES = ("linear", "gated", "delta", "gated_delta")


def _heads(x, n):
    """(B, T, n * d) -> (B, n, T, d) float32."""
    b, t, hd = x.shape
    return x.reshape(b, t, n, hd // n).transpose(0, 2, 1, 3).astype(np.float32)


class LinearAttention_27(OpKernel):
    domain, op_type, since = "", "LinearAttention", 27
    type_constraints = {"T": ("float16", "float32"), "S": ("float16", "float32")}
    update_rule = "gated_delta"
    q_num_heads = None
    kv_num_heads = None
    scale = 0.0
    chunk_size = 64

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        return a.get("update_rule", "gated_delta") in _RULES and a.get("q_num_heads") is not None \
            and a.get("kv_num_heads") is not None

    def compute(self, ctx):
        q, k, v, past, decay, beta = (ctx.input(i) for i in range(6))
        rule = self.update_rule
        hq, hk = int(self.q_num_heads), int(self.kv_num_heads)
        gating, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
        if hq <= 0 or hk <= 0 or hq % hk:
            raise bad(_OP, f"q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hk})")
        if gating != (decay is not None) or delta != (beta is not None):
            raise bad(_OP, f"update_rule {rule!r} {'needs' if gating else 'forbids'} decay and "
                           f"{'needs' if delta else 'forbids'} beta")
        for nm, a in (("query", q), ("key", k), ("value", v)):
            if a.ndim != 3:
                raise bad(_OP, f"{nm} must be (B, T, heads * dim), got shape {a.shape}")
        B, T, _ = q.shape
        if q.shape[2] % hq or k.shape[2] % hk or v.shape[2] % hk or k.shape[:2] != (B, T) or v.shape[:2] != (B, T):
            raise bad(_OP, f"query {q.shape}, key {k.shape}, value {v.shape} do not split into {hq} / {hk} heads")
        dk, dv = q.shape[2] // hq, v.shape[2] // hk
        if k.shape[2] // hk != dk:
            raise bad(_OP, f"key head size {k.shape[2] // hk} differs from the query's {dk}")
        q4, k4, v4 = _heads(q, hq), _heads(k, hk), _heads(v, hk)
        g4 = b4 = None
        if decay is not None:
            if decay.ndim != 3 or decay.shape[:2] != (B, T) or decay.shape[2] not in (hk, hk * dk):
                raise bad(_OP, f"decay has shape {decay.shape}, expected ({B}, {T}, {hk} or {hk * dk})")
            g4 = np.exp(_heads(decay, hk))                    # (B, hk, T, 1 or dk)
        if beta is not None:
            if beta.ndim != 3 or beta.shape[:2] != (B, T) or beta.shape[2] not in (hk, 1):
                raise bad(_OP, f"beta has shape {beta.shape}, expected ({B}, {T}, {hk} or 1)")
            b4 = beta.reshape(B, T, beta.shape[2], 1).transpose(0, 2, 1, 3).astype(np.float32)
        if past is not None:
            if past.shape != (B, hk, dk, dv):
                raise bad(_OP, f"past_state has shape {past.shape}, expected {(B, hk, dk, dv)}")
            state = past.astype(np.float32)     # a copy: updated in place below
        else:
            state = np.zeros((B, hk, dk, dv), np.float32)
        scale = float(self.scale) if self.scale else 1.0 / np.sqrt(dk)
        g = hq // hk
        y = ctx.output(0, (B, T, hq * dv), q.dtype)
        st_out = ctx.output(1, (B, hk, dk, dv), q.dtype if past is None else past.dtype) if ctx.has_output(1) \
            else None
        out = np.empty((B, hk, g, T, dv), np.float32)
        qg = q4.reshape(B, hk, g, T, dk)
        for t in range(T):          # the recurrence over time steps
            if gating:
                state *= g4[:, :, t, :, None]
            vt = v4[:, :, t]
            if delta:
                vt = b4[:, :, t] * (vt - np.einsum("bhdm,bhd->bhm", state, k4[:, :, t]))
            state += k4[:, :, t, :, None] * vt[:, :, None, :]
            out[:, :, :, t] = np.einsum("bhgd,bhdm->bhgm", qg[:, :, :, t], state)
        out *= scale
        np.copyto(y.reshape(B, T, hk, g, dv), out.transpose(0, 3, 1, 2, 4), casting="same_kind")
        if st_out is not None:
            np.copyto(st_out, state, casting="same_kind")
