"""Channel-last (NHWC) kernels: depthwise conv and 2-D pooling (onnxep/_k_nhwc.pxi).

Oracles: the NCHW kernels (conv_depthwise_f32, maxpool_f32, avgpool_f32, global_pool_f32) run on the transposed input,
and numpy in float64 (direct loops); every ISA variant in onnxep._kernels.AVAILABLE is also compared with the generic
one, and 1 vs 2 threads must give bit-identical results. Depthwise tolerance: the float32 dot-product bound
2 * (taps + 2) * eps32 * max|x| * max|w| (+ bias), with |x|, |w|, |b| <= 1."""
import importlib

import numpy as np
import pytest
from hypothesis import given, strategies as st

from onnxep import _kernels
from tests.kernels.test_conv import _ref_conv
from tests.kernels.test_pool import geom as pool_geom, numpy_pool

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
GENERIC = VARIANTS["generic"]
EPS = float(np.finfo(np.float32).eps)


def _out(n, k, s, d, pb, pe):
    return max(0, (n + pb + pe - ((k - 1) * d + 1)) // s + 1)


def _pack(mod, w, cout, kh, kw):
    wp = np.full(mod.dw_pack_weight_nhwc_size(cout, kh, kw), np.nan, np.float32)
    mod.dw_pack_weight_nhwc(w.reshape(-1), cout, kh, kw, wp)
    return wp


def _dw_nhwc(mod, x_nhwc, w, b, k, s, d, pb, outs, relu, nthreads):
    N, H, W, C = x_nhwc.shape
    cout = w.shape[0]
    y = np.full((N,) + tuple(outs) + (cout,), np.nan, np.float32)
    mod.conv_depthwise_nhwc_f32(x_nhwc.reshape(-1), (N, H, W, C), _pack(mod, w, cout, *k), cout, k, s, d, pb, outs, b,
                                y.reshape(-1), relu, nthreads)
    return y


def test_dw_pack_layout():
    """Oracle: the documented layout out[(b*kw + e)*CP + oc] = w[oc, 0, b, e], CP = cout rounded up to 16, zeros."""
    for cout, kh, kw in [(1, 1, 1), (15, 3, 3), (17, 2, 5), (32, 3, 1)]:
        w = np.arange(cout * kh * kw, dtype=np.float32).reshape(cout, 1, kh, kw)
        cp = -(-cout // 16) * 16
        assert _kernels.dw_pack_weight_nhwc_size(cout, kh, kw) == kh * kw * cp
        wp = _pack(_kernels, w, cout, kh, kw).reshape(kh * kw, cp)
        np.testing.assert_array_equal(wp[:, :cout], w.reshape(cout, kh * kw).T)
        np.testing.assert_array_equal(wp[:, cout:], 0)


SIZES = [1, 2, 3, 5, 7, 13]
CHANNELS = [1, 2, 15, 16, 17, 33]


@pytest.mark.parametrize("isa", list(VARIANTS))
@given(data=st.data())
def test_dw_nhwc_matches_nchw_and_numpy(isa, data):
    """Oracles: the NCHW kernel conv_depthwise_f32 on the transposed input (same variant), numpy float64 direct conv,
    and the generic variant (NMSE < 1e-12); 1 vs 2 threads bit-identical. Hypothesis draws N (0-2), H, W (1, 2, 3,
    primes), C (1, 15, 16, 17, 33: just off the 16-channel blocks), kernel 1-5, strides 1-3, dilations 1-2,
    asymmetric begin/end pads 0-3 (past the kernel too: windows of padding only), multiplier 1-2, relu, no bias."""
    mod = VARIANTS[isa]
    N = data.draw(st.sampled_from([0, 1, 2]), "N")
    H, W = data.draw(st.sampled_from(SIZES), "H"), data.draw(st.sampled_from(SIZES), "W")
    C = data.draw(st.sampled_from(CHANNELS), "C")
    mult = data.draw(st.sampled_from([1, 1, 2]), "mult")
    k = (data.draw(st.sampled_from([1, 2, 3, 3, 5]), "kh"), data.draw(st.sampled_from([1, 2, 3, 3, 5]), "kw"))
    s = (data.draw(st.integers(1, 3), "sh"), data.draw(st.integers(1, 3), "sw"))
    d = (data.draw(st.integers(1, 2), "dh"), data.draw(st.integers(1, 2), "dw"))
    pb = (data.draw(st.integers(0, 3), "ph"), data.draw(st.integers(0, 3), "pw"))
    pe = (data.draw(st.integers(0, 3), "peh"), data.draw(st.integers(0, 3), "pew"))
    relu, bias = data.draw(st.booleans(), "relu"), data.draw(st.booleans(), "bias")
    outs = (_out(H, k[0], s[0], d[0], pb[0], pe[0]), _out(W, k[1], s[1], d[1], pb[1], pe[1]))
    cout = C * mult
    rng = np.random.default_rng(N + H * 7 + W * 13 + C * 17 + k[0] + 5 * k[1])
    x = rng.uniform(-1, 1, (N, C, H, W)).astype(np.float32)
    w = rng.uniform(-1, 1, (cout, 1) + k).astype(np.float32)
    b = rng.uniform(-1, 1, cout).astype(np.float32) if bias else None
    xn = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    y1 = _dw_nhwc(mod, xn, w, b, k, s, d, pb, outs, relu, 1)
    y2 = _dw_nhwc(mod, xn, w, b, k, s, d, pb, outs, relu, 2)
    np.testing.assert_array_equal(y1, y2)
    assert y1.dtype == np.float32 and y1.shape == (N,) + outs + (cout,)
    if y1.size == 0:
        return                    # (the numpy oracle cannot slice an empty output; nothing to compare)
    got = y1.transpose(0, 3, 1, 2)
    bound = 2 * (k[0] * k[1] + 2) * EPS + 4 * EPS
    ref = _ref_conv(x[:, :, None], w[:, :, None], b, C, (1,) + s, (1,) + d, (0,) + pb, (1,) + outs)[:, :, 0]
    if relu:
        ref = np.maximum(ref, 0)
    assert np.all(np.abs(got - ref) <= bound)
    y_nchw = np.empty((N, cout) + outs, np.float32)
    mod.conv_depthwise_f32(x.reshape(-1), (N, C, 1, H, W), w.reshape(-1), cout, C, (1,) + k, (1,) + s, (1,) + d,
                           (0,) + pb, (1,) + outs, b, y_nchw.reshape(-1), relu, 1)
    assert np.all(np.abs(y_nchw - ref) <= bound)
    assert np.all(np.abs(got - y_nchw) <= 2 * bound)
    if isa != "generic":
        # NMSE on the scale of the terms summed (conv of |x| and |w|, plus |b|), not of the output: where bias and
        # taps cancel (a few taps left by the padding) the output is tiny while each variant's rounding is not
        # (hypothesis found N1 H5 W3 C1, kernel 5x3, strides 1x2, dilations 2x1: 2.3e-12 of the output's energy)
        yg = _dw_nhwc(GENERIC, xn, w, b, k, s, d, pb, outs, relu, 1).astype(np.float64)
        mag = _ref_conv(np.abs(x[:, :, None]), np.abs(w[:, :, None]), None if b is None else np.abs(b), C,
                        (1,) + s, (1,) + d, (0,) + pb, (1,) + outs)[:, :, 0].transpose(0, 2, 3, 1)
        assert np.sum((yg - y1) ** 2) <= 1e-12 * np.sum(mag ** 2)


DW_SHAPES = [  # (N, H, W, C), mult, kernel, strides, dilations, begin pads, end pads
    ((1, 56, 56, 32), 1, (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),    # MobileNet, large enough to go parallel
    ((2, 28, 29, 48), 1, (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),
    ((1, 17, 19, 33), 2, (5, 5), (1, 2), (2, 1), (2, 0), (1, 3)),
    ((1, 9, 40, 17), 1, (7, 7), (1, 1), (1, 1), (3, 3), (3, 3)),
    ((1, 4, 5, 16), 1, (3, 3), (1, 1), (1, 1), (0, 0), (0, 0)),
    ((1, 3, 3, 7), 1, (11, 11), (1, 1), (1, 1), (5, 5), (5, 5)),      # 121 taps, mostly clipped
]


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", DW_SHAPES)
@pytest.mark.parametrize("relu", [False, True])
def test_dw_nhwc_shapes(isa, case, relu):
    """Oracle: numpy float64 direct conv on the transposed input; 1 vs 2 threads bit-identical; generic variant
    NMSE < 1e-12."""
    mod = VARIANTS[isa]
    (N, H, W, C), mult, k, s, d, pb, pe = case
    outs = (_out(H, k[0], s[0], d[0], pb[0], pe[0]), _out(W, k[1], s[1], d[1], pb[1], pe[1]))
    cout = C * mult
    rng = np.random.default_rng(H * W + C)
    xn = rng.uniform(-1, 1, (N, H, W, C)).astype(np.float32)
    w = rng.uniform(-1, 1, (cout, 1) + k).astype(np.float32)
    b = rng.uniform(-1, 1, cout).astype(np.float32)
    y1 = _dw_nhwc(mod, xn, w, b, k, s, d, pb, outs, relu, 1)
    y2 = _dw_nhwc(mod, xn, w, b, k, s, d, pb, outs, relu, 2)
    np.testing.assert_array_equal(y1, y2)
    x = xn.transpose(0, 3, 1, 2)
    ref = _ref_conv(x[:, :, None], w[:, :, None], b, C, (1,) + s, (1,) + d, (0,) + pb, (1,) + outs)[:, :, 0]
    if relu:
        ref = np.maximum(ref, 0)
    got = y1.transpose(0, 3, 1, 2)
    assert np.all(np.abs(got - ref) <= 2 * (k[0] * k[1] + 2) * EPS + 4 * EPS), np.abs(got - ref).max()
    if isa != "generic":
        yg = _dw_nhwc(GENERIC, xn, w, b, k, s, d, pb, outs, relu, 1).astype(np.float64)
        assert np.sum((yg - y1) ** 2) <= 1e-12 * np.sum(yg ** 2)


def test_nchw_dw_tiny_width_stride2():
    """Oracle: numpy float64 direct conv. Regression: the NCHW kernel's stride-2 fill read past a width-1 row (C's
    truncating division of a negative count); both kernels must give the right answer."""
    rng = np.random.default_rng(0)
    C, kw, sw, pe = 2, 3, 2, 2
    x = rng.uniform(-1, 1, (1, C, 1, 1)).astype(np.float32)
    w = rng.uniform(-1, 1, (C, 1, 1, kw)).astype(np.float32)
    y = np.full(C, np.nan, np.float32)
    _kernels.conv_depthwise_f32(x.reshape(-1), (1, C, 1, 1, 1), w.reshape(-1), C, C, (1, 1, kw), (1, 1, sw),
                                (1, 1, 1), (0, 0, 0), (1, 1, 1), None, y, False, 1)
    np.testing.assert_allclose(y, x[:, :, 0, 0].reshape(-1) * w[:, 0, 0, 0], rtol=1e-6)
    yn = _dw_nhwc(_kernels, np.ascontiguousarray(x.transpose(0, 2, 3, 1)), w, None, (1, kw), (1, sw), (1, 1), (0, 0),
                  (1, 1), False, 1)
    np.testing.assert_allclose(yn.reshape(-1), x.reshape(-1) * w[:, 0, 0, 0], rtol=1e-6)


def test_dw_nhwc_nonfinite_stays_local():
    """Oracle: numpy float64 direct conv. Taps outside x are skipped, not multiplied by 0: an inf in x reaches only
    the outputs whose windows cover it."""
    xn = np.ones((1, 4, 5, 3), np.float32)
    xn[0, 1, 4, 1] = np.inf
    w = np.ones((3, 1, 3, 3), np.float32)
    y = _dw_nhwc(_kernels, xn, w, None, (3, 3), (1, 1), (1, 1), (1, 1), (4, 5), False, 1)
    ref = _ref_conv(xn.transpose(0, 3, 1, 2)[:, :, None].astype(np.float64), w[:, :, None], None, 3, (1, 1, 1),
                    (1, 1, 1), (0, 1, 1), (1, 4, 5))[:, :, 0].transpose(0, 2, 3, 1)
    np.testing.assert_array_equal(np.isinf(y), np.isinf(ref))
    assert not np.isnan(y).any()
    np.testing.assert_array_equal(y[np.isfinite(ref)], ref[np.isfinite(ref)])


def test_dw_nhwc_errors():
    """Oracle: the documented ValueErrors on inconsistent sizes."""
    K = _kernels
    x = np.zeros(2 * 4 * 4 * 3, np.float32)
    wp = np.zeros(K.dw_pack_weight_nhwc_size(3, 3, 3), np.float32)
    y = np.zeros(2 * 4 * 4 * 3, np.float32)
    args = ((3, 3), (1, 1), (1, 1), (1, 1), (4, 4))
    K.conv_depthwise_nhwc_f32(x, (2, 4, 4, 3), wp, 3, *args, None, y)
    with pytest.raises(ValueError, match="x has"):
        K.conv_depthwise_nhwc_f32(x[:-1], (2, 4, 4, 3), wp, 3, *args, None, y)
    with pytest.raises(ValueError, match="y has"):
        K.conv_depthwise_nhwc_f32(x, (2, 4, 4, 3), wp, 3, *args, None, y[:-1])
    with pytest.raises(ValueError, match="packed weight"):
        K.conv_depthwise_nhwc_f32(x, (2, 4, 4, 3), wp[:-1], 3, *args, None, y)
    with pytest.raises(ValueError, match="multiple of C"):
        K.conv_depthwise_nhwc_f32(x, (2, 4, 4, 3), wp, 4, *args, None, y)
    with pytest.raises(ValueError, match="bias"):
        K.conv_depthwise_nhwc_f32(x, (2, 4, 4, 3), wp, 3, *args, np.zeros(2, np.float32), y)
    with pytest.raises(ValueError, match="4 entries"):
        K.conv_depthwise_nhwc_f32(x, (2, 4, 4, 3, 1), wp, 3, *args, None, y)
    with pytest.raises(ValueError, match="strides"):
        K.conv_depthwise_nhwc_f32(x, (2, 4, 4, 3), wp, 3, (3, 3), (0, 1), (1, 1), (1, 1), (4, 4), None, y)
    with pytest.raises(ValueError, match="out has"):
        K.dw_pack_weight_nhwc(np.zeros(27, np.float32), 3, 3, 3, np.zeros(27, np.float32))
    with pytest.raises(ValueError, match="w has"):
        K.dw_pack_weight_nhwc(np.zeros(26, np.float32), 3, 3, 3, wp)


# ------------------------------------------------------------------------------------------------------ pools

def _pool_case(data):
    N = data.draw(st.sampled_from([0, 1, 2]), "N")
    C = data.draw(st.sampled_from(CHANNELS), "C")
    H, W = data.draw(st.sampled_from([1, 2, 3, 5, 8, 13]), "H"), data.draw(st.sampled_from([1, 2, 3, 5, 8, 13]), "W")
    k = [data.draw(st.integers(1, 3), "kh"), data.draw(st.integers(1, 3), "kw")]
    s = [data.draw(st.integers(1, 3), "sh"), data.draw(st.integers(1, 3), "sw")]
    d = [data.draw(st.integers(1, 2), "dh"), data.draw(st.integers(1, 2), "dw")]
    pb = [data.draw(st.integers(0, k[i] - 1), f"pb{i}") for i in range(2)]
    pe = [data.draw(st.integers(0, k[i] - 1), f"pe{i}") for i in range(2)]
    for i, n in enumerate((H, W)):
        if n + pb[i] + pe[i] < (k[i] - 1) * d[i] + 1:
            pe[i] = (k[i] - 1) * d[i] + 1 - n - pb[i]      # keep the output non-empty
    return N, C, H, W, k, s, d, pb, pe


@pytest.mark.parametrize("isa", list(VARIANTS))
@given(data=st.data())
def test_pool_nhwc_matches_nchw_and_numpy(isa, data):
    """Oracles: maxpool_f32 / avgpool_f32 (NCHW, same variant) on the transposed input, bit-identical (the same taps
    in the same order with the same float arithmetic), and the numpy window oracle of test_pool; 1 vs 2 threads
    bit-identical. Windows reaching past the input (pads, dilations, end pads) included."""
    mod = VARIANTS[isa]
    N, C, H, W, k, s, d, pb, pe = _pool_case(data)
    out3, gv = pool_geom((1, H, W), (1, *k), (1, *s), (0, *pb), (0, *pe), (1, *d))
    Ho, Wo = out3[1:]
    x = np.random.default_rng(H * W + C).standard_normal((N, C, H, W)).astype(np.float32)
    xn = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1)
    # windows covering no input pixel (the ops refuse them, the kernels give -inf / nan like the NCHW ones): the numpy
    # oracle has no answer there
    empty_windows = any(not any(0 <= o * s[i] - pb[i] + t * d[i] < n for t in range(k[i]))
                        for i, n in enumerate((H, W)) for o in range(out3[1 + i]))
    for mode in ("max", "avg0", "avg1"):
        ys = []
        for nt in (1, 2):
            y = np.full(N * Ho * Wo * C, np.nan, np.float32)
            if mode == "max":
                mod.maxpool_nhwc_f32(xn, y, N, C, gv, nt)
            else:
                mod.avgpool_nhwc_f32(xn, y, N, C, gv, int(mode == "avg1"), nt)
            ys.append(y)
        np.testing.assert_array_equal(ys[0], ys[1])
        got = ys[0].reshape(N, Ho, Wo, C).transpose(0, 3, 1, 2)
        yc = np.empty(N * C * Ho * Wo, np.float32)
        if mode == "max":
            mod.maxpool_f32(x.reshape(-1), yc, None, N * C, gv, 0, 1)
        else:
            mod.avgpool_f32(x.reshape(-1), yc, N * C, gv, int(mode == "avg1"), 1)
        np.testing.assert_array_equal(got.reshape(-1), yc, err_msg=mode)
        if N and not empty_windows:
            want = numpy_pool(x.reshape(-1), N * C, (1, H, W), out3, (1, *k), (1, *s), (0, *pb), (0, *pe), (1, *d),
                              mode[:3], int(mode == "avg1"))
            np.testing.assert_allclose(got.reshape(-1), want, rtol=1e-5, atol=1e-6, err_msg=mode)


def test_pool_nhwc_parallel_large():
    """Oracle: the NCHW kernels on the transposed input (bit-identical), at a size that runs on several threads."""
    N, C, H, W = 2, 40, 30, 31
    out3, gv = pool_geom((1, H, W), (1, 3, 3), (1, 2, 2), (0, 1, 1), (0, 1, 1), (1, 1, 1))
    x = np.random.default_rng(3).standard_normal((N, C, H, W)).astype(np.float32)
    xn = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1)
    for isa, mod in VARIANTS.items():
        for cip in (0, 1):
            y = np.empty(N * C * out3[1] * out3[2], np.float32)
            yc = np.empty_like(y)
            mod.avgpool_nhwc_f32(xn, y, N, C, gv, cip, 0)
            mod.avgpool_f32(x.reshape(-1), yc, N * C, gv, cip, 1)
            np.testing.assert_array_equal(y.reshape(N, *out3[1:], C).transpose(0, 3, 1, 2).reshape(-1), yc, isa)
        mod.maxpool_nhwc_f32(xn, y, N, C, gv, 0)
        mod.maxpool_f32(x.reshape(-1), yc, None, N * C, gv, 0, 1)
        np.testing.assert_array_equal(y.reshape(N, *out3[1:], C).transpose(0, 3, 1, 2).reshape(-1), yc, isa)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("C", [3, 40])
def test_maxpool_nhwc_nan_like_nchw(isa, C):
    """Oracle: maxpool_f32 on the transposed input: a NaN as a window's first tap wins, a later NaN is skipped -- in
    the vector channels and the masked tail (C = 40: two AVX-512 vectors and 8 more) of every variant."""
    mod = VARIANTS[isa]
    x = np.random.default_rng(1).standard_normal((1, C, 4, 4)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    x[0, 1, 1, 1] = np.nan
    x[0, C - 1, 0, 0] = np.nan
    x[0, C - 2, 1, 1] = np.nan
    out3, gv = pool_geom((1, 4, 4), (1, 2, 2), (1, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1))
    y = np.empty(C * 4, np.float32)
    yc = np.empty_like(y)
    mod.maxpool_nhwc_f32(np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1), y, 1, C, gv)
    mod.maxpool_f32(x.reshape(-1), yc, None, C, gv)
    np.testing.assert_array_equal(y.reshape(2, 2, C).transpose(2, 0, 1).reshape(-1), yc)
    assert np.isnan(yc).sum() == 2


@pytest.mark.parametrize("is_max", [False, True])
@pytest.mark.parametrize("N,S,C", [(1, 1, 1), (2, 7, 3), (0, 4, 5), (1, 1000, 17), (3, 49, 130), (2, 3136, 64)])
def test_global_pool_nhwc(is_max, N, S, C):
    """Oracles: global_pool_f32 (NCHW) on the transposed input, bit-identical (the same order, double accumulation for
    the mean), and numpy; every variant, 1 and 2 threads."""
    x = np.random.default_rng(S + C).standard_normal((N, S, C)).astype(np.float32)
    want = x.max(axis=1) if is_max else x.astype(np.float64).mean(axis=1).astype(np.float32)
    for isa, mod in VARIANTS.items():
        yc = np.empty(N * C, np.float32)
        if N:
            mod.global_pool_f32(np.ascontiguousarray(x.transpose(0, 2, 1)).reshape(N * C, S), yc, is_max, 1)
        for nt in (1, 2):
            y = np.full(N * C, np.nan, np.float32)
            fn = mod.global_maxpool_nhwc_f32 if is_max else mod.global_avgpool_nhwc_f32
            fn(x.reshape(-1), (N, S, 1, C), y, nt)
            np.testing.assert_array_equal(y, yc.reshape(-1), err_msg=isa)
            np.testing.assert_allclose(y, want.reshape(-1), rtol=1e-6, atol=1e-7, err_msg=isa)


def test_pool_nhwc_errors():
    """Oracle: the documented ValueErrors on inconsistent sizes or geometry."""
    K = _kernels
    out3, gv = pool_geom((1, 4, 4), (1, 2, 2), (1, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1))
    x = np.zeros(2 * 16 * 3, np.float32)
    y = np.zeros(2 * 4 * 3, np.float32)
    K.maxpool_nhwc_f32(x, y, 2, 3, gv)
    with pytest.raises(ValueError, match="maxpool_nhwc_f32"):
        K.maxpool_nhwc_f32(x, y[:-1], 2, 3, gv)
    with pytest.raises(ValueError, match="avgpool_nhwc_f32"):
        K.avgpool_nhwc_f32(x[:-1], y, 2, 3, gv)
    _, g3 = pool_geom((2, 4, 4), (1, 2, 2), (1, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1))
    with pytest.raises(ValueError, match="2-D"):
        K.maxpool_nhwc_f32(np.zeros(2 * 32 * 3, np.float32), np.zeros(2 * 8 * 3, np.float32), 2, 3, g3)
    with pytest.raises(ValueError, match="geometry"):
        K.maxpool_nhwc_f32(x, y, 2, 3, gv[:20])
    with pytest.raises(ValueError, match="global_avgpool_nhwc_f32"):
        K.global_avgpool_nhwc_f32(x, (2, 16, 3), np.zeros(5, np.float32))
    with pytest.raises(ValueError, match="empty spatial"):
        K.global_maxpool_nhwc_f32(np.zeros(0, np.float32), (2, 0, 3), np.zeros(6, np.float32))


def _np_act(v, act):
    name, params = act[0], act[1:]
    if name == "Relu":
        return np.maximum(v, 0)
    if name == "Clip":
        return np.minimum(np.maximum(v, params[0]), params[1])
    if name == "HardSwish":
        return v * np.clip(v / 6 + 0.5, 0, 1)
    return v


DW_ACT_SHAPES = [
    ((2, 9, 11, 37), (3, 3), (1, 1), (1, 1), (1, 1)),     # 3x3 run loops, a 5-channel tail
    ((1, 8, 19, 48), (3, 3), (2, 2), (1, 1), (1, 1)),     # stride 2 run loop
    ((1, 7, 7, 20), (5, 5), (1, 1), (2, 2), (2, 2)),      # general taps, border pixels
    ((1, 6, 9, 13), (5, 5), (2, 2), (1, 1), (2, 2)),
]


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", DW_ACT_SHAPES)
@pytest.mark.parametrize("act", [("Relu",), ("Clip", 0.0, 6.0), ("Clip", -0.25, 0.5), ("HardSwish",), ("",)])
def test_dw_nhwc_activation_epilogue(isa, case, act):
    """Oracle: numpy float64 direct conv, then the activation in numpy (ReLU6 / a tight Clip that cuts both sides,
    HardSwish x * clip(x/6 + 1/2, 0, 1)); 1 vs 2 threads bit-identical; a NaN input stays NaN through Clip and
    HardSwish (Relu maps it to 0, as the SIMD max does)."""
    mod = VARIANTS[isa]
    (N, H, W, C), k, s, pb, pe = case
    outs = (_out(H, k[0], s[0], 1, pb[0], pe[0]), _out(W, k[1], s[1], 1, pb[1], pe[1]))
    rng = np.random.default_rng(H * W + C + len(act))
    xn = rng.uniform(-3, 3, (N, H, W, C)).astype(np.float32)
    xn[0, H // 2, W // 2, C - 1] = np.nan
    w = rng.uniform(-1, 1, (C, 1) + k).astype(np.float32)
    b = rng.uniform(-1, 1, C).astype(np.float32)
    ys = []
    for nt in (1, 2):
        y = np.full((N,) + outs + (C,), np.nan, np.float32)
        mod.conv_depthwise_nhwc_f32(xn.reshape(-1), (N, H, W, C), _pack(mod, w, C, *k), C, k, s, (1, 1), pb, outs, b,
                                    y.reshape(-1), False, nt, act)
        ys.append(y)
    np.testing.assert_array_equal(ys[0], ys[1])
    x = xn.transpose(0, 3, 1, 2).astype(np.float64)
    conv = _ref_conv(np.nan_to_num(x)[:, :, None], w[:, :, None], b, C, (1,) + s, (1, 1, 1), (0,) + pb,
                     (1,) + outs)[:, :, 0]
    ref = _np_act(conv, act)
    got = ys[0].transpose(0, 3, 1, 2)
    nan_out = np.isnan(_ref_conv(x[:, :, None], w[:, :, None], b, C, (1,) + s, (1, 1, 1), (0,) + pb,
                                 (1,) + outs)[:, :, 0])
    ok = ~nan_out
    assert np.all(np.abs(got[ok] - ref[ok]) <= 4 * (k[0] * k[1] + 2) * EPS * 3), np.abs(got[ok] - ref[ok]).max()
    if act[0] == "Relu":
        assert np.all(got[nan_out] == 0)
    else:
        assert np.all(np.isnan(got[nan_out]))


def test_dw_nhwc_activation_errors():
    x = np.zeros(16, np.float32)
    wp = _pack(_kernels, np.zeros((1, 1, 1, 1), np.float32), 1, 1, 1)
    for bad in ("Sigmoid", ("Clip", 0.0), "Gelu"):
        with pytest.raises(ValueError, match="activation"):
            _kernels.conv_depthwise_nhwc_f32(x, (1, 4, 4, 1), wp, 1, (1, 1), (1, 1), (1, 1), (0, 0), (4, 4), None,
                                             np.empty(16, np.float32), False, 1, bad)


SLIDE_SHAPES = [  # (N, H, W, C), kernel, strides, dilations, begin pads, end pads: the sliding-block rows
    ((1, 6, 40, 32), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1)),    # 16-pixel blocks, the last one shifted back
    ((2, 5, 35, 24), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1)),    # 3x3 stride 2 (generic only)
    ((2, 5, 35, 24), (5, 5), (1, 2), (1, 1), (2, 2), (2, 2)),    # 5x5 stride 2; AVX-512: a masked 8-channel tail
    ((1, 9, 20, 48), (7, 7), (1, 1), (1, 1), (3, 3), (3, 3)),    # ConvNeXt's 7x7: every block clips columns
    ((1, 7, 7, 40), (7, 7), (1, 1), (1, 1), (3, 3), (3, 3)),     # a row narrower than a block
    ((1, 8, 13, 16), (5, 5), (2, 2), (2, 1), (2, 2), (1, 2)),    # 5x5 stride 2, dilation along H, asymmetric pads
    ((1, 6, 11, 8), (5, 5), (1, 1), (1, 1), (0, 4), (2, 0)),     # columns clipped on one side only, 8-pixel blocks
    ((1, 5, 9, 21), (3, 7), (1, 2), (1, 1), (1, 2), (1, 3)),     # 7 wide at stride 2; C % 4: per-run loops
    ((1, 5, 12, 12), (5, 5), (1, 1), (1, 1), (2, 2), (2, 2)),    # AVX2: C % 8 (per-run loops); generic: 3 blocks
    ((1, 4, 4, 16), (3, 3), (1, 1), (1, 1), (0, 0), (0, 0)),     # Wo = 2: one block, 2 pixels stored
    ((2, 3, 1, 16), (3, 3), (1, 2), (1, 1), (1, 1), (1, 1)),     # Wo = 1, both columns of the kernel clipped
]


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", SLIDE_SHAPES)
@pytest.mark.parametrize("act", [None, ("Clip", 0.0, 6.0), ("HardSwish",)])
def test_dw_nhwc_sliding_rows_on_off(isa, case, act):
    """Oracle: numpy float64 direct conv then the activation; the sliding blocks (dw_nhwc_slide on) bit-identical to
    the per-run / per-pixel loops (off: same taps, same order, the same multiply-adds: fused on the SIMD variants,
    multiply then add on the generic one) and to themselves at 2 threads. Every variant takes the sliding path where
    dw_nhwc_slide_width says so (kw 3 / 5 / 7, stride 1 / 2; not 3x3 at stride 2 on AVX-512 and AVX2; AVX2: whole
    8-channel blocks; generic: whole 4-channel blocks), 16 pixels wide (AVX-512, rows of 16 or more) or 8."""
    mod = VARIANTS[isa]
    (N, H, W, C), k, s, d, pb, pe = case
    outs = (_out(H, k[0], s[0], d[0], pb[0], pe[0]), _out(W, k[1], s[1], d[1], pb[1], pe[1]))
    width = mod.dw_nhwc_slide_width(k[1], s[1], outs[1], C)
    if (isa == "generic" and C % 4) or (isa != "generic" and (k[1], s[1]) == (3, 2)) or (isa == "avx2" and C % 8):
        assert width == 0
    else:
        assert width == (16 if isa == "avx512" and outs[1] >= 16 else 8)
    rng = np.random.default_rng(H * W + C + k[1])
    xn = rng.uniform(-1, 1, (N, H, W, C)).astype(np.float32)
    w = rng.uniform(-1, 1, (C, 1) + k).astype(np.float32)
    b = rng.uniform(-1, 1, C).astype(np.float32)
    wp = _pack(mod, w, C, *k)
    ys = {}
    prev = mod.dw_nhwc_slide(True)
    try:
        for on, nt in ((True, 1), (True, 2), (False, 1)):
            mod.dw_nhwc_slide(on)
            y = np.full((N,) + outs + (C,), np.nan, np.float32)
            mod.conv_depthwise_nhwc_f32(xn.reshape(-1), (N, H, W, C), wp, C, k, s, d, pb, outs, b, y.reshape(-1),
                                        False, nt, act)
            ys[on, nt] = y
    finally:
        mod.dw_nhwc_slide(prev)
    np.testing.assert_array_equal(ys[True, 1], ys[True, 2])
    np.testing.assert_array_equal(ys[True, 1], ys[False, 1])
    x = xn.transpose(0, 3, 1, 2)
    ref = _ref_conv(x[:, :, None], w[:, :, None], b, C, (1,) + s, (1,) + d, (0,) + pb, (1,) + outs)[:, :, 0]
    ref = _np_act(ref, act) if act else ref
    got = ys[True, 1].transpose(0, 3, 1, 2)
    assert np.all(np.abs(got - ref) <= 2 * (k[0] * k[1] + 2) * EPS + 4 * EPS), np.abs(got - ref).max()
