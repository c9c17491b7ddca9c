"""Synthetic benchmark models built in memory with onnx.helper (float32, opset 17, random weights from a fixed seed,
checked with onnx.checker): the `python -m onnxep bench --suite models` suite. bench/models.py re-exports them.

- bert_encoder: a BERT-base-like encoder as exporters write it (hidden 768, 12 heads, 4 layers by default): per layer
  Q/K/V = MatMul + Add(bias), Reshape to heads + Transpose, scores = MatMul(Q, K^T) * 1/sqrt(d) + additive mask,
  Softmax, MatMul V, Transpose + Reshape back, output MatMul + Add(bias) + residual Add, LayerNormalization; then the
  feed-forward MatMul + Add(bias), Gelu in its Erf form x * 0.5 * (1 + Erf(x / sqrt(2))), MatMul + Add(bias) +
  residual Add, LayerNormalization. `layernorm="decomposed"` writes each LayerNormalization the way older exporters
  do (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add).
  Inputs: hidden states (batch, seq, hidden) and an additive attention mask (batch, 1, 1, seq).
- mlp: (64, 1024) -> Gemm 4096 + Relu -> Gemm 1024 (`matmul=True`: MatMul + Add(bias) instead of Gemm).
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


class _Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self._n = 0

    def name(self, base):
        self._n += 1
        return f"{base}_{self._n}"

    def const(self, base, value):
        n = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), n))
        return n

    def weight(self, base, *shape, scale=0.02):
        return self.const(base, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def node(self, op, inputs, base=None, **attrs):
        out = self.name(base or op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=out, **attrs))
        return out

    def model(self, graph_name, inputs, outputs):
        g = helper.make_graph(self.nodes, graph_name, inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=8,
                              producer_name="onnxep-bench")
        onnx.checker.check_model(m)
        return m


def _layernorm(b, x, hidden, layernorm):
    gamma = b.const("ln_gamma", (1.0 + 0.1 * b.rng.standard_normal(hidden)).astype(np.float32))
    beta = b.weight("ln_beta", hidden, scale=0.1)
    if layernorm == "op":
        return b.node("LayerNormalization", [x, gamma, beta], "ln", axis=-1, epsilon=1e-12)
    # opset 17 ReduceMean takes axes as an attribute (an input from opset 18)
    mean = b.node("ReduceMean", [x], "ln_mean", axes=[-1], keepdims=1)
    d = b.node("Sub", [x, mean], "ln_sub")
    sq = b.node("Pow", [d, b.const("two", np.array(2.0, np.float32))], "ln_pow")
    var = b.node("ReduceMean", [sq], "ln_var", axes=[-1], keepdims=1)
    ve = b.node("Add", [var, b.const("eps", np.array(1e-12, np.float32))], "ln_add_eps")
    std = b.node("Sqrt", [ve], "ln_sqrt")
    nx = b.node("Div", [d, std], "ln_div")
    sc = b.node("Mul", [nx, gamma], "ln_scale")
    return b.node("Add", [sc, beta], "ln_shift")


def _linear(b, x, k, n, base):
    y = b.node("MatMul", [x, b.weight(f"{base}_w", k, n)], f"{base}_mm")
    return b.node("Add", [y, b.weight(f"{base}_b", n)], f"{base}_bias")


def _gelu_erf(b, x):
    """x * 0.5 * (1 + Erf(x / sqrt(2))), the node order torch.onnx writes."""
    e = b.node("Erf", [b.node("Div", [x, b.const("sqrt2", np.array(np.sqrt(2.0), np.float32))], "gelu_div")],
               "gelu_erf")
    p = b.node("Add", [e, b.const("one", np.array(1.0, np.float32))], "gelu_add")
    m = b.node("Mul", [x, p], "gelu_mul")
    return b.node("Mul", [m, b.const("half", np.array(0.5, np.float32))], "gelu_half")


def bert_encoder(layers=4, hidden=768, heads=12, seq=128, batch=1, ffn=None, layernorm="op", seed=0):
    """A BERT-like encoder (see the module docstring); inputs "hidden_states" (batch, seq, hidden) float32 and
    "attention_mask" (batch, 1, 1, seq) float32 additive (0 keeps a position, -10000 masks it); output "output"."""
    if hidden % heads:
        raise ValueError(f"hidden {hidden} is not a multiple of heads {heads}")
    ffn = ffn or 4 * hidden
    dh = hidden // heads
    b = _Builder(seed)
    split = b.const("heads_shape", np.array([batch, seq, heads, dh], np.int64))
    merge = b.const("merge_shape", np.array([batch, seq, hidden], np.int64))
    scale = b.const("scale", np.array(1.0 / np.sqrt(dh), np.float32))
    x = "hidden_states"
    for _ in range(layers):
        q = b.node("Transpose", [b.node("Reshape", [_linear(b, x, hidden, hidden, "q"), split])], "q_t",
                   perm=[0, 2, 1, 3])
        k = b.node("Transpose", [b.node("Reshape", [_linear(b, x, hidden, hidden, "k"), split])], "k_t",
                   perm=[0, 2, 3, 1])
        v = b.node("Transpose", [b.node("Reshape", [_linear(b, x, hidden, hidden, "v"), split])], "v_t",
                   perm=[0, 2, 1, 3])
        s = b.node("Mul", [b.node("MatMul", [q, k], "qk"), scale], "qk_scale")
        p = b.node("Softmax", [b.node("Add", [s, "attention_mask"], "qk_mask")], "probs", axis=-1)
        ctx = b.node("Transpose", [b.node("MatMul", [p, v], "pv")], "ctx_t", perm=[0, 2, 1, 3])
        ctx = b.node("Reshape", [ctx, merge], "ctx")
        a = b.node("Add", [_linear(b, ctx, hidden, hidden, "attn_out"), x], "attn_residual")
        x1 = _layernorm(b, a, hidden, layernorm)
        h = _gelu_erf(b, _linear(b, x1, hidden, ffn, "ffn_in"))
        y = b.node("Add", [_linear(b, h, ffn, hidden, "ffn_out"), x1], "ffn_residual")
        x = _layernorm(b, y, hidden, layernorm)
    b.nodes.append(helper.make_node("Identity", [x], ["output"], name="output_identity"))
    return b.model("bert_encoder",
                   [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT, [batch, seq, hidden]),
                    helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, [batch, 1, 1, seq])],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, [batch, seq, hidden])])


def bert_feeds(model_or_shape=(1, 128, 768), masked=16, seed=1):
    """Feeds for bert_encoder: standard-normal hidden states, and a mask hiding the last `masked` positions."""
    batch, seq, hidden = model_or_shape
    rng = np.random.default_rng(seed)
    mask = np.zeros((batch, 1, 1, seq), np.float32)
    if masked:
        mask[..., seq - masked:] = -10000.0
    return {"hidden_states": rng.standard_normal((batch, seq, hidden)).astype(np.float32), "attention_mask": mask}


def mlp(m=64, k=1024, hidden=4096, n=1024, matmul=False, seed=0):
    """(m, k) -> Gemm(hidden) + Relu -> Gemm(n); input "x", output "y"."""
    b = _Builder(seed)
    if matmul:
        h = b.node("Relu", [_linear(b, "x", k, hidden, "fc1")])
        y = _linear(b, h, hidden, n, "fc2")
    else:
        h = b.node("Relu", [b.node("Gemm", ["x", b.weight("fc1_w", k, hidden), b.weight("fc1_b", hidden)])])
        y = b.node("Gemm", [h, b.weight("fc2_w", hidden, n), b.weight("fc2_b", n)])
    b.nodes.append(helper.make_node("Identity", [y], ["y"], name="output_identity"))
    return b.model("mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])])


def mlp_feeds(m=64, k=1024, seed=1):
    return {"x": np.random.default_rng(seed).standard_normal((m, k)).astype(np.float32)}


def suite():
    """[(name, model, feeds)] of the `bench --suite models` table."""
    return [
        ("bert_encoder_4l", bert_encoder(), bert_feeds()),
        ("mlp_gemm", mlp(), mlp_feeds()),
        ("mlp_matmul", mlp(matmul=True), mlp_feeds()),
    ]
