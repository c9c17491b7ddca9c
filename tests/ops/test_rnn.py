"""RNN, GRU and LSTM on the cpu backend (no fallback).

Oracles: onnxruntime for float32, layout 0 (directions, sequence_lens with a zero-length row, initial states, clip,
every activation with activation_alpha / activation_beta, peepholes, input_forget, linear_before_reset); layout 1 is
checked against onnxruntime run on the layout-0 model with transposed inputs and outputs (onnxruntime refuses layout 1).
float64 / float16 and the opset-1 / 3 forms against onnx.reference (onnxruntime has no double RNN kernels;
onnx.reference ignores clip, input_forget and sequence_lens, so those are not asked of it); bfloat16 (opset 22) against
onnxruntime's float32 result, rounded. onnxruntime gives zeros for a zero-length sequence's Y_h / Y_c; onnxep does the
same."""
import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests._util import cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort, run_reference

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
N_ACTS = {"RNN": 1, "GRU": 2, "LSTM": 3}
ACTS = ["Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu",
        "Softsign", "Softplus"]


def build(op, T=5, B=3, I=4, H=6, direction="forward", layout=0, seq=None, init=True, bias=True, peep=False,
          attrs=None, dtype=np.float32, opset=22, outputs=(True, True, True), scale=0.5, seed=0, dynamic=False):
    G, D = GATES[op], 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, B, I) if layout == 0 else (B, T, I)).astype(dtype)
    feeds, inits, names = {"X": x}, {}, ["X", "W", "R"]
    inits["W"] = (rng.standard_normal((D, G * H, I)) * scale).astype(dtype)
    inits["R"] = (rng.standard_normal((D, G * H, H)) * scale).astype(dtype)
    if bias:
        inits["B"] = (rng.standard_normal((D, 2 * G * H)) * scale).astype(dtype)
    names.append("B" if bias else "")
    if seq is not None:
        feeds["sl"] = np.array(seq, np.int32)
    names.append("sl" if seq is not None else "")
    hshape = (D, B, H) if layout == 0 else (B, D, H)
    if init:
        feeds["h0"] = rng.standard_normal(hshape).astype(dtype)
    names.append("h0" if init else "")
    if op == "LSTM":
        if init:
            feeds["c0"] = rng.standard_normal(hshape).astype(dtype)
        names.append("c0" if init else "")
        if peep:
            inits["P"] = rng.standard_normal((D, 3 * H)).astype(dtype)
        names.append("P" if peep else "")
    while names[-1] == "":
        names.pop()
    outs = [n if want else "" for n, want in zip(["Y", "Y_h", "Y_c"][:2 if op != "LSTM" else 3], outputs)]
    kw = dict(hidden_size=H, direction=direction, **(attrs or {}))
    if opset >= 14:
        kw["layout"] = layout
    node = helper.make_node(op, names, outs, **kw)
    shapes = {k: [f"{k}{i}" for i in range(v.ndim)] for k, v in feeds.items()} if dynamic else None
    m = make_model([node], feeds, [o for o in outs if o], opset=opset, initializers=inits, input_shapes=shapes)
    return m, feeds


def run_cpu(m, feeds):
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    return got


def close(got, want, rtol=1e-4, atol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("seq", [None, [5, 2, 0], [3, 5, 1]])
@pytest.mark.parametrize("opset", [7, 14, 22])
def test_directions_sequence_lens(op, direction, seq, opset):
    m, f = build(op, direction=direction, seq=seq, opset=opset)
    close(run_cpu(m, f), run_ort(m, f))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize("init,bias", [(False, False), (False, True), (True, False)])
def test_optional_inputs(op, direction, init, bias):
    m, f = build(op, direction=direction, init=init, bias=bias)
    close(run_cpu(m, f), run_ort(m, f))


@pytest.mark.parametrize("op,which", [(op, w) for op in ("RNN", "GRU", "LSTM")
                                      for w in ((False, True, True), (True, False, False), (False, False, True))
                                      if op == "LSTM" or any(w[:2])])
def test_optional_outputs(op, which):
    m, f = build(op, direction="bidirectional", seq=[4, 5, 2], outputs=which)
    close(run_cpu(m, f), run_ort(m, f))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("j", range(len(ACTS)))
@pytest.mark.parametrize("alphas", [None, [0.3], [0.3, 0.6, 0.9, 1.2, 0.4, 0.2]])
def test_activations(op, j, alphas):
    D = 2
    acts = [ACTS[(j + i * 3) % len(ACTS)] for i in range(N_ACTS[op] * D)]
    attrs = {"activations": acts}
    if alphas:
        attrs["activation_alpha"] = alphas
        attrs["activation_beta"] = [0.5, 0.25, 0.7, 0.1, 0.2, 0.3][:len(alphas) + 1]
    # two steps, small weights: unbounded activations (Relu, Affine, Softplus as gates) stay finite
    m, f = build(op, T=2, direction="bidirectional", attrs=attrs, scale=0.3)
    close(run_cpu(m, f), run_ort(m, f))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_clip(op, direction):
    m, f = build(op, direction=direction, attrs={"clip": 0.4}, scale=1.0, seq=[5, 3, 4])
    close(run_cpu(m, f), run_ort(m, f))


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("attrs", [{}, {"input_forget": 1}, {"input_forget": 1, "clip": 0.5}])
def test_lstm_peepholes_input_forget(direction, attrs):
    m, f = build("LSTM", direction=direction, peep=True, attrs=attrs, seq=[5, 2, 4])
    close(run_cpu(m, f), run_ort(m, f))
    m, f = build("LSTM", direction=direction, attrs=attrs)
    close(run_cpu(m, f), run_ort(m, f))


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("seq", [None, [5, 2, 0]])
def test_gru_linear_before_reset(direction, bias, seq):
    m, f = build("GRU", direction=direction, bias=bias, seq=seq, attrs={"linear_before_reset": 1})
    close(run_cpu(m, f), run_ort(m, f))


def _to_layout1(m, feeds):
    return m, {k: (v.transpose(1, 0, 2) if k != "sl" else v) for k, v in feeds.items()}


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("seq", [None, [5, 2, 4]])
def test_layout_1(op, direction, seq):
    """layout 1 against onnxruntime's layout-0 run of the same data (onnxruntime refuses batchwise layout)."""
    m0, f0 = build(op, direction=direction, seq=seq, layout=0, peep=op == "LSTM")
    want = run_ort(m0, f0)
    m1, _ = build(op, direction=direction, seq=seq, layout=1, peep=op == "LSTM")
    f1 = {k: (v.transpose(1, 0, 2).copy() if k != "sl" else v) for k, v in f0.items()}
    got = run_cpu(m1, f1)
    close([got[0].transpose(1, 2, 0, 3)] + [g.transpose(1, 0, 2) for g in got[1:]], want)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-10), (np.float16, 1e-2)])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_float64_float16(op, dtype, tol, direction):
    m, f = build(op, direction=direction, dtype=dtype, opset=14)
    close(run_cpu(m, f), run_reference(m, f), rtol=tol, atol=tol)


@pytest.mark.parametrize("op,opset", [("GRU", 1), ("GRU", 3), ("LSTM", 1)])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_old_opsets(op, opset, direction):
    attrs = {"linear_before_reset": 1} if opset == 3 else {}
    m, f = build(op, direction=direction, opset=opset, attrs=attrs)
    close(run_cpu(m, f), run_reference(m, f), rtol=1e-5, atol=1e-6)


def test_rnn_opset1_matches_opset7():
    """onnx.reference and onnxruntime lack RNN-1; its semantics are RNN-7's (output_sequence: Y is optional)."""
    m1, f = build("RNN", direction="bidirectional", opset=1, seq=[5, 1, 3])
    m7, _ = build("RNN", direction="bidirectional", opset=7, seq=[5, 1, 3])
    close(run_cpu(m1, f), run_ort(m7, f))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_bfloat16(op):
    m, f = build(op, direction="bidirectional", seq=[5, 2, 4])
    want = run_ort(m, f)
    mb = onnx.ModelProto()
    mb.CopyFrom(m)
    g = mb.graph
    for vi in list(g.input) + list(g.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.BFLOAT16
    for init in g.initializer:
        a = onnx.numpy_helper.to_array(init).astype(ml_dtypes.bfloat16)
        init.CopyFrom(onnx.numpy_helper.from_array(a, init.name))
    fb = {k: (v.astype(ml_dtypes.bfloat16) if v.dtype == np.float32 else v) for k, v in f.items()}
    got = run_cpu(mb, fb)
    # the oracle on the same bfloat16-rounded data, in float32
    f32 = {k: (v.astype(np.float32) if v.dtype == ml_dtypes.bfloat16 else v) for k, v in fb.items()}
    m32 = onnx.ModelProto()
    m32.CopyFrom(m)
    for init in m32.graph.initializer:
        a = onnx.numpy_helper.to_array(init).astype(ml_dtypes.bfloat16).astype(np.float32)
        init.CopyFrom(onnx.numpy_helper.from_array(a, init.name))
    want = run_ort(m32, f32)
    for gv, wv in zip(got, want):
        assert gv.dtype == ml_dtypes.bfloat16 and gv.shape == wv.shape
        np.testing.assert_allclose(gv.astype(np.float32), wv, rtol=2e-2, atol=2e-2)


def test_bad_inputs_then_session_still_works():
    m, f = build("LSTM", direction="bidirectional", dynamic=True)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    want = sess.run(None, f)
    bad = dict(f, h0=f["h0"][:, :2])
    with pytest.raises(InvalidArgument, match=r"LSTM node .*initial_h must have shape \(2, 3, 6\), got \(2, 2, 6\)"):
        sess.run(None, bad)
    with pytest.raises(InvalidArgument, match=r"W must have shape \(2, 24, 5\)"):   # X's input_size 5, W's 4
        sess.run(None, dict(f, X=np.zeros((5, 3, 5), np.float32)))
    close(sess.run(None, f), want)


def test_bad_sequence_lens():
    m, f = build("GRU", seq=[5, 2, 1], dynamic=True)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"sequence_lens must be in \[0, 5\]"):
        sess.run(None, dict(f, sl=np.array([6, 1, 1], np.int32)))
    close(sess.run(None, f), run_ort(m, f))


def test_output_size_checked_before_allocating():
    """Y is [T, D, B, H]: with input_size 0, X costs nothing while Y would need 4 TiB."""
    T, B, H = 1 << 20, 1 << 10, 1 << 10
    W = np.zeros((1, H, 0), np.float32)
    R = np.zeros((1, H, H), np.float32)
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=H)
    m = make_model([node], {"X": np.zeros((1, 1, 0), np.float32)}, ["Y"], opset=14, initializers={"W": W, "R": R},
                   input_shapes={"X": ["T", "B", 0]})
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(Fail, match="RNN node .* output Y: shape"):
        sess.run(None, {"X": np.zeros((T, B, 0), np.float32)})
    y, = sess.run(None, {"X": np.zeros((2, 1, 0), np.float32)})
    assert y.shape == (2, 1, 1, H) and not y.any()


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("T,B", [(0, 3), (4, 0)])
def test_empty_sequence_or_batch(op, T, B):
    """No time step: Y is empty and Y_h / Y_c are zeros, as onnxruntime's RNN gives (its GRU / LSTM abort the
    process on T = 0, so RNN is the oracle for all three); no batch row: every output empty."""
    m, f = build(op, T=T, B=B, direction="bidirectional", dynamic=True)
    got = run_cpu(m, f)
    assert got[0].shape == (T, 2, B, 6)
    for g in got[1:]:
        assert g.shape == (2, B, 6) and not g.any()
    if op == "RNN":
        close(got, run_ort(m, f))
