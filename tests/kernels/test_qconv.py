"""Channel-last quantized conv (onnxep/_native/qconv.h via _k_qconv.pxi, prepared by onnxep/ops/quant/_qconv.py).
Oracle: a numpy integer conv (int64 products of x - x_zp and w - w_zp summed per tap, wrapped to int32, plus the int32
bias) requantized by onnxep.ops.quant._common.requantize (float32(acc) * multiplier, round half to even, + y_zp,
saturate: MLAS's), then clamped to [qlo, qhi] -- exact equality, on every ISA variant this machine runs and every
int8 GEMM micro-kernel it can run (generic, avx2, vnni forced)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels
from onnxep.ops.quant import _common, _qconv

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
CASES = [(v, k) for v, m in VARIANTS.items() for k in ("generic", "avx2", "vnni") if m.qgemm_have(k)]


@pytest.fixture(params=CASES, ids=[f"{v}-{k}" for v, k in CASES])
def mod(request, monkeypatch):
    m = VARIANTS[request.param[0]]
    m.qgemm_force(request.param[1])
    monkeypatch.setattr(_qconv, "_kernels", m)
    yield m
    m.qgemm_force(None)


def _oracle(x, xz, w, wz, bias, group, strides, pads, dil, mult, yz, y_dt, qlo, qhi):
    """x NHWC, w (M, C/g, kh, kw) -> y NHWC."""
    n, h, wd, c = x.shape
    m, cg, kh, kw = w.shape
    xc = np.zeros((n, h + pads[0] + pads[2], wd + pads[1] + pads[3], c), np.int64)
    xc[:, pads[0]:pads[0] + h, pads[1]:pads[1] + wd] = x.astype(np.int64) - xz
    wc = w.astype(np.int64) - np.asarray(wz, np.int64).reshape(-1, 1, 1, 1)
    oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    acc = np.zeros((n, oh, ow, m), np.int64)
    for ki in range(kh):
        for kj in range(kw):
            win = xc[:, ki * dil[0]:ki * dil[0] + strides[0] * (oh - 1) + 1:strides[0],
                     kj * dil[1]:kj * dil[1] + strides[1] * (ow - 1) + 1:strides[1]]
            if group == 1:
                acc += win @ wc[:, :, ki, kj].T
            else:
                acc += win * wc[:, 0, ki, kj]
    acc = acc.astype(np.int32)
    if bias is not None:
        acc = (acc.astype(np.int64) + bias).astype(np.int32)
    y = _common.requantize(acc, np.asarray(mult, np.float32), np.asarray(yz, y_dt), np.dtype(y_dt))
    return np.clip(y, qlo, qhi).astype(y_dt)


CONVS = [  # (N, H, W, C, M, kh, kw, strides, pads (t, l, b, r), dilations, group)
    (1, 5, 6, 3, 5, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), 1),
    (2, 7, 5, 17, 33, 1, 1, (2, 2), (0, 0, 0, 0), (1, 1), 1),
    (1, 9, 9, 3, 16, 7, 7, (2, 2), (3, 3, 3, 3), (1, 1), 1),
    (1, 8, 7, 13, 19, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (2, 6, 9, 64, 130, 3, 3, (2, 1), (1, 0, 2, 1), (1, 2), 1),
    (1, 13, 11, 8, 200, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (1, 7, 8, 21, 21, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 21),
    (2, 9, 7, 300, 300, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 300),
    (1, 6, 6, 5, 5, 5, 5, (1, 2), (2, 2, 2, 2), (1, 1), 5),
    (1, 9, 9, 20, 20, 3, 3, (1, 1), (2, 2, 2, 2), (2, 2), 20),      # dilated depthwise
    (1, 10, 10, 7, 7, 9, 9, (1, 1), (4, 4, 4, 4), (1, 1), 7),       # 81 taps: the depthwise loop without a tap list
]


@pytest.mark.parametrize("conv", CONVS, ids=[f"c{i}" for i in range(len(CONVS))])
@pytest.mark.parametrize("x_dt,w_dt,y_dt", [(np.int8, np.int8, np.int8), (np.uint8, np.int8, np.uint8),
                                            (np.uint8, np.uint8, np.int8), (np.int8, np.uint8, np.uint8)])
@pytest.mark.parametrize("per_channel", [False, True, "symmetric"])      # symmetric: per-channel scales, zero w_zp
def test_qconv_exact(mod, conv, x_dt, w_dt, y_dt, per_channel):
    n, h, wd, c, m, kh, kw, strides, pads, dil, group = conv
    rng = np.random.default_rng(n * 1000 + h * 100 + c + m)
    xi, wi, yi = np.iinfo(x_dt), np.iinfo(w_dt), np.iinfo(y_dt)
    x = rng.integers(xi.min, xi.max + 1, (n, h, wd, c)).astype(x_dt)
    w = rng.integers(wi.min, wi.max + 1, (m, c // group, kh, kw)).astype(w_dt)
    x.reshape(-1, c)[0] = xi.max                 # extremes (vpmaddubsw would saturate its pair sums)
    w[0] = wi.min
    xz = np.array(rng.integers(xi.min, xi.max + 1), x_dt)
    wz = rng.integers(wi.min, wi.max + 1, m).astype(w_dt) if per_channel is True \
        else np.zeros(m, w_dt) if per_channel == "symmetric" else np.array(wi.min // 2 + 1, w_dt)
    bias = rng.integers(-50000, 50000, m).astype(np.int32)
    xs = np.float32(0.02)
    ws = (rng.uniform(0.001, 0.01, m) if per_channel else np.array(0.004)).astype(np.float32)
    ys = np.float32(0.5 * kh * kw * c * 0.02 * 0.004 * 40)
    yz = np.array(rng.integers(yi.min, yi.max + 1), y_dt)
    prep = _qconv.Prepared(w, wz, ws, np.asarray(xs), np.asarray(ys), bias, group)
    oh = (h + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) // strides[1] + 1
    lo, hi = _qconv.RANGES[np.dtype(y_dt)]
    for qlo, qhi in ((lo, hi), (int(yz), hi), (lo + 3, hi - 5)):      # plain, a fused Relu, a Clip
        y = np.empty((n, oh, ow, m), y_dt)
        p = prep.params(x_dt, y_dt, x.shape, (oh, ow), strides, pads[:2], dil, int(xz))
        _qconv.run(prep, x, p, y, yz, qlo, qhi, 2)
        want = _oracle(x, xz, w, wz, bias, group, strides, pads, dil, prep.mult, yz, y_dt, qlo, qhi)
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("group", [1, 4])
def test_qconv_requant_ties_and_saturation(mod, group):
    """Multipliers 0.5 / 0.25 put exact halves in the products (round half to even), large ones saturate."""
    rng = np.random.default_rng(group)
    c = m = 4 if group != 1 else 6
    x = rng.integers(-128, 128, (1, 5, 5, c)).astype(np.int8)
    w = rng.integers(-128, 128, (m, c // group, 3, 3)).astype(np.int8)
    bias = rng.integers(-7, 8, m).astype(np.int32)
    for ws in (np.full(m, 0.5, np.float32), np.array([0.25, 0.5, 1.5, 2.5, 1000.0, 0.75][:m], np.float32)):
        prep = _qconv.Prepared(w, None, ws, np.asarray(np.float32(1)), np.asarray(np.float32(1)), bias, group)
        y = np.empty((1, 5, 5, m), np.int8)
        p = prep.params(np.int8, np.int8, x.shape, (5, 5), (1, 1), (1, 1), (1, 1), 0)
        _qconv.run(prep, x, p, y, 3, -128, 127, 2)
        want = _oracle(x, np.int8(0), w, 0, bias, group, (1, 1), (1, 1, 1, 1), (1, 1), prep.mult, 3, np.int8,
                       -128, 127)
        np.testing.assert_array_equal(y, want)
        assert ws.max() < 100 or (y == 127).any() and (y == -128).any()
