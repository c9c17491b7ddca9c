"""FlexAttention (ai.onnx.preview, opset 1) without modifier subgraphs: Y := softmax(Q K^T * scale) V per (batch,
query head), rank-4 Q (B, Hq, L, E), K (B, Hkv, S, E), V (B, Hkv, S, Ev); grouped-query heads (query head h reads K / V
head h // (Hq / Hkv), no repeat copy). scale defaults to 1 / sqrt(E), applied as sqrt(scale) to Q and K in their own
type before the product (as the spec's reference does); the softmax and the product with V run in softmax_precision
(float32 by default, float64 for float64 inputs; 10 = float16, 16 = bfloat16: float32 arithmetic rounded at each
step). float16 / float32 / float64 / bfloat16 (bfloat16 inputs computed in float32). One BLAS GEMM per (batch, head)
pair: numpy's stacked matmul does not call BLAS.

A node with a score_mod or prob_mod subgraph is not claimed (supports() is False): running those bodies per call
needs the subgraph executor of the control-flow ops; such nodes go to the reference fallback when it is on."""
import numpy as np

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

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        return a.get("score_mod") is None and a.get("prob_mod") is None

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
