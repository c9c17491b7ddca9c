"""Models written by onnxruntime.quantization run on onnxep's cpu backend alone (session config
"session.disable_cpu_ep_fallback" = "1": no node may go to the reference fallback) and match onnxruntime on the same
quantized model.

Two float models are built here with onnx.helper and seeded random weights (no committed binaries), and three
models exported by torch.onnx are read from the zoo fixtures (tests/models/zoo: BERT from both exporters, a ResNet):
- a BERT-like encoder: 2 layers, hidden 64, 4 heads, FFN 128; MatMul + Add projections, multi-head attention
  (Reshape / Transpose / MatMul / Div / Softmax), residual Add + LayerNormalization, GELU as the Erf pattern;
- a ResNet-like conv net: Conv + Relu, two residual blocks (one strided, with a 1x1 projection shortcut),
  GlobalAveragePool, Flatten, Gemm.
Each is quantized inside the test (tmp_path) with quantize_dynamic (DynamicQuantizeLinear + MatMulInteger /
ConvInteger) and with quantize_static in QuantFormat.QDQ (QuantizeLinear / DequantizeLinear pairs; calibrated on
seeded random inputs through a CalibrationDataReader), per tensor and per channel.

Oracle and tolerance: onnxruntime's CPU provider on the same quantized file, twice.
- With graph optimizations off (ORT_DISABLE_ALL) onnxruntime computes the graph node by node as written, as onnxep
  does. The float ops between the quantization ops (Conv, MatMul, Softmax, LayerNormalization...) differ in the last
  bits (summation order), so a value at a rounding tie of a later QuantizeLinear can land one quantization step
  apart, and that step propagates. Measured (batches 1 and 3): within 1e-6 relative everywhere except the per-channel
  ResNet at batch 3, where 2 of 49152 values of one QuantizeLinear flip by one step (its Conv input differs by
  4e-6) and 1 of the 30 logits ends 0.6% of the peak away. Tolerance: at most 5% of the elements differ by more than
  1e-5 of max |ort|, and none by more than 3% of max |ort| (a few int8 steps).
- With onnxruntime's default optimizations, which rewrite QDQ groups into fused integer kernels and fuse the dynamic
  ones: a different, equally valid rounding order. On the BERT-like QDQ model it moves onnxruntime's own outputs by up
  to ~6% of their peak (mean ~1%) from its unoptimized run. Tolerance: onnxep is no further from the optimized run
  than onnxruntime's unoptimized run is, plus 3% of the peak.
The quantized graphs must really hold the quantization ops (checked), so a pass here exercises onnxep's kernels."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

HIDDEN, HEADS, FFN, LAYERS, SEQ = 64, 4, 128, 2, 16
MAX_REL, MAX_FRAC = 0.03, 0.05


# --------------------------------------------------------------------------------------------------- the models
class _Graph:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.n = 0

    def w(self, shape, scale=None):
        scale = scale if scale is not None else 1.0 / np.sqrt(shape[0] if len(shape) == 2 else np.prod(shape[1:]))
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32))

    def const(self, arr, name=None):
        name = name or f"c{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type, inputs, **attrs):
        self.n += 1
        out = f"{op_type.lower()}_{self.n}"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{op_type}_{self.n}", **attrs))
        return out

    def model(self, inputs, outputs, opset=17):
        g = helper.make_graph(self.nodes, "g", inputs, outputs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
        onnx.checker.check_model(m)
        return m


def bert_like(seed=0):
    """x (batch, SEQ, HIDDEN) float32 -> hidden states (batch, SEQ, HIDDEN) and logits (batch, SEQ, 8)."""
    g = _Graph(seed)
    dh = HIDDEN // HEADS
    heads_shape = g.const(np.array([0, 0, HEADS, dh], np.int64))
    merged_shape = g.const(np.array([0, 0, HIDDEN], np.int64))
    sqrt_dh, sqrt2 = g.const(np.float32(np.sqrt(dh))), g.const(np.float32(np.sqrt(2.0)))
    half, one = g.const(np.float32(0.5)), g.const(np.float32(1.0))

    def linear(x, n_in, n_out):
        return g.op("Add", [g.op("MatMul", [x, g.w((n_in, n_out))]), g.w((n_out,), 0.02)])

    def layer_norm(x):
        return g.op("LayerNormalization", [x, g.const((1 + 0.1 * g.rng.standard_normal(HIDDEN)).astype(np.float32)),
                                          g.w((HIDDEN,), 0.02)], axis=-1, epsilon=1e-5)

    x = "x"
    for _ in range(LAYERS):
        q, k, v = (g.op("Reshape", [linear(x, HIDDEN, HIDDEN), heads_shape]) for _ in range(3))
        q = g.op("Transpose", [q], perm=[0, 2, 1, 3])
        k = g.op("Transpose", [k], perm=[0, 2, 3, 1])
        v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
        probs = g.op("Softmax", [g.op("Div", [g.op("MatMul", [q, k]), sqrt_dh])], axis=-1)
        ctx = g.op("Reshape", [g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), merged_shape])
        x = layer_norm(g.op("Add", [x, linear(ctx, HIDDEN, HIDDEN)]))
        h = linear(x, HIDDEN, FFN)
        gelu = g.op("Mul", [g.op("Mul", [h, half]), g.op("Add", [one, g.op("Erf", [g.op("Div", [h, sqrt2])])])])
        x = layer_norm(g.op("Add", [x, linear(gelu, FFN, HIDDEN)]))
    logits = linear(x, HIDDEN, 8)
    g.nodes.append(helper.make_node("Identity", [x], ["hidden"]))
    g.nodes.append(helper.make_node("Identity", [logits], ["logits"]))
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", SEQ, HIDDEN])],
                   [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", SEQ, HIDDEN]),
                    helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", SEQ, 8])])


def resnet_like(seed=0):
    """x (batch, 3, 32, 32) float32 -> logits (batch, 10)."""
    g = _Graph(seed)

    def conv(x, cin, cout, k=3, stride=1):
        return g.op("Conv", [x, g.w((cout, cin, k, k)), g.w((cout,), 0.05)], kernel_shape=[k, k],
                    pads=[k // 2] * 4, strides=[stride, stride])

    def block(x, cin, cout, stride):
        y = conv(g.op("Relu", [conv(x, cin, cout, stride=stride)]), cout, cout)
        short = x if stride == 1 and cin == cout else conv(x, cin, cout, k=1, stride=stride)
        return g.op("Relu", [g.op("Add", [y, short])])

    x = g.op("Relu", [conv("x", 3, 16)])
    x = block(x, 16, 16, 1)
    x = block(x, 16, 32, 2)
    flat = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    g.nodes.append(helper.make_node("Gemm", [flat, g.w((10, 32)), g.w((10,), 0.05)], ["logits"], transB=1))
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 32, 32])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10])])


MODELS = {"bert": (bert_like, (SEQ, HIDDEN)), "resnet": (resnet_like, (3, 32, 32))}


def _inputs(kind, batch, seed):
    return {"x": np.random.default_rng(seed).standard_normal((batch,) + MODELS[kind][1]).astype(np.float32)}


class _Reader(quantization.CalibrationDataReader):
    """Eight seeded random batches."""

    def __init__(self, kind):
        self.data = iter([_inputs(kind, 2, 100 + i) for i in range(8)])

    def get_next(self):
        return next(self.data, None)


def _quantize(kind, mode, tmp_path):
    src, dst = os.path.join(tmp_path, f"{kind}.onnx"), os.path.join(tmp_path, f"{kind}_{mode}.onnx")
    onnx.save(MODELS[kind][0](), src)
    if mode == "dynamic":
        quantization.quantize_dynamic(src, dst)
    else:   # per channel: weights per output channel (per-axis QuantizeLinear / DequantizeLinear)
        quantization.quantize_static(src, dst, _Reader(kind), quant_format=quantization.QuantFormat.QDQ,
                                     per_channel=mode == "qdq_per_channel")
    return dst


# ------------------------------------------------------------------------------------------------------- tests
def _onnxep(path):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sess = onnxep.InferenceSession(path, so)
    assert [n for n, b in sess.node_assignment.items() if b != "cpu"] == []
    return sess


def _ort(path, optimize):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def _close(got, want, what):
    """The tight bound against the unoptimized onnxruntime run (module docstring)."""
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype, got.shape, want.shape)
    peak = float(np.abs(want).max())
    diff = np.abs(got.astype(np.float64) - want)
    assert diff.max() <= MAX_REL * peak, f"{what}: max |diff| {diff.max():.4g} > {MAX_REL} * {peak:.4g}"
    frac = float(np.mean(diff > 1e-5 * peak))
    assert frac <= MAX_FRAC, f"{what}: {frac:.2%} of the elements differ by more than 1e-5 * {peak:.4g}"


QUANT_OPS = {"dynamic": {"DynamicQuantizeLinear"}, "qdq": {"QuantizeLinear", "DequantizeLinear"},
             "qdq_per_channel": {"QuantizeLinear", "DequantizeLinear"}}
INT_OPS = {("bert", "dynamic"): {"MatMulInteger"}, ("resnet", "dynamic"): {"ConvInteger", "MatMulInteger"}}


@pytest.mark.parametrize("mode", ["dynamic", "qdq", "qdq_per_channel"])
@pytest.mark.parametrize("kind", ["bert", "resnet"])
def test_quantized_model_matches_onnxruntime(kind, mode, tmp_path):
    path = _quantize(kind, mode, tmp_path)
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert QUANT_OPS[mode] | INT_OPS.get((kind, mode), set()) <= ops, ops
    sess = _onnxep(path)
    ref_plain, ref_opt = _ort(path, optimize=False), _ort(path, optimize=True)
    for batch, seed in ((1, 7), (3, 8)):
        feeds = _inputs(kind, batch, seed)
        got, plain, opt = sess.run(None, feeds), ref_plain.run(None, feeds), ref_opt.run(None, feeds)
        for i, (g, p, o) in enumerate(zip(got, plain, opt)):
            _close(g, p, f"{kind} {mode} output {i} vs ort, optimizations off (batch {batch})")
            own_gap = float(np.abs(p.astype(np.float64) - o).max())
            gap = float(np.abs(g.astype(np.float64) - o).max())
            assert gap <= own_gap + MAX_REL * float(np.abs(o).max()), \
                f"{kind} {mode} output {i} vs ort, default optimizations (batch {batch}): {gap:.4g} (ort's own: " \
                f"{own_gap:.4g})"


@pytest.mark.parametrize("kind", ["bert", "resnet"])
def test_quantization_changes_the_float_model(kind, tmp_path):
    """The quantized model is not the float one (the comparison above would be vacuous otherwise): its outputs move
    by more than float rounding, but stay near the float model's."""
    path = _quantize(kind, "qdq", tmp_path)
    feeds = _inputs(kind, 2, 9)
    q = _onnxep(path).run(None, feeds)[0]
    f = _onnxep(os.path.join(tmp_path, f"{kind}.onnx")).run(None, feeds)[0]
    rel = np.abs(q - f).max() / np.abs(f).max()
    assert 1e-4 < rel < 0.5, rel


# ------------------------------------------------------------------------- models exported by torch.onnx (fixtures)
ZOO = os.path.join(os.path.dirname(__file__), "zoo")
TORCH_EXPORTED = ("bert_1layer.dynamo", "bert_1layer.torchscript", "resnet_tiny.dynamo")


def _zoo_feeds(name):
    data = np.load(os.path.join(ZOO, f"{name}.npz"))
    return {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}


class _FeedsReader(quantization.CalibrationDataReader):
    """The fixture's stored inputs, then two perturbed copies of its float inputs (integer inputs: token ids, masks,
    kept as they are)."""

    def __init__(self, feeds):
        rng = np.random.default_rng(5)
        batches = [feeds] + [{k: (v + 0.1 * rng.standard_normal(v.shape)).astype(v.dtype) if v.dtype.kind == "f"
                              else v for k, v in feeds.items()} for _ in range(2)]
        self.data = iter(batches)

    def get_next(self):
        return next(self.data, None)


@pytest.mark.parametrize("mode", ["dynamic", "qdq"])
@pytest.mark.parametrize("name", TORCH_EXPORTED)
def test_torch_exported_model_quantized_matches_onnxruntime(name, mode, tmp_path):
    """A BERT encoder and a ResNet exported by torch.onnx (tests/models/zoo, written by bench/zoo/export.py from
    transformers / torch models; both exporters for BERT), quantized here with quantize_dynamic and with
    quantize_static in QDQ format: every node on the cpu backend, outputs within the module's tolerance of
    onnxruntime's unoptimized run of the same quantized file (oracle: onnxruntime)."""
    src, dst = os.path.join(ZOO, f"{name}.onnx"), os.path.join(tmp_path, f"{name}.{mode}.onnx")
    feeds = _zoo_feeds(name)
    if mode == "dynamic":
        quantization.quantize_dynamic(src, dst)
    else:
        quantization.quantize_static(src, dst, _FeedsReader(feeds), quant_format=quantization.QuantFormat.QDQ)
    ops = {n.op_type for n in onnx.load(dst).graph.node}
    assert QUANT_OPS[mode] <= ops, ops
    got, want = _onnxep(dst).run(None, feeds), _ort(dst, optimize=False).run(None, feeds)
    for i, (g, w) in enumerate(zip(got, want)):
        if w.dtype.kind == "f":
            _close(g, w, f"{name} {mode} output {i}")
        else:
            np.testing.assert_array_equal(g, w)
