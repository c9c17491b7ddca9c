"""The direct conv path's k-pair micro-kernel (onnxep_dconv_kp, conv_kpair): convs of at most one SIMD vector
of output channels per group (AVX-512: 16, AVX2: 8) read the weight as rows of two k interleaved, one 64-bit
broadcast of x feeding both. What can go wrong: a run starting at an odd k or ending at an even one (odd channel
counts, kernel rows cut by the padding at the borders, odd K), the fold of the two parities' sums into channels, the
tail channels masked at the store, groups, and the epilogue (bias, residual, Relu).

Oracle: the float64 numpy direct convolution of test_conv.py (tolerance as test_conv_nhwc.py), on every SIMD variant
(generic has no direct path), with the k-pair kernel forced on and off (conv_kpair): both within the bound, and every
thread count bit-identical to one thread."""
import numpy as np
import pytest

from tests.kernels.test_conv import EPS, VARIANTS
from tests.kernels.test_conv_nhwc import _expected

RNG = np.random.default_rng(2024)


def _direct(mod, x, w, b, res, group, k, s, p, outs, relu, nth):
    cout = w.shape[0]
    wp = np.empty(mod.conv_nhwc_pack_weight_size(cout, int(np.prod(w.shape[1:])), group), np.float32)
    mod.conv_nhwc_pack_weight(w, group, wp)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    y = np.full((x.shape[0],) + outs + (cout,), np.nan, np.float32)
    mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, group, (k, k), (s, s), (1, 1), (p, p), outs, b,
                      None if res is None else res.reshape(-1), y.reshape(-1), relu, nth, None, "direct")
    return y


def _case(xshape, cout, k, s, group, residual):
    """Random x, W, bias and (when residual) residual of a conv with "same" padding p = (k - 1) // 2: (x, w, b, p,
    output size, residual or None)."""
    x = RNG.uniform(-1, 1, xshape).astype(np.float32)
    w = RNG.uniform(-1, 1, (cout, xshape[1] // group, k, k)).astype(np.float32)
    b = RNG.uniform(-1, 1, cout).astype(np.float32)
    p = (k - 1) // 2
    outs = ((xshape[2] + 2 * p - k) // s + 1, (xshape[3] + 2 * p - k) // s + 1)
    res = RNG.uniform(-1, 1, (xshape[0],) + outs + (cout,)).astype(np.float32) if residual else None
    return x, w, b, p, outs, res


@pytest.mark.parametrize("xshape, cout, k, s, group", [
    ((3, 3, 20, 20), 16, 7, 2, 1),      # a 3-channel stem: runs of 21 k (odd), 16 channels (two pair vectors)
    ((2, 8, 9, 11), 8, 3, 1, 1),        # 8 -> 8: one pair vector (AVX-512), K 72, border columns and bands
    ((1, 5, 7, 6), 3, 3, 1, 1),         # odd C: runs of 5 and 15, 3 channels (masked tail)
    ((3, 16, 8, 8), 12, 1, 1, 1),       # pointwise, 12 channels
    ((1, 7, 6, 5), 13, 1, 1, 1),        # pointwise, K 7 (odd), 13 channels
    ((2, 16, 8, 8), 9, 3, 2, 1),        # stride 2, 9 channels
    ((1, 12, 6, 6), 8, 3, 1, 2),        # 2 groups of 6 -> 4
    ((1, 600, 4, 4), 5, 1, 1, 1),       # K 600: three K blocks of the packed weight (one panel)
])
@pytest.mark.parametrize("residual, relu", [(False, False), (True, True)])
def test_kpair_matches_oracle_on_and_off(xshape, cout, k, s, group, residual, relu):
    x, w, b, p, outs, res = _case(xshape, cout, k, s, group, residual)
    want = _expected(x.astype(np.float64), w.astype(np.float64), b, res, group, (s, s), (1, 1), (p, p), outs, relu)
    tol = 2 * (xshape[1] // group * k * k + 2) * EPS
    ran = 0
    for name, mod in VARIANTS.items():
        if name == "generic":
            continue
        before = mod.conv_kpair()
        assert before is True       # on by default
        try:
            for on in (True, False):
                assert mod.conv_kpair(on) is (before if on else True)
                y1 = _direct(mod, x, w, b, res, group, k, s, p, outs, relu, 1)
                np.testing.assert_allclose(y1, want, rtol=0, atol=tol, err_msg=f"{name} kpair={on}")
                for nth in (2, 3):
                    y = _direct(mod, x, w, b, res, group, k, s, p, outs, relu, nth)
                    np.testing.assert_array_equal(y, y1, err_msg=f"{name} kpair={on} nthreads={nth}")
        finally:
            mod.conv_kpair(before)
        ran += 1
    assert ran >= 1     # at least one SIMD variant runs on this machine


def test_kpair_changes_the_summation_order():
    """The toggle reaches the kernel: with k-pairs on, a 16 -> 8 conv's products add in another order (even k, odd
    k, then the two), so on data chosen to round differently the results differ in the last bits; off, the plain
    kernel's k order. Both are checked against the oracle above; here only that the two paths are distinct."""
    x = RNG.uniform(-1, 1, (1, 64, 6, 6)).astype(np.float32) * np.float32(1e3)
    w = RNG.uniform(-1, 1, (8, 64, 1, 1)).astype(np.float32)
    differ = 0
    for name, mod in VARIANTS.items():
        if name == "generic":
            continue
        before = mod.conv_kpair()
        try:
            ys = []
            for on in (True, False):
                mod.conv_kpair(on)
                ys.append(_direct(mod, x, w, None, None, 1, 1, 1, 0, (6, 6), False, 1))
        finally:
            mod.conv_kpair(before)
        differ += int(not np.array_equal(ys[0], ys[1]))
    assert differ == sum(1 for n in VARIANTS if n != "generic")


@pytest.mark.parametrize("xshape, cout, k, s, out, want", [
    # past one K block (Kc > 256), narrow outputs. want: variant -> (direct with the k-pair kernel on, with it off).
    # On, a conv of at most one vector of channels (AVX-512: 16, AVX2: 8) goes direct from MR / 4 pixels a tile
    # (AVX-512 MR 12: 3; AVX2 MR 6: 1.5), or at any fill with up to half a vector; off (conv_kpair(False)), the general
    # rule: 2/3 MR (8; 4), or 4 where the K x NR weight panel takes at most 1/8 of L2 (K 576 here: on both).
    # Tile counts as in test_conv_dense_paths.py:
    # 16 rows x 2 tiles (AVX2: 3) + 2 columns x 3 bands: 38 tiles (54), 6.7 pixels a tile (4.7)
    ((3, 16, 16, 64), 16, 3, 1, (16, 16), {"avx512": (True, True), "avx2": (True, True)}),
    # 4 rows x 1 tile + column 0 x 2 bands: 6 tiles for 16 pixels, 2.7
    ((3, 8, 8, 64), 16, 3, 2, (4, 4), {"avx512": (False, False), "avx2": (False, False)}),
    # 4 rows x 1 + 2 columns x 3 bands: 10 tiles for 16 pixels, 1.6
    ((3, 4, 4, 64), 16, 3, 1, (4, 4), {"avx512": (False, False), "avx2": (False, False)}),
    ((3, 4, 4, 128), 8, 3, 1, (4, 4), {"avx512": (True, False), "avx2": (True, False)}),
])
def test_auto_path_choice_narrow_outputs(xshape, cout, k, s, out, want):
    """_dconv_auto's choice for narrow outputs past one K block, the k-pair kernel on and off."""
    p = (k - 1) // 2
    for name, mod in VARIANTS.items():
        if name == "generic":
            assert not mod.conv_direct_auto(xshape, (k, k), (s, s), (1, 1), (p, p), out, 1, cout)
            continue
        before = mod.conv_kpair()
        try:
            on = mod.conv_direct_auto(xshape, (k, k), (s, s), (1, 1), (p, p), out, 1, cout)
            mod.conv_kpair(False)
            off = mod.conv_direct_auto(xshape, (k, k), (s, s), (1, 1), (p, p), out, 1, cout)
        finally:
            mod.conv_kpair(before)
        assert (on, off) == want[name], name


def _bf16_round(a):
    """float32 -> the nearest bf16 (ties to even), as float32 (vcvtne2ps2bf16's rounding)."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("xshape, cout, k, s, group", [
    ((3, 3, 20, 20), 16, 7, 2, 1),      # a 3-channel stem: runs of 21 k (odd start after 10 pairs)
    ((2, 8, 9, 11), 12, 3, 1, 1),       # border columns and bands
    ((1, 5, 7, 6), 9, 3, 1, 1),         # runs of 5 and 15, 9 channels
    ((1, 7, 6, 5), 16, 1, 1, 1),        # pointwise, K 7
    ((1, 12, 6, 6), 20, 3, 1, 2),       # 2 groups of 6 -> 10 (x's bf16 copy offset per group)
    ((1, 600, 4, 4), 16, 1, 1, 1),      # K over three blocks of the packed weight
    # up to 8 channels: quads of k (runs starting 1, 2 or 3 past a quad, ending short of one)
    ((3, 3, 20, 20), 8, 7, 2, 1),       # runs of 21 at k 0, 21, 42, ...: every offset in a quad
    ((2, 8, 9, 11), 8, 3, 1, 1),        # runs of 8 / 16 / 24, border columns and bands
    ((1, 5, 7, 6), 3, 3, 1, 1),         # runs of 5 and 15, 3 channels
    ((1, 6, 7, 6), 2, 3, 1, 1),         # runs of 6 and 18 (offsets 2), two channels
    ((1, 12, 6, 6), 8, 3, 1, 2),        # 2 groups of 6 -> 4
    ((1, 602, 4, 4), 7, 3, 1, 1),       # K 5418 over blocks (block borders inside quads)
    # x past COPY_PAR_BYTES (256 KiB): rounded to bf16 over the threads (conv_cvt_split), chunks of 32 floats
    ((1, 32, 47, 49), 16, 1, 1, 1),     # pointwise, 73696 floats: a short last chunk
    ((1, 16, 65, 71), 12, 3, 1, 1),     # 3x3, rows read across the chunk borders
])
@pytest.mark.parametrize("residual, relu", [(False, False), (True, True)])
def test_kpair_bf16_matches_oracle(xshape, cout, k, s, group, residual, relu):
    """path "direct-bf16" (a bf16 session's direct convs of at most 16 output channels per group on
    vdpbf16ps, onnxep_dconv_kpb: pairs of k from 9 channels, quads up to 8), AVX-512 variant on a CPU with
    AVX512_BF16: against the float64 numpy conv of x and W rounded to bf16 (each product then exact in fp32, the sums
    in fp32: the GEMM bound); bit-identical on 1, 2 and 3 threads; with the k-pair kernel off (conv_kpair(False)) the
    path is the plain fp32 direct one, bit for bit."""
    mod = VARIANTS.get("avx512")
    if mod is None or not mod.bgemm_hw():
        pytest.skip("no AVX-512 variant with AVX512_BF16 on this machine")
    x, w, b, p, outs, res = _case(xshape, cout, k, s, group, residual)
    want = _expected(_bf16_round(x).astype(np.float64), _bf16_round(w).astype(np.float64), b, res, group, (s, s),
                     (1, 1), (p, p), outs, relu)
    tol = 2 * (xshape[1] // group * k * k + 2) * EPS
    wp = np.empty(mod.conv_nhwc_pack_weight_size(cout, int(np.prod(w.shape[1:])), group), np.float32)
    mod.conv_nhwc_pack_weight(w, group, wp)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))

    def run(path, nth):
        y = np.full((xshape[0],) + outs + (cout,), np.nan, np.float32)
        mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, group, (k, k), (s, s), (1, 1), (p, p), outs, b,
                          None if res is None else res.reshape(-1), y.reshape(-1), relu, nth, None, path)
        return y
    y1 = run("direct-bf16", 1)
    np.testing.assert_allclose(y1, want, rtol=0, atol=tol)
    fp32 = _expected(x.astype(np.float64), w.astype(np.float64), b, res, group, (s, s), (1, 1), (p, p), outs, relu)
    assert np.abs(y1 - fp32).max() > tol     # bf16 operands: not the fp32 result
    for nth in (2, 3):
        np.testing.assert_array_equal(run("direct-bf16", nth), y1, err_msg=f"nthreads={nth}")
    split = mod.conv_cvt_split(False)       # x rounded on one thread: the same bits
    try:
        np.testing.assert_array_equal(run("direct-bf16", 2), y1)
    finally:
        mod.conv_cvt_split(split)
    before = mod.conv_kpair(False)
    try:
        np.testing.assert_array_equal(run("direct-bf16", 1), run("direct", 1))
    finally:
        mod.conv_kpair(before)


@pytest.mark.parametrize("cout, k, s", [(17, 3, 1), (40, 3, 1), (8, 1, 1), (15, 1, 1), (16, 1, 2), (1, 3, 1)])
def test_kpair_bf16_leaves_other_convs_fp32(cout, k, s):
    """More than 16 output channels (the plain kernel), or fewer than KPB_MIN_USES (16) products per x element
    (cout * k * k / s^2: 1x1 to 8 or 15 channels, 1x1 stride 2 to 16, 3x3 to 1): "direct-bf16" is the fp32 direct
    path, bit for bit (AVX-512 variant)."""
    mod = VARIANTS.get("avx512")
    if mod is None or not mod.bgemm_hw():
        pytest.skip("no AVX-512 variant with AVX512_BF16 on this machine")
    x = RNG.uniform(-1, 1, (1, 8, 6, 6)).astype(np.float32)
    w = RNG.uniform(-1, 1, (cout, 8, k, k)).astype(np.float32)
    wp = np.empty(mod.conv_nhwc_pack_weight_size(cout, 8 * k * k, 1), np.float32)
    mod.conv_nhwc_pack_weight(w, 1, wp)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    p = (k - 1) // 2
    o = (6 + 2 * p - k) // s + 1
    ys = []
    for path in ("direct-bf16", "direct"):
        y = np.empty((1, o, o, cout), np.float32)
        mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, 1, (k, k), (s, s), (1, 1), (p, p), (o, o), None, None,
                          y.reshape(-1), False, 1, None, path)
        ys.append(y)
    np.testing.assert_array_equal(ys[0], ys[1])
