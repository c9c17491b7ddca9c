"""Conv kernels. Oracle: a float64 numpy direct convolution (explicit loops over the kernel window); every ISA variant
is also compared with the generic one. Tolerance: Kc * eps32 * max|x| * max|w| (+ bias rounding), x2."""
import importlib

import numpy as np
import pytest
from hypothesis import given, strategies as st

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
EPS = float(np.finfo(np.float32).eps)


def _ref_conv(x, w, b, group, strides, dil, pads, outs):
    """float64 direct conv, NCDHW, begin pads only (out size given)."""
    N, C = x.shape[:2]
    cout = w.shape[0]
    cg, og = C // group, cout // group
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(p, max(0, (o - 1) * s + (k - 1) * d + 1 - i - p))
                                                          for p, o, s, k, d, i in zip(pads, outs, strides,
                                                                                      w.shape[2:], dil, x.shape[2:])])
    y = np.zeros((N, cout) + tuple(outs))
    for idx in np.ndindex(*w.shape[2:]):
        sl = tuple(slice(k * d, k * d + (o - 1) * s + 1, s) for k, d, o, s in zip(idx, dil, outs, strides))
        patch = xp[(slice(None), slice(None)) + sl]
        for g in range(group):
            y[:, g * og:(g + 1) * og] += np.einsum("nc...,oc->no...", patch[:, g * cg:(g + 1) * cg],
                                                   w[(slice(g * og, (g + 1) * og), slice(None)) + idx])
    if b is not None:
        y += b.reshape((1, cout) + (1,) * len(outs))
    return y


CASES = [  # x shape (5-D), w shape, group, strides, dilations, pads, out spatial
    ((1, 3, 1, 5, 5), (4, 3, 1, 1, 1), 1, (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 5, 5)),
    ((2, 4, 1, 7, 6), (6, 2, 1, 3, 3), 2, (1, 2, 1), (1, 1, 2), (0, 1, 2), (1, 4, 6)),
    ((1, 40, 1, 9, 9), (33, 40, 1, 3, 3), 1, (1, 1, 1), (1, 1, 1), (0, 1, 1), (1, 9, 9)),
    ((1, 2, 4, 5, 6), (3, 2, 2, 3, 3), 1, (2, 1, 2), (1, 1, 1), (1, 1, 0), (3, 5, 2)),
    ((3, 1, 1, 1, 7), (5, 1, 1, 1, 2), 1, (1, 1, 3), (1, 1, 1), (0, 0, 1), (1, 1, 3)),
    # many small per-group GEMMs: with nthreads=2 the (image, group) pairs are split over threads
    ((8, 32, 1, 16, 16), (32, 8, 1, 3, 3), 4, (1, 1, 1), (1, 1, 1), (0, 1, 1), (1, 16, 16)),
]


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("nthreads,relu", [(1, False), (2, False), (1, True)])
def test_conv_f32(isa, case, nthreads, relu):
    """Oracle: float64 numpy direct conv; the generic variant for bit-level agreement in structure (NMSE < 1e-12)."""
    mod = VARIANTS[isa]
    xs, ws, group, strides, dil, pads, outs = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    b = rng.uniform(-1, 1, ws[0]).astype(np.float32)
    kc = int(np.prod(ws[1:]))
    wp = np.empty(mod.conv_pack_weight_size(ws[0], kc, group), np.float32)
    mod.conv_pack_weight(w.reshape(-1), ws[0], group, wp)
    y = np.full((xs[0], ws[0]) + outs, np.nan, np.float32)
    mod.conv_f32(x.reshape(-1), xs, wp, ws[0], group, ws[2:], strides, dil, pads, outs, b, y.reshape(-1), relu,
                 nthreads)
    ref = _ref_conv(x, w, b, group, strides, dil, pads, outs)
    if relu:
        ref = np.maximum(ref, 0)
    assert np.all(np.abs(y - ref) <= 2 * (kc + 2) * EPS + 4 * EPS)
    if isa != "generic":
        g = VARIANTS["generic"]
        wg = np.empty(g.conv_pack_weight_size(ws[0], kc, group), np.float32)
        g.conv_pack_weight(w.reshape(-1), ws[0], group, wg)
        yg = np.empty_like(y)
        g.conv_f32(x.reshape(-1), xs, wg, ws[0], group, ws[2:], strides, dil, pads, outs, b, yg.reshape(-1), relu)
        assert np.sum((yg.astype(np.float64) - y) ** 2) <= 1e-12 * np.sum(yg.astype(np.float64) ** 2)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("relu", [False, True])
def test_conv_depthwise_f32(isa, relu):
    """Oracle: float64 numpy direct conv (with relu applied after)."""
    mod = VARIANTS[isa]
    xs, ws, outs = (2, 3, 1, 7, 6), (6, 1, 1, 3, 3), (1, 4, 3)
    rng = np.random.default_rng(9)
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    b = rng.uniform(-1, 1, 6).astype(np.float32)
    y = np.empty((2, 6) + outs, np.float32)
    mod.conv_depthwise_f32(x.reshape(-1), xs, w.reshape(-1), 6, 3, ws[2:], (1, 2, 2), (1, 1, 1), (0, 1, 1), outs, b,
                           y.reshape(-1), relu)
    ref = _ref_conv(x, w, b, 3, (1, 2, 2), (1, 1, 1), (0, 1, 1), outs)
    if relu:
        ref = np.maximum(ref, 0)
    assert np.all(np.abs(y - ref) <= 24 * EPS)


def test_conv_errors():
    """Oracle: the documented ValueErrors on inconsistent sizes."""
    x = np.zeros(2 * 3 * 16, np.float32)
    with pytest.raises(ValueError, match="group"):
        _kernels.conv_f32(x, (2, 3, 1, 4, 4), np.zeros(8, np.float32), 4, 2, (1, 1, 1), (1, 1, 1), (1, 1, 1),
                          (0, 0, 0), (1, 4, 4), None, np.zeros(2 * 4 * 16, np.float32))
    with pytest.raises(ValueError, match="packed weight"):
        _kernels.conv_f32(x, (2, 3, 1, 4, 4), np.zeros(5, np.float32), 4, 1, (1, 1, 1), (1, 1, 1), (1, 1, 1),
                          (0, 0, 0), (1, 4, 4), None, np.zeros(2 * 4 * 16, np.float32))
    with pytest.raises(ValueError, match="y has"):
        _kernels.conv_f32(x, (2, 3, 1, 4, 4), np.zeros(_kernels.conv_pack_weight_size(4, 3, 1), np.float32), 4, 1,
                          (1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 4, 4), None, np.zeros(7, np.float32))


# Depthwise paths (see _k_conv.pxi): on avx512, 2-D 3x3 undilated convs with column stride 1 or 2 run
# onnxep_dw3x3_plane ('same' stride 1 with H >= 5: groups of four rows, the first / last leaving out the padding row,
# overlapping where H is not a multiple of 4; other geometries with row stride = column stride: groups of four output
# rows, edge groups masking the rows outside x; mixed strides row by row with masked loads). Otherwise stride 1 with
# Wo == W reads x in place (3x3: masked flattened runs; other kernels: flattened runs + checked border columns;
# W > 2048: no masks); everything else with depth kernel 1 goes through the padded phase-split copy (3x3 stride 2 has
# its own loop); depth kernel > 1 uses the bounds-checked loop.
DW_CASES = [  # x shape (N, C, D, H, W), mult, kernel (kd, kh, kw), strides, dilations, begin pads, end pads
    ((1, 4, 1, 9, 11), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1)),      # 'same' 3x3, masked direct
    ((2, 3, 1, 60, 37), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1)),     # several runs of whole rows
    ((1, 2, 1, 5, 16), 2, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1)),      # W = one avx512 vector
    ((1, 2, 1, 4, 33), 1, (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 1, 1)),      # stride 2 past one vector
    ((1, 2, 1, 1, 1), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1)),       # input smaller than the kernel
    ((1, 2, 1, 2, 1), 2, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1)),
    ((1, 3, 1, 6, 7), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 2), (0, 2, 0)),       # asymmetric 'same' pads
    ((1, 3, 1, 8, 9), 1, (1, 3, 3), (1, 1, 1), (1, 2, 2), (0, 2, 2), (0, 2, 2)),       # dilated, masked direct
    ((1, 2, 1, 3, 2100), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1)),    # W > mask stride: no masks
    ((1, 3, 1, 9, 10), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0)),      # valid: padded copy
    ((1, 3, 1, 9, 10), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 0), (0, 0, 1)),
    ((2, 4, 1, 56, 56), 1, (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 1, 1)),     # MobileNet stride 2
    ((1, 3, 1, 9, 11), 1, (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 1, 1)),      # stride 2, odd sizes
    ((1, 2, 1, 5, 1), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 1), (0, 0, 1)),  # pw >= W: runs start a row down
    ((1, 3, 1, 20, 37), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0)),     # valid: inner row groups
    ((1, 2, 1, 23, 40), 1, (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 2, 1), (0, 0, 2)),     # asymmetric, 3 vectors wide
    ((1, 2, 1, 30, 70), 1, (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 0, 1), (0, 1, 0)),     # stride 2, 3 vectors wide
    ((1, 3, 1, 7, 7), 1, (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 0, 0), (0, 0, 0)),
    ((1, 3, 1, 8, 9), 1, (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 0, 1), (0, 1, 0)),
    ((1, 2, 1, 1, 2), 1, (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 1, 1)),       # smaller than the kernel
    ((1, 2, 1, 9, 8), 3, (1, 3, 3), (1, 2, 1), (1, 1, 1), (0, 1, 1), (0, 1, 1)),       # mixed strides, multiplier
    ((1, 3, 1, 11, 10), 1, (1, 3, 3), (1, 3, 3), (1, 1, 1), (0, 1, 2), (0, 1, 0)),     # stride 3
    ((1, 2, 1, 12, 13), 1, (1, 5, 5), (1, 1, 1), (1, 1, 1), (0, 2, 2), (0, 2, 2)),     # 5x5 'same', direct
    ((1, 2, 1, 12, 13), 2, (1, 5, 5), (1, 2, 2), (1, 1, 1), (0, 2, 2), (0, 2, 2)),     # 5x5 stride 2 (25 taps)
    ((1, 3, 1, 7, 9), 1, (1, 1, 3), (1, 1, 1), (1, 1, 1), (0, 0, 1), (0, 0, 1)),       # 1x3
    ((1, 3, 1, 7, 9), 1, (1, 3, 1), (1, 1, 2), (1, 1, 1), (0, 1, 0), (0, 1, 0)),       # 3x1
    ((2, 3, 1, 1, 17), 2, (1, 1, 3), (1, 1, 1), (1, 1, 1), (0, 0, 1), (0, 0, 1)),      # 1-D
    ((1, 2, 5, 6, 6), 1, (1, 3, 3), (2, 1, 1), (1, 1, 1), (1, 1, 1), (1, 1, 1)),       # 3-D, depth kernel 1, depth pads
    ((1, 2, 4, 6, 5), 2, (2, 3, 3), (1, 2, 1), (1, 1, 1), (1, 1, 1), (0, 1, 1)),       # depth kernel 2: checked loop
    # through the channel-last kernel (dw_nchw_via_nhwc): channels past one or two 16-lane vectors, small planes
    ((3, 16, 1, 8, 8), 1, (1, 7, 7), (1, 1, 1), (1, 1, 1), (0, 3, 3), (0, 3, 3)),      # ConvNeXt's 7x7 on 8x8
    ((2, 37, 1, 7, 7), 1, (1, 5, 5), (1, 1, 1), (1, 1, 1), (0, 2, 2), (0, 2, 2)),      # channel tail
    ((1, 19, 1, 11, 10), 1, (1, 5, 5), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 2, 2)),    # asymmetric, stride 2
    ((1, 24, 1, 12, 12), 1, (1, 3, 3), (1, 1, 1), (1, 2, 2), (0, 2, 2), (0, 2, 2)),    # dilated 3x3
    ((2, 33, 1, 9, 9), 1, (1, 3, 3), (1, 2, 2), (1, 1, 1), (0, 1, 1), (0, 1, 1)),      # 3x3 stride 2, 33 channels
    ((1, 8, 1, 3, 4), 1, (1, 7, 7), (1, 1, 1), (1, 1, 1), (0, 3, 3), (0, 3, 3)),       # kernel larger than the plane
]


def _dw_out(xs, k, s, dil, pb, pe):
    return tuple((i + b + e - ((kk - 1) * d + 1)) // st + 1 for i, b, e, kk, d, st in zip(xs[2:], pb, pe, k, dil, s))


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", DW_CASES, ids=lambda c: "x".join(map(str, c[0][2:])) + f"_k{c[2][1]}{c[2][2]}"
                         f"_s{c[3][1]}{c[3][2]}_m{c[1]}_p{''.join(map(str, c[5] + c[6]))}")
@pytest.mark.parametrize("relu,bias", [(False, True), (True, True), (False, False)])
def test_conv_depthwise_paths(isa, case, relu, bias):
    """Oracle: float64 numpy direct conv (zero padding explicit, relu after); every variant also against the generic
    one (NMSE < 1e-12), and 1 vs 2 threads bit-identical (each output plane is computed by one thread)."""
    mod = VARIANTS[isa]
    xs, mult, k, s, dil, pb, pe = case
    outs = _dw_out(xs, k, s, dil, pb, pe)
    C = xs[1]
    ws = (C * mult, 1) + k
    rng = np.random.default_rng(sum(xs) + sum(k) + mult)
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    b = rng.uniform(-1, 1, ws[0]).astype(np.float32) if bias else None
    ys = []
    for nt in (1, 2):
        y = np.full((xs[0], ws[0]) + outs, np.nan, np.float32)
        mod.conv_depthwise_f32(x.reshape(-1), xs, w.reshape(-1), ws[0], C, k, s, dil, pb, outs, b, y.reshape(-1),
                               relu, nt)
        ys.append(y)
    np.testing.assert_array_equal(ys[0], ys[1])
    y = ys[0]
    ref = _ref_conv(x, w, b, C, s, dil, pb, outs)
    if relu:
        ref = np.maximum(ref, 0)
    ks = int(np.prod(k))
    assert y.dtype == np.float32 and y.shape == ref.shape
    assert np.all(np.abs(y - ref) <= 2 * (ks + 2) * EPS + 4 * EPS), np.abs(y - ref).max()
    if isa != "generic":
        yg = np.empty_like(y)
        VARIANTS["generic"].conv_depthwise_f32(x.reshape(-1), xs, w.reshape(-1), ws[0], C, k, s, dil, pb, outs, b,
                                               yg.reshape(-1), relu, 1)
        assert np.sum((yg.astype(np.float64) - y) ** 2) <= 1e-12 * np.sum(yg.astype(np.float64) ** 2)


DW_SIZES = [1, 2, 3, 4, 5, 6, 7, 8, 13, 15, 16, 17, 31, 32, 33, 47, 56]   # 1, primes, just off 16-lane vectors


@pytest.mark.parametrize("isa", list(VARIANTS))
@given(data=st.data())
def test_conv_depthwise_3x3_drawn(isa, data):
    """3x3 depthwise geometries drawn by hypothesis (the AVX-512 plane kernel's row groups, edge groups and column
    tails: H, W from 1, primes and sizes just off the 16-lane vectors, strides 1 / 2 in either direction, pads 0-2 on
    each side). Oracle: float64 numpy direct conv; every variant also against the generic one, within twice the
    oracle's bound (|x|, |w|, |b| <= 1: a sum of 10 terms; a norm-relative check fails on outputs that cancel)."""
    mod = VARIANTS[isa]
    H, W = data.draw(st.sampled_from(DW_SIZES), "H"), data.draw(st.sampled_from(DW_SIZES), "W")
    C, mult = data.draw(st.integers(1, 3), "C"), data.draw(st.sampled_from([1, 2]), "mult")
    s = (1, data.draw(st.sampled_from([1, 2]), "sh"), data.draw(st.sampled_from([1, 2]), "sw"))
    pb = (0, data.draw(st.integers(0, 2), "pt"), data.draw(st.integers(0, 2), "pl"))
    pe = (0, data.draw(st.integers(0, 2), "pbot"), data.draw(st.integers(0, 2), "pr"))
    relu, bias = data.draw(st.booleans(), "relu"), data.draw(st.booleans(), "bias")
    xs, k, dil = (1, C, 1, H, W), (1, 3, 3), (1, 1, 1)
    outs = _dw_out(xs, k, s, dil, pb, pe)
    if min(outs) < 1:
        return                      # the kernel is smaller than the padded input: no output to check
    rng = np.random.default_rng(H * 100 + W)
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, (C * mult, 1) + k).astype(np.float32)
    b = rng.uniform(-1, 1, C * mult).astype(np.float32) if bias else None
    y = np.full((1, C * mult) + outs, np.nan, np.float32)
    mod.conv_depthwise_f32(x.reshape(-1), xs, w.reshape(-1), C * mult, C, k, s, dil, pb, outs, b, y.reshape(-1),
                           relu, 1)
    ref = _ref_conv(x, w, b, C, s, dil, pb, outs)
    if relu:
        ref = np.maximum(ref, 0)
    tol = 2 * 11 * EPS + 4 * EPS
    assert np.all(np.abs(y - ref) <= tol), np.abs(y - ref).max()
    if isa != "generic":
        yg = np.empty_like(y)
        VARIANTS["generic"].conv_depthwise_f32(x.reshape(-1), xs, w.reshape(-1), C * mult, C, k, s, dil, pb, outs, b,
                                               yg.reshape(-1), relu, 1)
        assert np.all(np.abs(y - yg) <= 2 * tol), np.abs(y - yg).max()


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("W", [5, 21])
def test_conv_depthwise_nonfinite_stays_local(isa, W):
    """Oracle: float64 numpy direct conv. The in-place stride-1 paths read the neighbouring row at the border columns
    and drop it: an inf there must not leak into the other row's border (it would give nan)."""
    xs, k, s, dil, pb = (1, 1, 1, 4, W), (1, 3, 3), (1, 1, 1), (1, 1, 1), (0, 1, 1)
    x = np.ones(xs, np.float32)
    x[0, 0, 0, 1, W - 1] = np.inf              # last column of row 1: row 2's column 0 reads it wrapped
    x[0, 0, 0, 2, 0] = -np.inf                 # first column of row 2: row 1's last column reads it wrapped
    w = np.ones((1, 1) + k, np.float32)
    y = np.empty((1, 1, 1, 4, W), np.float32)
    VARIANTS[isa].conv_depthwise_f32(x.reshape(-1), xs, w.reshape(-1), 1, 1, k, s, dil, pb, (1, 4, W), None,
                                     y.reshape(-1))
    ref = _ref_conv(x.astype(np.float64), w, None, 1, s, dil, pb, (1, 4, W))
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ref))
    np.testing.assert_array_equal(y[np.isfinite(ref)], ref[np.isfinite(ref)])