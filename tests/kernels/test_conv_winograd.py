"""Winograd paths of the channel-last conv, F(2x2, 3x3) and F(4x4, 3x3) (conv_nhwc_f32(..., path="winograd" /
"winograd4"), _k_winograd.pxi).

Oracle: the float64 numpy direct convolution of test_conv.py on the NCHW-transposed data, for every SIMD variant (the
generic one has no winograd path and must refuse it). Error bound: the transforms scale the terms of the GEMM, so the
usual K*eps bound grows by their gains. Position xi of the transformed patch carries |V_xi| <= |B^T (x) B^T|_1 row
sum * max|x| and |U_xi| <= |G (x) G|_1 row sum * max|w|, and output q sums the positions weighted by |A^T (x) A^T|;
S_m, the largest such weighted sum over the outputs (computed below from the matrices: 64 for F(2x2), 2304 for
F(4x4) -- the price of its interpolation points +-2), gives 2 * (S_m * Cin + S_m / 4) * eps32 * max|x| * max|w|
(x, w uniform in [-1, 1]) plus the bias / residual rounding. Shapes are drawn by hypothesis: 1-sized and odd images (a half-filled last tile), primes and channel counts
just off the micro-kernel tiles (MR tiles, NR output channels) and K blocks; results must not depend on the thread
count (bit-identical)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from tests.kernels.test_conv import EPS, VARIANTS, _ref_conv

SIMD = {isa: mod for isa, mod in VARIANTS.items() if isa != "generic"}
CHANNELS = st.sampled_from([1, 2, 3, 5, 12, 13, 16, 17, 31, 32, 33, 64])
ACTS = [("",), ("Relu",), ("Clip", -0.5, 0.5), ("LeakyRelu", 0.1), ("Sigmoid",), ("HardSigmoid", 0.2, 0.5),
        ("Tanh",), ("HardSwish",)]


def _act(name, *p):
    return {"": lambda r: r, "Relu": lambda r: np.maximum(r, 0), "Clip": lambda r: np.clip(r, *p),
            "LeakyRelu": lambda r: np.where(r >= 0, r, r * p[0]), "Sigmoid": lambda r: 1 / (1 + np.exp(-r)),
            "HardSigmoid": lambda r: np.clip(p[0] * r + p[1], 0, 1), "Tanh": np.tanh,
            "HardSwish": lambda r: r * np.clip(r / 6 + 0.5, 0, 1)}[name]


# the transforms (Lavin & Gray's): m -> (B^T, G, A^T)
MATRICES = {
    2: ([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], [[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]],
        [[1, 1, 1, 0], [0, 1, -1, -1]]),
    4: ([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0],
         [0, 4, 0, -5, 0, 1]],
        [[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
         [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]],
        [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]),
}
PATHS = {2: "winograd", 4: "winograd4"}


def _gain(m):
    """S_m of the module docstring."""
    bt, g, at = (np.abs(np.kron(np.array(a, float), np.array(a, float))) for a in MATRICES[m])
    return float((at * (bt.sum(1) * g.sum(1))[None]).sum(1).max())


GAIN = {m: _gain(m) for m in MATRICES}


def test_transform_matrices_compute_the_correlation():
    """The matrices the bound is computed from are the ones that compute a 3-tap correlation: A^T [(G g) (.) (B^T
    d)] = d (*) g (oracle: numpy.correlate), and the gains are what the docstring says."""
    rng = np.random.default_rng(0)
    for m, (bt, g, at) in MATRICES.items():
        d, k = rng.uniform(-1, 1, m + 2), rng.uniform(-1, 1, 3)
        np.testing.assert_allclose(np.array(at) @ ((np.array(g) @ k) * (np.array(bt) @ d)),
                                   np.correlate(d, k, "valid"), rtol=1e-12)
    assert GAIN == {2: 64.0, 4: 2304.0}


def _wino(mod, w, m=2):
    wp = np.empty(mod.conv_wino_pack_weight_size(w.shape[0], w.shape[1], m), np.float32)
    mod.conv_wino_pack_weight(w, wp, m)
    return wp


def _setup(xs, cout, pads, outs, seed):
    """x (N, C, H, W), w, bias, NHWC residual, the NHWC x, and the float64 oracle conv(x, w) (NHWC, no bias)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, (cout, xs[1], 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, cout).astype(np.float32)
    res = rng.uniform(-1, 1, (xs[0],) + outs + (cout,)).astype(np.float32)
    ref = _ref_conv(x[:, :, None], w[:, :, None], None, 1, (1, 1, 1), (1, 1, 1), (0,) + pads,
                    (1,) + outs)[:, :, 0].transpose(0, 2, 3, 1)
    return x, w, b, res, np.ascontiguousarray(x.transpose(0, 2, 3, 1)), ref


def _tol(cin, m=2):
    return 2 * (GAIN[m] * cin + GAIN[m] / 4) * EPS + 4 * EPS


def _conv(mod, xh, wp, cout, pads, outs, b, res, y, nthreads, act=None, ldy=0, m=2):
    mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, 1, (3, 3), (1, 1), (1, 1), pads, outs, b,
                      None if res is None else res.reshape(-1), y.reshape(-1), False, nthreads, act, PATHS[m], ldy)
    return y


@st.composite
def cases(draw):
    N = draw(st.integers(1, 2))
    cin, cout = draw(CHANNELS), draw(CHANNELS)
    H, W = draw(st.integers(1, 13)), draw(st.integers(1, 13))
    ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    eh, ew = draw(st.integers(0, 2)), draw(st.integers(0, 2))      # end pads: the output size
    Ho, Wo = H + ph + eh - 2, W + pw + ew - 2
    if Ho < 1 or Wo < 1:
        ph = pw = eh = ew = 1
        Ho, Wo = H, W
    return (N, cin, H, W), cout, (ph, pw), (Ho, Wo), draw(st.booleans()), draw(st.booleans()), \
        draw(st.sampled_from(ACTS)), draw(st.sampled_from([2, 4]))


@settings(max_examples=60, deadline=None)
@given(case=cases())
def test_winograd_matches_direct_conv_every_simd_isa(case):
    """Oracle: float64 direct conv (+ res, then the activation); 1 and 2 threads bit-identical; within the bound
    above, for both tile sizes."""
    xs, cout, pads, outs, with_bias, with_res, act, m = case
    x, w, b, res, xh, ref = _setup(xs, cout, pads, outs, sum(xs) + cout + sum(pads))
    b = b if with_bias else None
    res = res if with_res else None
    ref = _act(*act)(ref + (b if with_bias else 0) + (res if with_res else 0))
    yshape = (xs[0],) + outs + (cout,)
    for isa, mod in SIMD.items():
        wp = _wino(mod, w, m)
        y1 = _conv(mod, xh, wp, cout, pads, outs, b, res, np.full(yshape, np.nan, np.float32), 1, act, m=m)
        y2 = _conv(mod, xh, wp, cout, pads, outs, b, res, np.full(yshape, np.nan, np.float32), 2, act, m=m)
        np.testing.assert_array_equal(y1, y2, err_msg=isa)
        np.testing.assert_allclose(y1, ref, rtol=0, atol=_tol(xs[1], m), err_msg=isa)


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("isa", list(SIMD))
@pytest.mark.parametrize("shape", [(1, 64, 56, 56, 64), (1, 300, 9, 11, 40), (2, 520, 5, 4, 70), (1, 128, 7, 7, 33),
                                   (1, 16, 55, 55, 64)], ids=lambda s: "x".join(map(str, s)))
def test_winograd_model_shapes(isa, shape, m):
    """ResNet's 56x56x64, SqueezeNet's 55x55x16, and Cin across one and two K blocks (KC = 256: 300, 520) with odd
    images and output channels off the NR tile: oracle float64 direct conv; 1 and 2 threads bit-identical."""
    mod = SIMD[isa]
    N, cin, H, W, cout = shape
    x, w, b, res, xh, ref = _setup((N, cin, H, W), cout, (1, 1), (H, W), cin + cout)
    wp = _wino(mod, w, m)
    y1 = _conv(mod, xh, wp, cout, (1, 1), (H, W), b, res, np.empty((N, H, W, cout), np.float32), 1, "Relu", m=m)
    y2 = _conv(mod, xh, wp, cout, (1, 1), (H, W), b, res, np.empty((N, H, W, cout), np.float32), 2, "Relu", m=m)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_allclose(y1, np.maximum(ref + b + res, 0), rtol=0, atol=_tol(cin, m))


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("isa", list(SIMD))
def test_winograd_residual_in_place_and_channel_slice(isa, m):
    """res may be y itself (each residual element is read before that element of y is written): same result as a
    separate res; y may be a channel slice of a wider tensor (ldy), the channels around it untouched. Oracle: float64
    direct conv."""
    mod = SIMD[isa]
    xs, cout, pads, outs = (1, 20, 9, 7), 37, (1, 1), (9, 7)
    x, w, b, res, xh, ref = _setup(xs, cout, pads, outs, 3)
    wp = _wino(mod, w, m)
    want = _conv(mod, xh, wp, cout, pads, outs, b, res, np.empty(res.shape, np.float32), 2, m=m)
    y = res.copy()
    np.testing.assert_array_equal(_conv(mod, xh, wp, cout, pads, outs, b, y, y, 2, m=m), want)
    np.testing.assert_allclose(want, ref + b + res, rtol=0, atol=_tol(xs[1], m))
    wide = np.full(outs + (cout + 9,), 7.0, np.float32)
    flat = wide.reshape(-1)[5:5 + (outs[0] * outs[1] - 1) * (cout + 9) + cout]
    mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, 1, (3, 3), (1, 1), (1, 1), pads, outs, b, None, flat,
                      False, 2, None, PATHS[m], cout + 9)
    np.testing.assert_allclose(wide[..., 5:5 + cout], (ref + b)[0], rtol=0, atol=_tol(xs[1], m))
    assert (wide[..., :5] == 7).all() and (wide[..., 5 + cout:] == 7).all()


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("isa", list(SIMD))
@pytest.mark.parametrize("act", [("",), ("Relu",), ("Clip", -0.5, 0.5), ("LeakyRelu", 0.1), ("Sigmoid",)],
                         ids=lambda a: a[0] or "none")
def test_winograd_epilogue_infinite_lanes(isa, m, act):
    """The vector epilogue (bias, then the activation in the vector, or onnxep_act1 over the stored values) on
    infinite sums: a bias of -inf / +inf in some channels, both in the vector part and in the scalar tail of a panel
    (37 channels). Clip(-inf) is the lower bound and Clip(+inf) the upper one (no lane made NaN on the way), Relu(-inf)
    is 0, LeakyRelu(-inf) is -inf. Oracle: numpy on the float64 conv."""
    mod = SIMD[isa]
    xs, cout, pads, outs = (1, 8, 9, 7), 37, (1, 1), (9, 7)
    x, w, b, _, xh, ref = _setup(xs, cout, pads, outs, 11)
    b[[0, 5, 17, 33, 36]] = -np.inf
    b[[1, 16, 34]] = np.inf
    wp = _wino(mod, w, m)
    y = _conv(mod, xh, wp, cout, pads, outs, b, None, np.empty((1,) + outs + (cout,), np.float32), 2, act, m=m)
    with np.errstate(over="ignore", invalid="ignore"):
        want = _act(*act)(ref + b)
    inf = ~np.isfinite(want)
    np.testing.assert_array_equal(y[inf], want[inf])
    np.testing.assert_allclose(y[~inf], want[~inf], rtol=0, atol=_tol(xs[1], m))
    assert not np.isnan(y).any()


def test_winograd_refusals():
    """What the winograd path does not take raises ValueError naming it, before anything runs: other geometries, a
    packing of the wrong length, and the generic variant (no SIMD micro-kernel)."""
    mod = next(iter(SIMD.values())) if SIMD else None
    if mod is None:
        pytest.skip("no SIMD variant on this machine")
    wp = np.zeros(mod.conv_wino_pack_weight_size(8, 4), np.float32)
    x, y = np.zeros(4 * 25, np.float32), np.zeros(8 * 25, np.float32)
    ok = ((1, 5, 5, 4), wp, 8, 1, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5))
    mod.ConvNhwc(*ok, False, None, "winograd").run(x, None, None, y)
    with pytest.raises(ValueError, match="packed weight has"):     # F(2x2)'s packing is too short for F(4x4)
        mod.ConvNhwc(*ok, False, None, "winograd4")
    with pytest.raises(ValueError, match="tile m must be 2"):
        mod.conv_wino_pack_weight_size(8, 4, 3)
    for i, bad in ((4, (5, 5)), (5, (2, 2)), (6, (2, 1))):
        args = list(ok)
        args[i] = bad
        with pytest.raises(ValueError, match="winograd path takes 3x3"):
            mod.ConvNhwc(*args, False, None, "winograd")
    with pytest.raises(ValueError, match="winograd path takes 3x3"):
        mod.ConvNhwc((1, 5, 5, 4), wp, 8, 2, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5), False, None, "winograd")
    with pytest.raises(ValueError, match="packed weight has"):
        mod.ConvNhwc((1, 5, 5, 4), wp[:-1], 8, 1, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5), False, None, "winograd")
    with pytest.raises(ValueError, match=r"w must be \(cout"):
        mod.conv_wino_pack_weight(np.zeros((8, 4, 3, 2), np.float32), wp)
    gen = VARIANTS["generic"]
    assert not gen.wino_applies((3, 3), (1, 1), (1, 1), 1, 4)
    with pytest.raises(ValueError, match="needs a SIMD variant"):
        gen.ConvNhwc(*ok, False, None, "winograd")


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("cout,cin", [(1, 1), (3, 5), (17, 33), (40, 1), (1, 70), (65, 31)])
def test_pack_weight_is_g_w_gt_of_every_filter(isa, m, cout, cin):
    """conv_wino_pack_weight: plane xi = (r, q) of the packed weight is the cin x cout matrix U[c, o] = (G g_oc G^T)[r,
    q] packed by sgemm_pack_b (oracle: G g G^T in float64 numpy, rounded once to float32; 1 float32 ulp of slack for
    the order of the double sums), on every variant, filters and channels off the 32 x 32 transpose tiles and the NR
    panels."""
    mod = VARIANTS[isa]
    w = np.random.default_rng(cout * 100 + cin).uniform(-1, 1, (cout, cin, 3, 3)).astype(np.float32)
    g = np.array(MATRICES[m][1], np.float64)
    u = np.einsum("rk,ockl,ql->rqco", g, w.astype(np.float64), g).astype(np.float32)   # (al, al, cin, cout)
    blen = mod.sgemm_pack_b_size(cin, cout)
    expect = np.empty((m + 2) ** 2 * blen, np.float32)
    for xi, plane in enumerate(u.reshape(-1, cin, cout)):
        mod.sgemm_pack_b(np.ascontiguousarray(plane), False, expect[xi * blen:(xi + 1) * blen])
    got = np.empty(mod.conv_wino_pack_weight_size(cout, cin, m), np.float32)
    mod.conv_wino_pack_weight(w, got, m)
    np.testing.assert_allclose(got, expect, rtol=0, atol=float(np.spacing(np.float32(np.abs(u).max()))))


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("isa", list(SIMD))
def test_winograd_blocking_does_not_change_the_result(isa, m):
    """(conv2t) The V block budget, the weight rule (U past half the L2: fewest blocks, slabs for the threads), the
    block count rounded up to a multiple of the threads under it (wino_even_blocks) and the slabs per thread only
    regroup the work: every setting on 1, 2 and 3 threads is bit-identical to the old blocking
    (256 KB of V, no rule), incl. blocks of WINO_MAX_TILES tiles (a 64 MiB budget) and one block cut into a slab per
    panel; oracle: float64 direct conv. 256 -> 260 channels: U of 4 MiB (F(2x2)) / 9 MiB (F(4x4)), past half of any L2
    up to 8 MiB, so the rule applies; 2 images of 25x23: 312 / 84 tiles, an odd last tile row and column."""
    mod = SIMD[isa]
    xs, cout, pads, outs = (2, 256, 25, 23), 260, (1, 1), (25, 23)
    x, w, b, res, xh, ref = _setup(xs, cout, pads, outs, 11)
    wp = _wino(mod, w, m)
    before = mod.wino_blocking()
    even_before = mod.wino_even_blocks()
    try:
        mod.wino_blocking(262144, False, 0)
        want = _conv(mod, xh, wp, cout, pads, outs, b, res, np.empty(res.shape, np.float32), 1, "Relu", m=m)
        np.testing.assert_allclose(want, np.maximum(ref + b + res, 0), rtol=0, atol=_tol(xs[1], m))
        for setting in [(0, True, 2), (0, True, 1), (0, True, 0), (64 << 20, True, 1), (64 << 20, False, 0),
                        (1, True, 64)]:
            mod.wino_blocking(*setting)
            for even in (True, False):
                mod.wino_even_blocks(even)
                for nth in (1, 2, 3):
                    got = _conv(mod, xh, wp, cout, pads, outs, b, res, np.empty(res.shape, np.float32), nth, "Relu",
                                m=m)
                    np.testing.assert_array_equal(got, want, err_msg=f"{setting} even={even} on {nth} thread(s)")
    finally:
        mod.wino_blocking(*before[:3])
        mod.wino_even_blocks(even_before)


@pytest.mark.parametrize("shape", [((1, 128, 14, 14), 192), ((1, 96, 28, 28), 128), ((1, 128, 14, 14), 160)],
                         ids=["6panels-1block", "4panels", "5panels"])
@pytest.mark.parametrize("isa", list(SIMD))
def test_winograd_even_slabs_keep_the_result(isa, shape):
    """Under the weight rule, one or two blocks of tiles cut into equal slabs of weight panels, a count the threads
    share evenly (_wino_pslab_even: 6 panels on 2 threads are 2 slabs of 3, not 3 of 2; 5 panels keep the rule's
    slabs): on 1, 2 and 3 threads the same bits; oracle: float64 direct conv."""
    mod = SIMD[isa]
    xs, cout = shape
    pads, outs = (1, 1), xs[2:]
    x, w, b, res, xh, ref = _setup(xs, cout, pads, outs, 5)
    for m in (2, 4):
        wp = _wino(mod, w, m)
        want = _conv(mod, xh, wp, cout, pads, outs, b, res, np.empty(res.shape, np.float32), 1, "Relu", m=m)
        np.testing.assert_allclose(want, np.maximum(ref + b + res, 0), rtol=0, atol=_tol(xs[1], m))
        for nth in (2, 3):
            got = _conv(mod, xh, wp, cout, pads, outs, b, res, np.empty(res.shape, np.float32), nth, "Relu", m=m)
            np.testing.assert_array_equal(got, want, err_msg=f"F({m}x{m}) on {nth} threads")


@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("isa", list(SIMD))
def test_winograd_panel_prefetch_does_not_change_the_result(isa, m):
    """The next plane's (and past the last plane, the next panel's) weight fetched ahead of its GEMM
    (conv_panel_prefetch, on by default) takes another loop in the micro-kernel: on and off give bit-identical results
    on 1 and 2 threads, within the float64 direct conv's bound. 300 -> 70 channels: two K blocks of U (runs of 150),
    3 panels (AVX-512; 5 on AVX2), the last one 6 channels wide; a 9x11 image: a half-filled last tile row / column."""
    mod = SIMD[isa]
    xs, cout, pads, outs = (1, 300, 9, 11), 70, (1, 1), (9, 11)
    x, w, b, res, xh, ref = _setup(xs, cout, pads, outs, 12)
    wp = _wino(mod, w, m)
    before = mod.conv_panel_prefetch()
    assert before is True
    try:
        ys = {}
        for on in (False, True):
            assert mod.conv_panel_prefetch(on) is (not on)
            for nth in (1, 2):
                ys[on, nth] = _conv(mod, xh, wp, cout, pads, outs, b, res, np.empty(res.shape, np.float32), nth,
                                    "Relu", m=m)
        np.testing.assert_allclose(ys[True, 1], np.maximum(ref + b + res, 0), rtol=0, atol=_tol(xs[1], m))
        for key, y in ys.items():
            np.testing.assert_array_equal(y, ys[True, 1], err_msg=f"prefetch, threads {key}")
    finally:
        mod.conv_panel_prefetch(before)
