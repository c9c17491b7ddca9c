"""Which path ConvNhwc's "auto" takes for a dense conv (_dconv_auto): the direct path (A read in place) within one K
block; past it, the packed GEMM path where the direct tiles would hold fewer than 2/3 MR pixels on average (small
images: mostly border pixels, a tile or two per row), else direct.

Oracles: the tile counts worked out by hand below (the choice), and the float64 numpy direct convolution of
test_conv.py (the result of the auto path on those geometries, every ISA variant; tolerance as test_conv_nhwc.py)."""
import numpy as np
import pytest

from tests.kernels.test_conv import EPS, VARIANTS
from tests.kernels.test_conv_nhwc import _expected, _run

RNG = np.random.default_rng(53)


def _case(xshape, cout, k, s, residual, relu):
    """Random X (NCHW), W and bias (and an NHWC residual) of a k x k stride-s conv padded (k - 1) // 2, and what the
    tests check against: (x, w, b, res, p, outs, the float64 oracle's output, its tolerance)."""
    x = RNG.uniform(-1, 1, xshape).astype(np.float32)
    w = RNG.uniform(-1, 1, (cout, xshape[1], k, k)).astype(np.float32)
    b = RNG.uniform(-1, 1, cout).astype(np.float32)
    p = (k - 1) // 2
    outs = ((xshape[2] + 2 * p - k) // s + 1, (xshape[3] + 2 * p - k) // s + 1)
    res = RNG.uniform(-1, 1, (xshape[0],) + outs + (cout,)).astype(np.float32) if residual else None
    want = _expected(x.astype(np.float64), w.astype(np.float64), b, res, 1, (s, s), (1, 1), (p, p), outs, relu)
    return x, w, b, res, p, outs, want, 2 * (xshape[1] * k * k + 2) * EPS


@pytest.mark.parametrize("xshape, k, s, out, direct, direct_avx2", [
    # within one K block (Kc <= KC = 256): direct whatever the tiles
    ((3, 16, 16, 16), 3, 2, (8, 8), True, True),
    ((3, 4, 4, 16), 3, 2, (2, 2), True, True),
    # 8x8 32 -> 64 3x3/2 (Kc 288): 4x4 output, per image 4 interior tiles of 3 pixels + 2 border tiles (bands of
    # rows {0}, {1, 2, 3} in column 0): 18 tiles for 48 pixels, 2.7 a tile, under 2/3 MR (8; 4 on AVX2)
    ((3, 8, 8, 32), 3, 2, (4, 4), False, False),
    ((3, 4, 4, 64), 3, 2, (2, 2), False, False),            # 1 pixel a tile
    # 7 rows of 5 interior pixels + 2 border columns in 3 bands: 13 tiles, 49 / 13 = 3.8 a tile
    ((1, 7, 7, 512), 3, 1, (7, 7), False, False),
    ((1, 14, 14, 256), 3, 2, (7, 7), False, True),          # 9 tiles: 5.4
    # 14 rows of 13 interior pixels in 2 tiles (AVX2: 3) + column 0 in bands {0}, {1..13}: 31 tiles (46), 6.3 (4.3)
    ((1, 28, 28, 128), 3, 2, (14, 14), False, True),
    ((1, 14, 14, 256), 3, 1, (14, 14), True, True),         # 20 tiles (AVX2: 36): 9.8 (5.4)
    ((1, 28, 28, 128), 3, 1, (28, 28), True, True),
    ((1, 56, 56, 64), 3, 1, (56, 56), True, True),
    ((1, 7, 7, 512), 1, 1, (7, 7), True, True),            # pointwise: one long row of full tiles
])
def test_auto_path_choice(xshape, k, s, out, direct, direct_avx2):
    for name, mod in VARIANTS.items():
        p = (k - 1) // 2
        got = mod.conv_direct_auto(xshape, (k, k), (s, s), (1, 1), (p, p), out)
        want = {"generic": False, "avx2": direct_avx2}.get(name, direct)   # generic: no direct path
        assert got is want, name


@pytest.mark.parametrize("xshape, cout, k, s", [
    ((3, 64, 8, 8), 64, 3, 2), ((3, 64, 4, 4), 128, 3, 2), ((1, 96, 7, 7), 40, 3, 1), ((2, 40, 5, 6), 33, 3, 1),
    ((3, 128, 2, 2), 128, 3, 1),
])
@pytest.mark.parametrize("relu", [False, True])
def test_auto_path_on_small_images_matches_direct_conv(xshape, cout, k, s, relu):
    """The geometries the rule sends to the packed path (and tails: 33 channels, 5x6 images), on every variant, with
    a bias and a residual, against the float64 oracle."""
    x, w, b, res, p, outs, want, tol = _case(xshape, cout, k, s, True, relu)
    for name, mod in VARIANTS.items():
        for nth in (1, 2):
            y = _run(mod, x, w, b, res, 1, (s, s), (1, 1), (p, p), outs, relu, nth)
            np.testing.assert_allclose(y, want, rtol=0, atol=tol, err_msg=f"{name} nthreads={nth}")


@pytest.mark.parametrize("xshape, cout, k, s", [
    ((1, 256, 14, 14), 1024, 1, 1),     # 196 pixels in 3 rows of 66, 66, 64: 4 slabs of 8 panels on 2 threads
    ((1, 64, 14, 14), 320, 1, 1),       # 10 panels
    ((2, 48, 9, 11), 200, 3, 1),        # border tiles, 7 panels (AVX-512), 2 images
])
def test_direct_path_slabs_on_threads(xshape, cout, k, s):
    """The direct path's items cut by _dconv_slab_mt on 2 and 3 threads: every output element once,
    bit-identical to the 1-thread run (each element adds in the same order on any thread) and within the float64
    numpy oracle's bound, on every variant."""
    x, w, b, _, p, outs, want, tol = _case(xshape, cout, k, s, False, True)
    for name, mod in VARIANTS.items():
        y1 = _run(mod, x, w, b, None, 1, (s, s), (1, 1), (p, p), outs, True, 1)
        np.testing.assert_allclose(y1, want, rtol=0, atol=tol, err_msg=name)
        for nth in (2, 3):
            y = _run(mod, x, w, b, None, 1, (s, s), (1, 1), (p, p), outs, True, nth)
            np.testing.assert_array_equal(y, y1, err_msg=f"{name} nthreads={nth}")


@pytest.mark.parametrize("xshape, cout, k, s", [
    ((1, 300, 7, 7), 100, 1, 1),        # K 300: two K blocks (150 each), 4 panels, the last 4 channels wide
    ((1, 512, 7, 7), 96, 1, 1),         # K 512: two blocks of 256, 3 panels (AVX-512; 6 on AVX2)
    ((2, 40, 9, 10), 70, 3, 1),         # K 360 over two blocks, border columns and bands, 2 images, 3 panels
    ((1, 16, 5, 5), 33, 3, 2),          # one K block, a 1-channel last panel, stride 2
    ((1, 24, 9, 11), 40, 1, 1),         # K 24, under DCONV_CROW_MIN_K: no output-row fetch even when switched on
])
@pytest.mark.parametrize("nth", [1, 2])
def test_direct_path_panel_prefetch(xshape, cout, k, s, nth):
    """path="direct" over several weight panels per work item, K blocked or not: the first tile over
    each panel fetches the next panel (onnxep_dconv_uk's pfo, the run's own panel stride sb past a K block border);
    the fetch must not change a result. Every SIMD variant (generic has no direct path), with a bias, a residual and
    Relu, within the float64 numpy oracle's bound, and bit-identical between 1 and nth threads and with either fetch
    off (conv_panel_prefetch(False): the micro-kernel's other K loop; conv_crow_prefetch(False): no fetch of the
    tile's output and residual rows)."""
    x, w, b, res, p, outs, want, tol = _case(xshape, cout, k, s, True, True)
    ran = 0
    for name, mod in VARIANTS.items():
        if name == "generic":
            continue
        wp = np.empty(mod.conv_nhwc_pack_weight_size(cout, xshape[1] * k * k, 1), np.float32)
        mod.conv_nhwc_pack_weight(w, 1, wp)
        xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        ys = []
        before = mod.conv_panel_prefetch(), mod.conv_crow_prefetch()
        assert before == (True, True)
        try:
            for on, crow, t in ((True, True, 1), (True, True, nth), (False, False, nth), (False, True, 1),
                                (True, False, 1)):
                mod.conv_panel_prefetch(on)
                mod.conv_crow_prefetch(crow)
                y = np.full((xshape[0],) + outs + (cout,), np.nan, np.float32)
                mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, 1, (k, k), (s, s), (1, 1), (p, p), outs, b,
                                  res.reshape(-1), y.reshape(-1), True, t, None, "direct")
                ys.append(y)
        finally:
            mod.conv_panel_prefetch(before[0])
            mod.conv_crow_prefetch(before[1])
        np.testing.assert_allclose(ys[0], want, rtol=0, atol=tol, err_msg=name)
        np.testing.assert_array_equal(ys[1], ys[0], err_msg=f"{name} nthreads={nth}")
        for y in ys[2:]:
            np.testing.assert_array_equal(y, ys[0], err_msg=f"{name}: a prefetch setting changed the result")
        ran += 1
    assert ran >= 1     # at least one SIMD variant runs on this machine
