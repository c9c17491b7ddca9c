"""The convs' measured break-even (par_calibrate / conv_threads in _k_gemm.pxi): below CONV_MT_FLOPS a conv stays on
one thread, above it splits; and the splits of small outputs into an item per thread (small_split: sgemm_packed_ex's
row blocks, _dconv_blocks_mt, the direct path's folded pointwise rows). Each conv kernel that takes the rule
(channel-last direct / packed / winograd, channel-last and NCHW depthwise, NCHW packed, int8 QLinearConv, bf16) is run
with the break-even forced to 0 (every call that can split does; small splits on, then off) and to 1e30 (none does)
on the small shapes of the zoo's 64x64 convnets, on every ISA variant.
Oracles: the float64 numpy direct conv of test_conv.py (fp32), the exact numpy integer conv of test_qconv.py (int8),
the bf16 error bound of tests/ops/test_bconv_nhwc.py; and the split result equals the one-thread result bit for bit
(every output is computed by one thread in the same order whatever the thread count)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels
from tests.kernels import test_nhwc, test_qconv
from tests.kernels.test_conv import EPS, VARIANTS, _ref_conv
from tests.kernels.test_conv_nhwc import _expected, _run

THRESHOLDS = {"split": (0.0, True), "split-nosmall": (0.0, False), "serial": (1e30, True)}


@pytest.fixture(params=list(THRESHOLDS))
def breakeven(request):
    """Sets every variant's conv break-even and small-output splits; puts the previous settings back."""
    flops, small = THRESHOLDS[request.param]
    before = {isa: (m._set_par_thresholds(-1, -1, flops), m.small_split(small)) for isa, m in VARIANTS.items()}
    yield request.param
    for isa, m in VARIANTS.items():
        m._set_par_thresholds(*before[isa][0])
        m.small_split(before[isa][1])


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_par_costs_measured_and_consistent(isa):
    """The probe's figures are finite and in range, and the break-even is 2 * call cost * rate (so a change of the
    rule or a failed probe shows here)."""
    m = VARIANTS[isa]
    before = m._set_par_thresholds()
    try:
        call_ns, flop_ns, conv_flops = m.par_costs(True)
        assert 100 <= call_ns <= 50000
        assert 1 <= flop_ns <= 10000
        assert conv_flops == pytest.approx(2 * call_ns * flop_ns)
        assert m._set_par_thresholds()[2] == conv_flops
    finally:
        m._set_par_thresholds(*before)


# (N, C, H, W), (cout, kh, kw), strides, pads: the zoo's tiny resnets / regnets / mobilenets at batch 1 and 3
SHAPES = [((1, 3, 64, 64), (16, 7, 7), (2, 2), (3, 3)),       # the stem
          ((1, 32, 16, 16), (16, 3, 3), (1, 1), (1, 1)),
          ((3, 16, 16, 16), (16, 3, 3), (1, 1), (1, 1)),
          ((1, 8, 16, 16), (8, 3, 3), (1, 1), (1, 1)),
          ((1, 16, 16, 16), (16, 3, 3), (2, 2), (1, 1)),      # an 8x8 output
          ((3, 32, 8, 8), (64, 3, 3), (1, 1), (1, 1)),
          ((1, 16, 8, 8), (64, 1, 1), (1, 1), (0, 0)),        # a pointwise conv on one folded row
          ((1, 64, 4, 4), (64, 3, 3), (1, 1), (1, 1)),        # a 4x4 output
          ((1, 32, 32, 32), (32, 3, 3), (1, 1), (1, 1)),      # (winograd where the variant takes it)
          ((1, 96, 14, 14), (192, 1, 1), (1, 1), (0, 0))]     # 196 pixels folded into 3 rows (_dconv_blocks_mt keeps 3)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("shape", SHAPES, ids=[f"s{i}" for i in range(len(SHAPES))])
def test_conv_nhwc_small_shapes(isa, shape, breakeven):
    xs, (cout, kh, kw), strides, pads = shape
    mod = VARIANTS[isa]
    rng = np.random.default_rng(sum(xs) + cout)
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, (cout, xs[1], kh, kw)).astype(np.float32)
    b = rng.uniform(-1, 1, cout).astype(np.float32)
    outs = tuple((xs[2 + i] + 2 * pads[i] - (kh, kw)[i]) // strides[i] + 1 for i in range(2))
    res = rng.uniform(-1, 1, (xs[0],) + outs + (cout,)).astype(np.float32)
    args = (x, w, b, res, 1, strides, (1, 1), pads, outs, True)
    y2 = _run(mod, *args, 2)
    np.testing.assert_allclose(y2, _expected(*args), rtol=0, atol=2 * (xs[1] * kh * kw + 3) * EPS * 8)
    np.testing.assert_array_equal(y2, _run(mod, *args, 1))


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("shape", [(1, 16, 16, 16, 1), (3, 32, 8, 8, 2), (1, 64, 4, 4, 1)], ids=str)
def test_depthwise_small_shapes(isa, shape, breakeven):
    """Channel-last (conv_depthwise_nhwc_f32) and NCHW (conv_depthwise_f32) depthwise 3x3 against the float64 conv."""
    N, C, H, W, s = shape
    mod = VARIANTS[isa]
    rng = np.random.default_rng(N * C + H)
    x = rng.uniform(-1, 1, (N, C, H, W)).astype(np.float32)
    w = rng.uniform(-1, 1, (C, 1, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, C).astype(np.float32)
    outs = ((H + 2 - 3) // s + 1, (W + 2 - 3) // s + 1)
    ref = _ref_conv(x[:, :, None], w[:, :, None], b, C, (1, s, s), (1, 1, 1), (0, 1, 1), (1,) + outs)[:, :, 0]
    ref = np.maximum(ref, 0)
    xn = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    y = {t: test_nhwc._dw_nhwc(mod, xn, w, b, (3, 3), (s, s), (1, 1), (1, 1), outs, True, t) for t in (1, 2)}
    np.testing.assert_allclose(y[2], ref.transpose(0, 2, 3, 1), rtol=0, atol=24 * EPS)
    np.testing.assert_array_equal(y[2], y[1])
    yc = np.empty((N, C) + outs, np.float32)
    mod.conv_depthwise_f32(x.reshape(-1), (N, C, 1, H, W), w.reshape(-1), C, C, (1, 3, 3), (1, s, s), (1, 1, 1),
                           (0, 1, 1), (1,) + outs, b, yc.reshape(-1), True, 2)
    np.testing.assert_allclose(yc, ref, rtol=0, atol=24 * EPS)


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_conv_nchw_small_shapes(isa, breakeven):
    """The NCHW packed conv (conv_f32) on a 16x16 32 -> 16 3x3 and two images of an 8x8 1x1, against the float64
    conv; 1 and 2 threads bit-identical."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(5)
    for xs, cout, k, p in (((1, 32, 16, 16), 16, 3, 1), ((2, 16, 8, 8), 64, 1, 0)):
        x = rng.uniform(-1, 1, xs).astype(np.float32)
        w = rng.uniform(-1, 1, (cout, xs[1], k, k)).astype(np.float32)
        b = rng.uniform(-1, 1, cout).astype(np.float32)
        outs = (xs[2] + 2 * p - k + 1, xs[3] + 2 * p - k + 1)
        kc = xs[1] * k * k
        wp = np.empty(mod.conv_pack_weight_size(cout, kc, 1), np.float32)
        mod.conv_pack_weight(w.reshape(-1), cout, 1, wp)
        y = {}
        for t in (1, 2):
            y[t] = np.empty((xs[0], cout) + outs, np.float32)
            mod.conv_f32(x.reshape(-1), xs[:2] + (1,) + xs[2:], wp, cout, 1, (1, k, k), (1, 1, 1), (1, 1, 1),
                         (0, p, p), (1,) + outs, b, y[t].reshape(-1), False, t)
        ref = _ref_conv(x[:, :, None], w[:, :, None], b, 1, (1, 1, 1), (1, 1, 1), (0, p, p), (1,) + outs)[:, :, 0]
        np.testing.assert_allclose(y[2], ref, rtol=0, atol=2 * (kc + 3) * EPS * 8)
        np.testing.assert_array_equal(y[2], y[1])


QCONVS = [(1, 16, 16, 32, 16, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
          (3, 8, 8, 32, 64, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1),
          (1, 16, 16, 16, 16, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), 1),
          (1, 16, 16, 32, 32, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 32)]     # depthwise


@pytest.mark.parametrize("case", test_qconv.CASES, ids=[f"{v}-{k}" for v, k in test_qconv.CASES])
@pytest.mark.parametrize("conv", QCONVS, ids=[f"q{i}" for i in range(len(QCONVS))])
def test_qconv_small_shapes(case, conv, breakeven, monkeypatch):
    """QLinearConv's kernel at 2 threads, exact against test_qconv's integer oracle."""
    m = VARIANTS[case[0]]
    m.qgemm_force(case[1])
    monkeypatch.setattr(test_qconv._qconv, "_kernels", m)
    try:
        test_qconv.test_qconv_exact(m, conv, np.uint8, np.int8, np.uint8, True)
    finally:
        m.qgemm_force(None)


@pytest.mark.skipif(not _kernels.bgemm_hw(), reason="bf16 runs in fp32 without AVX512_BF16")
@pytest.mark.parametrize("geo", [(16, 32, 3, 1, 1, 1, 16, 16), (32, 64, 3, 1, 1, 1, 8, 8), (16, 64, 1, 1, 0, 1, 8, 8),
                                 (3, 16, 7, 2, 3, 1, 64, 64)], ids=str)
def test_bconv_small_shapes(geo, breakeven):
    """The bf16 conv kernel within its error bound, 1 and 2 threads the same bits (test_bconv_nhwc's check), for
    every bf16 micro-kernel this CPU has."""
    bconv = importlib.import_module("tests.ops.test_bconv_nhwc")
    for k in bconv.KERNELS:
        _kernels.bgemm_force(k)
        try:
            bconv.test_bconv_kernel_within_bound(k, geo, "Relu")
        finally:
            _kernels.bgemm_force(None)
