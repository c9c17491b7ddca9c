"""DFT, STFT, Hann / Hamming / BlackmanWindow and MelWeightMatrix on the cpu backend (no fallback).

Oracle: onnxruntime for float32 / float64 (every axis, dft_length, inverse / onesided combination the spec allows,
windows in every output type, mel matrices); onnx.reference for float16 / bfloat16 outputs and float64 mel edges
(onnxruntime has no such kernels, or cannot return bfloat16 to numpy); numpy.fft for STFT without window and
frame_length (onnxruntime refuses it, the spec defaults frame_length to the signal's length); onnx.reference for the
inverse one-sided DFT when dft_length does not match the
one-sided input (n != dft_length // 2 + 1): there onnxruntime's result is neither numpy's irfft nor consistent between
sizes, while onnx.reference (and onnxep) take numpy's irfft (the first dft_length // 2 + 1 bins, zero-padded)."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import Fail, InvalidArgument
from tests._util import cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort, run_reference


def run_cpu(m, feeds):
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    return got


def close(got, want, tol=1e-4):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol, equal_nan=True)


def dynamic(feeds):
    return {k: [f"{k}{i}" for i in range(np.ndim(v))] for k, v in feeds.items()}


# ------------------------------------------------------------------------------------------------------------ DFT
def dft_model(x, opset, axis, inverse, onesided, n=None):
    feeds, ins = {"x": x}, ["x"]
    if n is not None:
        feeds["n"] = np.array(n, np.int64)
    ins.append("n" if n is not None else "")
    kw = dict(inverse=inverse, onesided=onesided)
    if opset == 17:
        kw["axis"] = axis
    elif axis is not None:
        feeds["a"] = np.array(axis, np.int64)
        ins.append("a")
    while ins[-1] == "":
        ins.pop()
    return make_model([helper.make_node("DFT", ins, ["y"], **kw)], feeds, ["y"], opset=opset,
                      input_shapes=dynamic(feeds)), feeds


# (last dim, inverse, onesided): the combinations the spec allows
DFT_KINDS = [(1, 0, 0), (2, 0, 0), (1, 1, 0), (2, 1, 0), (1, 0, 1), (2, 1, 1)]


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("last,inverse,onesided", DFT_KINDS)
@pytest.mark.parametrize("axis", [1, 2, -2, -3])
@pytest.mark.parametrize("n", [None, 5, 12, 16])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dft(opset, last, inverse, onesided, axis, n, dtype):
    rng = np.random.default_rng(abs(axis) * 7 + (n or 0))
    x = rng.standard_normal((2, 10, 12, last)).astype(dtype)
    m, f = dft_model(x, opset, axis, inverse, onesided, n)
    got = run_cpu(m, f)
    tol = 1e-4 if dtype == np.float32 else 1e-7     # onnxruntime's float64 DFT is good to ~1.5e-8
    if inverse and onesided and n is not None:
        close(got, run_reference(m, f), tol)     # onnxruntime differs here (see the module docstring)
        bins = n // 2 + 1
        if bins <= x.shape[axis]:
            # the spec's intended input, n // 2 + 1 bins: onnxruntime agrees
            xs = np.take(x, np.arange(bins), axis=axis)
            m2, f2 = dft_model(xs, opset, axis, inverse, onesided, n)
            close(run_cpu(m2, f2), run_ort(m2, f2), tol)
    else:
        close(got, run_ort(m, f), tol)


@pytest.mark.parametrize("opset", [17, 20])
def test_dft_default_axis(opset):
    x = np.random.default_rng(0).standard_normal((3, 4, 6, 2)).astype(np.float32)
    m, f = dft_model(x, opset, None, 0, 0)
    close(run_cpu(m, f), run_ort(m, f))


@pytest.mark.parametrize("last,inverse,onesided", DFT_KINDS)
def test_dft_float16(last, inverse, onesided):
    x = np.random.default_rng(1).standard_normal((2, 8, last)).astype(np.float16)
    m, f = dft_model(x, 20, 1, inverse, onesided)
    close(run_cpu(m, f), run_reference(m, f), 2e-2)


def test_dft_bad_axis_then_session_works():
    x = np.random.default_rng(2).standard_normal((2, 8, 2)).astype(np.float32)
    m, f = dft_model(x, 20, 1, 0, 0, n=8)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"DFT node .*axis must be in \[-3, -2\] or \[0, 1\] .* got 2"):
        sess.run(None, dict(f, a=np.array(2, np.int64)))
    with pytest.raises(InvalidArgument, match="dft_length must be >= 1, got 0"):
        sess.run(None, dict(f, n=np.array(0, np.int64)))
    with pytest.raises(InvalidArgument, match="last dimension of the input must be 1 .* or 2"):
        sess.run(None, dict(f, x=np.zeros((2, 8, 3), np.float32)))
    close(sess.run(None, f), run_ort(m, f))


def test_dft_length_size_checked():
    """The output's axis is dft_length, from the input's data: 2**40 points are refused before allocating."""
    x = np.ones((1, 4, 1), np.float32)
    m, f = dft_model(x, 20, 1, 0, 0, n=1 << 40)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(Fail, match="DFT node .*bytes"):
        sess.run(None, f)
    got = sess.run(None, dict(f, n=np.array(6, np.int64)))[0]
    assert got.shape == (1, 6, 2)


# ----------------------------------------------------------------------------------------------------------- STFT
def stft_model(x, step, window=None, flen=None, onesided=None):
    feeds, ins = {"x": x, "s": np.array(step, np.int64)}, ["x", "s"]
    if window is not None:
        feeds["w"] = window
    ins.append("w" if window is not None else "")
    if flen is not None:
        feeds["fl"] = np.array(flen, np.int64)
        ins.append("fl")
    while ins[-1] == "":
        ins.pop()
    kw = {} if onesided is None else {"onesided": onesided}
    return make_model([helper.make_node("STFT", ins, ["y"], **kw)], feeds, ["y"], opset=17,
                      input_shapes=dynamic(feeds)), feeds


@pytest.mark.parametrize("last,onesided", [(0, None), (0, 0), (0, 1), (1, None), (1, 0), (1, 1), (2, 0)])
@pytest.mark.parametrize("window,flen", [(16, None), (16, 16), (None, 16), (15, None)])
@pytest.mark.parametrize("step", [1, 5, 8])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stft(last, onesided, window, flen, step, dtype):
    rng = np.random.default_rng(step)
    x = rng.standard_normal((2, 64, last) if last else (2, 64)).astype(dtype)
    w = rng.uniform(0, 1, window).astype(dtype) if window else None
    m, f = stft_model(x, step, w, flen, onesided)
    close(run_cpu(m, f), run_ort(m, f), 1e-4 if dtype == np.float32 else 1e-7)


def test_stft_whole_signal_frame():
    """No window and no frame_length: one frame of the whole signal (onnxruntime refuses this form)."""
    x = np.random.default_rng(3).standard_normal((2, 20, 1)).astype(np.float32)
    m, f = stft_model(x, 4)
    got = run_cpu(m, f)
    assert got[0].shape == (2, 1, 11, 2)
    want = np.fft.rfft(x[:, :, 0], axis=1)[:, None]
    np.testing.assert_allclose(got[0][..., 0], want.real, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got[0][..., 1], want.imag, rtol=1e-4, atol=1e-4)


def test_stft_float16():
    x = np.random.default_rng(4).standard_normal((1, 32, 1)).astype(np.float16)
    m, f = stft_model(x, 4, np.hanning(8).astype(np.float16))
    close(run_cpu(m, f), run_reference(m, f), 3e-2)


def test_stft_bad_inputs_then_session_works():
    x = np.random.default_rng(5).standard_normal((1, 32, 1)).astype(np.float32)
    m, f = stft_model(x, 4, np.ones(8, np.float32), 8)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"STFT node .*window has 6 points but frame_length is 8"):
        sess.run(None, dict(f, w=np.ones(6, np.float32)))
    with pytest.raises(InvalidArgument, match="frame_step must be >= 1"):
        sess.run(None, dict(f, s=np.array(0, np.int64)))
    with pytest.raises(InvalidArgument, match=r"frame_length must be in \[1, 32\]"):
        sess.run(None, dict(f, fl=np.array(40, np.int64), w=np.ones(40, np.float32)))
    close(sess.run(None, f), run_ort(m, f))


# -------------------------------------------------------------------------------------------------------- windows
OUT_TYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32,
             TensorProto.UINT8, TensorProto.INT8, TensorProto.UINT16, TensorProto.INT16, TensorProto.UINT32,
             TensorProto.UINT64]


def window_model(op, size, periodic, dt, size_type=np.int64):
    feeds = {"n": np.array(size, size_type)}
    node = helper.make_node(op, ["n"], ["y"], periodic=periodic, output_datatype=dt)
    return make_model([node], feeds, ["y"], opset=17), feeds


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
@pytest.mark.parametrize("size", [0, 1, 2, 7, 10, 257])
@pytest.mark.parametrize("dt", OUT_TYPES)
def test_windows(op, periodic, size, dt):
    m, f = window_model(op, size, periodic, dt, np.int32 if size % 2 else np.int64)
    want = run_ort(m, f)
    close(run_cpu(m, f), want, 1e-7 if dt != TensorProto.FLOAT16 else 1e-3)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
def test_windows_bfloat16(op):
    m, f = window_model(op, 16, 1, TensorProto.BFLOAT16)
    got = run_cpu(m, f)[0]
    assert got.dtype == ml_dtypes.bfloat16
    want = run_ort(window_model(op, 16, 1, TensorProto.FLOAT)[0], f)[0]
    np.testing.assert_array_equal(got, want.astype(ml_dtypes.bfloat16))


def test_window_size_checked_then_session_works():
    m, f = window_model("HannWindow", 8, 1, TensorProto.DOUBLE)
    m.graph.input[0].type.tensor_type.ClearField("shape")    # any rank
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(Fail, match="HannWindow node .*bytes"):
        sess.run(None, {"n": np.array(1 << 40, np.int64)})
    with pytest.raises(InvalidArgument, match="HannWindow node .*size must be >= 0, got -3"):
        sess.run(None, {"n": np.array(-3, np.int64)})
    with pytest.raises(InvalidArgument, match="size must be a scalar"):
        sess.run(None, {"n": np.array([3, 4], np.int64)})
    close(sess.run(None, f), run_ort(m, f), 1e-12)


# ---------------------------------------------------------------------------------------------- MelWeightMatrix
def mel_model(n_mel, dft_length, rate, lower, upper, dt=TensorProto.FLOAT, itype=np.int32, ftype=np.float32):
    feeds = {"nm": np.array(n_mel, itype), "dl": np.array(dft_length, itype), "sr": np.array(rate, itype),
             "lo": np.array(lower, ftype), "hi": np.array(upper, ftype)}
    node = helper.make_node("MelWeightMatrix", list(feeds), ["y"], output_datatype=dt)
    return make_model([node], feeds, ["y"], opset=17, input_shapes=dynamic(feeds)), feeds


MEL_CASES = [(8, 16, 8192, 0, 4096), (20, 512, 16000, 20, 8000), (5, 64, 8000, 300, 4000), (1, 10, 100, 0, 50),
             (10, 256, 22050, 0, 11025), (0, 16, 100, 0, 50), (40, 400, 16000, 0, 8000), (3, 7, 1000, 100, 200)]


@pytest.mark.parametrize("case", MEL_CASES)
@pytest.mark.parametrize("dt", [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32])
@pytest.mark.parametrize("itype,ftype", [(np.int32, np.float32), (np.int64, np.float64)])
def test_mel_weight_matrix(case, dt, itype, ftype):
    m, f = mel_model(*case, dt=dt, itype=itype, ftype=ftype)
    oracle = run_ort if ftype == np.float32 else run_reference   # onnxruntime: float edges only
    close(run_cpu(m, f), oracle(m, f), 1e-6)


@pytest.mark.parametrize("case", MEL_CASES[:4])
def test_mel_weight_matrix_float16(case):
    m, f = mel_model(*case, dt=TensorProto.FLOAT16)
    close(run_cpu(m, f), run_reference(m, f), 1e-3)


def test_mel_bad_inputs_and_size_check():
    m, f = mel_model(8, 16, 8192, 0, 4096)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match="MelWeightMatrix node .*sample_rate > 0"):
        sess.run(None, dict(f, sr=np.array(0, np.int32)))
    with pytest.raises(InvalidArgument, match="outside the 9 bins"):
        sess.run(None, dict(f, hi=np.array(9000, np.float32)))     # above the sample rate: bins past the spectrum
    with pytest.raises(Fail, match="MelWeightMatrix node .*bytes"):
        sess.run(None, dict(f, nm=np.array(1 << 20, np.int32), dl=np.array(1 << 30, np.int32)))
    close(sess.run(None, f), run_ort(m, f), 1e-6)


@pytest.mark.parametrize("last,inverse,onesided", DFT_KINDS)
def test_dft_bfloat16(last, inverse, onesided):
    """bfloat16 computes in float32: the float32 result of the same (bfloat16-rounded) data, rounded once."""
    x32 = np.random.default_rng(6).standard_normal((2, 8, last)).astype(ml_dtypes.bfloat16).astype(np.float32)
    m, f = dft_model(x32, 20, 1, inverse, onesided)
    want = run_ort(m, f)[0].astype(ml_dtypes.bfloat16)
    for vi in list(m.graph.input[:1]) + list(m.graph.output):
        vi.type.tensor_type.elem_type = TensorProto.BFLOAT16
    got = run_cpu(m, dict(f, x=x32.astype(ml_dtypes.bfloat16)))[0]
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=1e-2)
