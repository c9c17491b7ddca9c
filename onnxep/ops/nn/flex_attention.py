"""FlexAttention (ai.onnx.preview, opset 1): Y := prob_mod(softmax(score_mod(Q K^T * scale))) V per (batch, query
head), rank-4 Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev); grouped-query heads (query head h reads K / V
head h // (Hq / Hkv), no repeat copy). scale defaults to 1 / sqrt(E), applied as sqrt(scale) to Q and K in their own
type before the product (as the spec's reference does); the softmax and the product with V run in softmax_precision
(float32 by default, float64 for float64 inputs; 10 = float16, 16 = bfloat16: float32 arithmetic rounded at each
step). float16 / float32 / float64 / bfloat16 (bfloat16 inputs computed in float32). One BLAS GEMM per (batch, head)
pair: numpy's stacked matmul does not call BLAS.

score_mod / prob_mod subgraphs run as compiled bodies (control/_body.py, as If's branches), once per call on the
whole (B, Hq, L, S) scores / probabilities tensor in softmax_precision; the node then computes every head's scores
first (one GEMM per (batch, head) into that tensor) and the products with V after."""
import numpy as np

from onnxep.errors import InvalidArgument, OnnxepError
from onnxep.graph.model import check_size
from onnxep.ops.math._numpy import _BF16, NumpyKernel
from onnxep.ops.nn._helpers import bad

_OP = "FlexAttention"
#: softmax_precision (a TensorProto element type) -> (arithmetic dtype, dtype each step is rounded to or None)
_PRECISIONS = {1: (np.float32, None), 10: (np.float16, None), 11: (np.float64, None), 16: (np.float32, _BF16)}


class FlexAttention_1(NumpyKernel):
    domain, op_type, since = "ai.onnx.preview", _OP, 1
    type_constraints = {"T1": ("float16", "float32", "float64", "bfloat16")}
    scale = None
    softmax_precision = None

    def __init__(self, info):
        super().__init__(info)
        if self.softmax_precision is not None and int(self.softmax_precision) not in _PRECISIONS:
            raise bad(f"{_OP} node {self.name!r}", f"softmax_precision must be one of 1 (float), 10 (float16), "
                                                   f"11 (double), 16 (bfloat16), got {self.softmax_precision}")
        self._bodies = {}
        try:
            for attr in ("score_mod", "prob_mod"):
                g = info.attrs.get(attr)
                if g is not None:
                    from onnxep.ops.control._body import Body
                    body = self._bodies[attr] = Body(g, info, attr)
                    if len(body.input_names) != 1 or len(body.output_names) != 1:
                        raise InvalidArgument(f"{_OP} node {self.name!r}: {attr} must have 1 input and 1 output, got "
                                              f"{len(body.input_names)} and {len(body.output_names)}")
        except BaseException:
            self.release()
            raise

    def release(self):
        bodies, self._bodies = getattr(self, "_bodies", {}), {}
        for body in bodies.values():
            body.release()

    def _modify(self, attr, t, ctx):
        """t (B, Hq, L, S) through the node's `attr` subgraph, back in t's type; t itself when there is none."""
        body = self._bodies.get(attr)
        if body is None:
            return t
        from onnxep.ops.control._body import run_context, wrap_iteration
        try:
            out = body.run({body.input_names[0]: t, **body.outer_feeds(ctx)}, run_context(ctx))[0]
        except OnnxepError as e:
            raise wrap_iteration(e, body.where) from e
        out = np.asarray(out)
        if out.shape != t.shape:
            raise InvalidArgument(f"{_OP} node {self.name!r}: {attr} gave shape {out.shape}, expected {t.shape}")
        return out.astype(t.dtype, copy=False)

    def compute(self, ctx):
        q, k, v = ctx.input(0), ctx.input(1), ctx.input(2)
        if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
            raise bad(_OP, f"Q, K, V must be rank 4, got shapes {q.shape}, {k.shape}, {v.shape}")
        B, Hq, L, E = q.shape
        Hkv, S = k.shape[1], k.shape[2]
        if k.shape[0] != B or v.shape[0] != B or k.shape[3] != E or v.shape[1] != Hkv or v.shape[2] != S:
            raise bad(_OP, f"K {k.shape} must be (B={B}, Hkv, S, E={E}) and V {v.shape} (B, Hkv, S, Ev) for Q "
                           f"{q.shape}")
        if Hkv <= 0 or Hq % Hkv:
            raise bad(_OP, f"q_num_heads {Hq} must be a multiple of kv_num_heads {Hkv}")
        Ev = v.shape[3]
        y = ctx.output(0, (B, Hq, L, Ev), v.dtype)
        if y.size == 0:
            return
        rep = Hq // Hkv
        check_size((L, S), np.float64, f"{_OP} scores of one head")
        if self.softmax_precision is not None:
            prec, rnd = _PRECISIONS[int(self.softmax_precision)]
        else:
            prec, rnd = (np.float64 if q.dtype == np.float64 else np.float32), None
        scale = 1.0 / np.sqrt(E) if self.scale is None else float(self.scale)
        root = np.sqrt(np.float32(scale)).astype(q.dtype)
        acc = np.float64 if q.dtype == np.float64 else np.float32     # the GEMMs' accumulation type
        qa = (q * root).astype(acc, copy=False)
        ka = (k * root).astype(acc, copy=False)
        half = q.dtype == np.float16
        vp = v.astype(prec, copy=False)
        if rnd is not None:
            vp = vp.astype(rnd).astype(prec)
        if self._bodies:
            self._compute_modified(ctx, y, qa, ka, vp, rep, prec, rnd, half, q.dtype)
            return
        s = np.empty((L, S), acc)
        for b in range(B):
            for h in range(Hq):
                np.dot(qa[b, h], ka[b, h // rep].T, out=s)
                sc = s.astype(q.dtype) if half else s           # the product in Q's type, as the spec computes it
                p = sc.astype(prec)
                if rnd is not None:
                    p = p.astype(rnd).astype(prec)
                p -= p.max(axis=-1, keepdims=True)
                np.exp(p, out=p)
                p /= p.sum(axis=-1, keepdims=True)
                if rnd is not None:
                    p = p.astype(rnd).astype(prec)
                out = p @ vp[b, h // rep]
                if rnd is not None:
                    out = out.astype(rnd)
                np.copyto(y[b, h], out, casting="unsafe")

    def _compute_modified(self, ctx, y, qa, ka, vp, rep, prec, rnd, half, qdt):
        """With score_mod / prob_mod: all scores first, the subgraphs on the whole tensors, then the products."""
        B, Hq, L, S = y.shape[0], y.shape[1], qa.shape[2], ka.shape[2]
        check_size((B, Hq, L, S), np.float64, f"{_OP} scores")
        scores = np.empty((B, Hq, L, S), prec)
        s = np.empty((L, S), qa.dtype)
        for b in range(B):
            for h in range(Hq):
                np.dot(qa[b, h], ka[b, h // rep].T, out=s)
                scores[b, h] = s.astype(qdt) if half else s
        feed = scores if rnd is None else scores.astype(rnd)
        p = self._modify("score_mod", feed, ctx).astype(prec, copy=False)
        if rnd is not None:
            p = p.astype(rnd).astype(prec)
        p = p - p.max(axis=-1, keepdims=True)
        np.exp(p, out=p)
        p /= p.sum(axis=-1, keepdims=True)
        if rnd is not None:
            p = self._modify("prob_mod", p.astype(rnd), ctx).astype(prec)
        else:
            p = self._modify("prob_mod", p, ctx)
        for b in range(B):
            for h in range(Hq):
                out = p[b, h] @ vp[b, h // rep]
                if rnd is not None:
                    out = out.astype(rnd)
                np.copyto(y[b, h], out, casting="unsafe")
