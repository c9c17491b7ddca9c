"""Channel-last conv kernel (conv_nhwc_f32: implicit im2col, packed GEMM, bias / residual / relu epilogue).

Oracle: the float64 numpy direct convolution of test_conv.py on the NCHW-transposed data; every ISA variant is also
compared with the generic one. Tolerance: the GEMM bound Kc * eps32 * max|x| * max|w| (+ bias and residual
rounding), x2. Shapes are drawn by hypothesis, including 1-sized dims, primes, and channel / pixel counts just off the
micro-kernel tiles (MR rows of pixels, NR output channels, runs of 16 channels in the AVX-512 packing)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from onnxep import _kernels
from tests.kernels.test_conv import EPS, VARIANTS, _ref_conv

GENERIC = VARIANTS["generic"]
SIZES = st.sampled_from([1, 2, 3, 5, 7, 11, 12, 13, 15, 16, 17, 31, 33])


def _run(mod, x, w, b, res, group, strides, dil, pads, outs, relu, nthreads):
    N, C, H, W = x.shape
    cout = w.shape[0]
    wp = np.empty(mod.conv_nhwc_pack_weight_size(cout, int(np.prod(w.shape[1:])), group), np.float32)
    mod.conv_nhwc_pack_weight(w, group, wp)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    y = np.full((N, outs[0], outs[1], cout), np.nan, np.float32)
    mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, group, w.shape[2:], strides, dil, pads, outs, b,
                      None if res is None else res.reshape(-1), y.reshape(-1), relu, nthreads)
    return y


def _expected(x, w, b, res, group, strides, dil, pads, outs, relu):
    ref = _ref_conv(x[:, :, None], w[:, :, None], b, group, (1,) + strides, (1,) + dil, (0,) + pads,
                    (1,) + outs)[:, :, 0].transpose(0, 2, 3, 1)
    if res is not None:
        ref = ref + res
    return np.maximum(ref, 0) if relu else ref


@st.composite
def conv_cases(draw):
    group = draw(st.sampled_from([1, 1, 2, 3]))
    cg, og = draw(SIZES), draw(SIZES)
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    dh, dw = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    H, W = draw(st.integers(1, 14)), draw(st.integers(1, 14))
    N = draw(st.integers(1, 2))
    Ho = (H + 2 * ph - (kh - 1) * dh - 1) // sh + 1
    Wo = (W + 2 * pw - (kw - 1) * dw - 1) // sw + 1
    if Ho < 1 or Wo < 1:
        ph, pw = (kh - 1) * dh, (kw - 1) * dw
        Ho = (H + 2 * ph - (kh - 1) * dh - 1) // sh + 1
        Wo = (W + 2 * pw - (kw - 1) * dw - 1) // sw + 1
    return ((N, cg * group, H, W), (og * group, cg, kh, kw), group, (sh, sw), (dh, dw), (ph, pw), (Ho, Wo),
            draw(st.booleans()), draw(st.booleans()), draw(st.booleans()))


@settings(max_examples=40, deadline=None)
@given(case=conv_cases())
def test_conv_nhwc_matches_direct_conv_every_isa(case):
    """Oracle: float64 numpy direct conv; every variant within the GEMM error bound, and near the generic variant."""
    xs, ws, group, strides, dil, pads, outs, with_bias, with_res, relu = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    b = rng.uniform(-1, 1, ws[0]).astype(np.float32) if with_bias else None
    res = rng.uniform(-1, 1, (xs[0],) + outs + (ws[0],)).astype(np.float32) if with_res else None
    ref = _expected(x, w, b, res, group, strides, dil, pads, outs, relu)
    tol = 2 * (int(np.prod(ws[1:])) + 3) * EPS
    ygen = _run(GENERIC, x, w, b, res, group, strides, dil, pads, outs, relu, 1)
    for isa, mod in VARIANTS.items():
        y = _run(mod, x, w, b, res, group, strides, dil, pads, outs, relu, 2)
        assert not np.isnan(y).any(), isa
        np.testing.assert_allclose(y, ref, rtol=0, atol=tol, err_msg=isa)
        np.testing.assert_allclose(y, ygen, rtol=0, atol=tol, err_msg=f"{isa} vs generic")


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_conv_nhwc_resnet_shape_threads_identical(isa):
    """A ResNet 3x3 (64 channels, 56x56): results do not depend on the thread count (bit-identical); oracle for the
    values: the float64 direct conv."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (1, 64, 56, 56)).astype(np.float32)
    w = rng.uniform(-1, 1, (64, 64, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, 64).astype(np.float32)
    res = rng.uniform(-1, 1, (1, 56, 56, 64)).astype(np.float32)
    args = (x, w, b, res, 1, (1, 1), (1, 1), (1, 1), (56, 56), True)
    y1, y2 = _run(mod, *args, 1), _run(mod, *args, 2)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_allclose(y1, _expected(*args[:-1], True), rtol=0, atol=2 * 600 * EPS)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", [
    ((1, 272, 14, 14), (272, 68, 1, 1), 4, (0, 0)),      # ShuffleNet's group-4 1x1: threads over pixel blocks
    ((2, 64, 15, 13), (96, 32, 3, 3), 2, (1, 1)),         # grouped 3x3, two images, odd sizes
], ids=["g4_1x1", "g2_3x3"])
def test_conv_nhwc_grouped_threads_identical(isa, case):
    """Grouped convs too small to thread each group's GEMM run every group of a block of pixels on one thread: the
    result does not depend on the thread count (bit-identical); oracle for the values: the float64 direct conv."""
    mod = VARIANTS[isa]
    xs, ws, group, pads = case
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    b = rng.uniform(-1, 1, ws[0]).astype(np.float32)
    outs = (xs[2] + 2 * pads[0] - ws[2] + 1, xs[3] + 2 * pads[1] - ws[3] + 1)
    res = rng.uniform(-1, 1, (xs[0],) + outs + (ws[0],)).astype(np.float32)
    args = (x, w, b, res, group, (1, 1), (1, 1), pads, outs, True)
    y1, y2 = _run(mod, *args, 1), _run(mod, *args, 2)
    np.testing.assert_array_equal(y1, y2)
    kc = int(np.prod(ws[1:]))
    np.testing.assert_allclose(y1, _expected(*args[:-1], True), rtol=0, atol=2 * (kc + 2) * EPS)


def _case(mod, case, seed):
    """A conv case (x NCHW shape, w shape, group, strides, dilations, begin pads, ...) with random x, w, bias and an
    NHWC residual, W packed for `mod`. Returns (run, ref, res, kc): run(path, nthreads, act, res, y) runs
    conv_nhwc_f32 (res / y: arrays of any shape, passed flat; y defaults to a NaN-filled output, returned) and ref is
    the float64 direct conv + res before the activation (the oracle)."""
    xs, ws, group, strides, dil, pads = case[:6]
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    b = rng.uniform(-1, 1, ws[0]).astype(np.float32)
    k = ws[2:]
    outs = tuple((i + 2 * p - ((kk - 1) * d + 1)) // st + 1 for i, p, kk, d, st in zip(xs[2:], pads, k, dil, strides))
    yshape = (xs[0],) + outs + (ws[0],)
    res = rng.uniform(-1, 1, yshape).astype(np.float32)
    kc = int(np.prod(ws[1:]))
    wp = np.empty(mod.conv_nhwc_pack_weight_size(ws[0], kc, group), np.float32)
    mod.conv_nhwc_pack_weight(w, group, wp)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))

    def run(path, nthreads, act, res_arr, y=None):
        y = np.full(yshape, np.nan, np.float32) if y is None else y
        mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, ws[0], group, k, strides, dil, pads, outs, b,
                          res_arr.reshape(-1), y.reshape(-1), False, nthreads, act, path)
        return y

    ref = _ref_conv(x[:, :, None], w[:, :, None], b, group, (1,) + strides, (1,) + dil, (0,) + pads,
                    (1,) + outs)[:, :, 0].transpose(0, 2, 3, 1) + res
    return run, ref, res, kc


DIRECT_CASES = [  # x (N, C, H, W), w (cout, Cg, kh, kw), group, strides, dilations, pads (begin h, w), activation
    ((1, 3, 23, 29), (24, 3, 7, 7), 1, (2, 2), (1, 1), (3, 3), ("Relu",)),          # RGB stem, odd sizes
    ((2, 5, 9, 17), (33, 5, 3, 3), 1, (1, 1), (1, 1), (1, 1), ("Clip", -0.5, 0.5)),   # 'same', 2 images, cout 33
    ((1, 6, 11, 13), (16, 3, 3, 5), 2, (1, 2), (2, 1), (2, 1), ("LeakyRelu", 0.1)),   # groups, mixed stride/dilation
    ((2, 17, 5, 31), (40, 17, 1, 1), 1, (1, 1), (1, 1), (0, 0), ("",)),               # pointwise: pixels flattened
    ((1, 64, 7, 7), (12, 64, 1, 1), 1, (2, 2), (1, 1), (0, 0), ("Sigmoid",)),         # strided 1x1
    ((1, 2, 3, 2), (5, 2, 3, 3), 1, (1, 1), (1, 1), (2, 2), ("Tanh",)),               # smaller than the padding
    ((3, 4, 40, 30), (20, 4, 5, 5), 1, (2, 2), (1, 1), (2, 2), ("Relu",)),            # border columns in tiles down
    ((2, 3, 29, 9), (8, 3, 3, 3), 1, (1, 1), (1, 1), (1, 1), ("",)),                  #   blocks across images
    ((3, 3, 21, 19), (17, 3, 3, 3), 1, (2, 2), (1, 1), (1, 1), ("HardSwish",)),       # MobileNetV3's stem, cout 17
    ((2, 33, 5, 7), (97, 33, 1, 1), 1, (1, 1), (1, 1), (0, 0), ("HardSwish",)),       # its 1x1 expansions, tails
]

HARD_SWISH = lambda r: r * np.clip(r / 6 + 0.5, 0, 1)      # noqa: E731  ONNX HardSwish (alpha 1/6, beta 1/2)


@pytest.mark.parametrize("isa", [i for i in VARIANTS if i != "generic"])
@pytest.mark.parametrize("case", DIRECT_CASES, ids=lambda c: "x".join(map(str, c[0])) + "_k" + "x".join(map(str, c[1])))
@pytest.mark.parametrize("nthreads", [1, 2])
def test_conv_nhwc_direct_matches_packed(isa, case, nthreads):
    """The direct path (A read in place, K <= KC) against the packed path of the same variant: bit-identical (same
    products in the same k order, one FMA each) with the plain micro-kernel (conv_kpair(False); the k-pair kernel
    of narrow outputs adds in another order: test_conv_kpair.py), with bias, residual and every epilogue
    activation; and both against the float64 direct conv (oracle) within the GEMM bound."""
    mod = VARIANTS[isa]
    run, ref, res, kc = _case(mod, case, 7)
    act = case[6]
    before = mod.conv_kpair(False)
    try:
        ys = {path: run(path, nthreads, act, res) for path in ("packed", "direct")}
    finally:
        mod.conv_kpair(before)
    np.testing.assert_array_equal(ys["direct"], ys["packed"])
    ys["direct-kpair"] = run("direct", nthreads, act, res)
    name, *params = act
    fns = {"": lambda r: r, "Relu": lambda r: np.maximum(r, 0), "Clip": lambda r: np.clip(r, *params),
           "LeakyRelu": lambda r: np.where(r >= 0, r, r * params[0]), "Sigmoid": lambda r: 1 / (1 + np.exp(-r)),
           "Tanh": np.tanh, "HardSwish": HARD_SWISH}
    ref = fns[name](ref)
    for path in ("direct", "direct-kpair"):
        np.testing.assert_allclose(ys[path], ref, rtol=0, atol=2 * (kc + 2) * EPS + 1e-6, err_msg=path)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", [c[:6] for c in DIRECT_CASES[-2:]] + [((1, 64, 9, 14), (40, 64, 3, 3), 1, (1, 1),
                                                                         (1, 1), (1, 1))],
                         ids=lambda c: "x".join(map(str, c[0])) + "_k" + "x".join(map(str, c[1])))
def test_conv_nhwc_hard_swish_epilogue_every_isa(isa, case):
    """HardSwish in the GEMM epilogue (in registers on the SIMD variants, onnxep_act1 on the generic one), with bias
    and residual, packed path, 1 and 2 threads (bit-identical) and column tails. Oracle: numpy HardSwish of the
    float64 direct conv + res, within the GEMM bound."""
    run, ref, res, kc = _case(VARIANTS[isa], case, 5)
    big = res * 4           # a wider residual spreads the sums over both kinks (-3, 3) of HardSwish
    y1, y2 = run("packed", 1, ("HardSwish",), big), run("packed", 2, ("HardSwish",), big)
    np.testing.assert_array_equal(y1, y2)
    want = ref - res + big
    assert (want < -3).any() and (want > 3).any() and (abs(want) < 3).any()
    np.testing.assert_allclose(y1, HARD_SWISH(want), rtol=0, atol=4 * (kc + 6) * EPS + 1e-6)


BLOCKED_CASES = [  # K above one block (KC = 256): the direct path's runs address the K blocks of the packed weight
    ((1, 64, 9, 14), (40, 64, 3, 3), 1, (1, 1), (1, 1), (1, 1)),      # K 576 = 3 blocks of 192, taps on the borders
    ((1, 100, 6, 15), (70, 100, 3, 3), 1, (1, 1), (1, 1), (1, 1)),    # K 900 = 4 x 225: taps cut by the borders,
                                                                      #   3 panels (the last one partial)
    ((2, 300, 3, 5), (34, 150, 1, 3), 2, (1, 2), (1, 1), (0, 1)),     # groups, K 450 = 2 x 225, stride 2
    ((1, 300, 5, 7), (65, 300, 1, 1), 1, (1, 1), (1, 1), (0, 0)),     # pointwise, K 300 = 2 x 150
    ((1, 96, 2, 3), (512, 96, 3, 3), 1, (1, 1), (1, 1), (1, 1)),      # 6 pixels, 16 panels: slabs of panels
]


@pytest.mark.parametrize("isa", [i for i in VARIANTS if i != "generic"])
@pytest.mark.parametrize("case", BLOCKED_CASES, ids=lambda c: "x".join(map(str, c[0])) + "_k" + "x".join(map(str, c[1])))
def test_conv_nhwc_direct_above_one_k_block(isa, case):
    """The direct path with K above one block (the runs cut at the K blocks, panel jp of block pc at pc*Np +
    jp*NR*kc): oracle the float64 direct conv within the GEMM bound; the packed path (which rounds the C tile to
    float32 between K blocks) within the same bound; 1 and 2 threads bit-identical (each output element is computed
    by one thread in one order)."""
    run, ref, res, kc = _case(VARIANTS[isa], case, 11)
    assert kc > VARIANTS[isa].KC
    ys = {(path, nth): run(path, nth, ("Relu",), res) for path, nth in (("packed", 1), ("direct", 1), ("direct", 2))}
    np.testing.assert_array_equal(ys["direct", 1], ys["direct", 2])
    ref = np.maximum(ref, 0)
    bound = 2 * (kc + 2) * EPS + 1e-6   # the GEMM bound of this file
    np.testing.assert_allclose(ys["direct", 1], ref, rtol=0, atol=bound)
    np.testing.assert_allclose(ys["packed", 1], ref, rtol=0, atol=bound)


STACK_CASES = [  # small outputs, several images: the direct path's tiles down the batch (_dconv_stack)
    ((3, 40, 2, 2), (36, 40, 3, 3), 1, (1, 1), (1, 1), (1, 1)),       # 2x2 'same': every pixel a border one
    ((3, 24, 4, 4), (40, 24, 3, 3), 1, (1, 1), (1, 1), (1, 1)),       # 4x4: border columns and interior pixels
    ((14, 20, 2, 3), (33, 20, 3, 3), 1, (1, 1), (1, 1), (1, 1)),      # 14 images: tiles of 7 and 7 (MR 12)
    ((5, 30, 5, 5), (20, 15, 3, 3), 2, (2, 2), (1, 1), (1, 1)),       # groups, stride 2 (3x3 out)
    ((3, 300, 2, 2), (40, 300, 3, 3), 1, (1, 1), (1, 1), (1, 1)),     # K 2700: runs cut at the K blocks
    ((4, 8, 3, 3), (8, 8, 3, 3), 1, (1, 1), (2, 2), (2, 2)),          # dilation 2; 8 channels: the k-pair kernel
]


@pytest.mark.parametrize("isa", [i for i in VARIANTS if i != "generic"])
@pytest.mark.parametrize("case", STACK_CASES, ids=lambda c: "x".join(map(str, c[0])) + "_k" + "x".join(map(str, c[1])))
def test_conv_nhwc_direct_stacked_down_the_batch(isa, case):
    """The direct path's tiles down the batch (conv_stack on: pixel (oh, ow) of up to MR images in one tile, x
    H*W*C and y Ho*Wo*cout floats apart) against the same path with it off and the packed path: bit-identical with
    the plain micro-kernel (the same products in the same k order), on 1 and 2 threads, with bias, residual and Relu;
    and the float64 direct conv (oracle) within the GEMM bound, k-pair kernel on too."""
    mod = VARIANTS[isa]
    xs, ws, group, strides, dil, pads = case
    outs = tuple((i + 2 * p - ((kk - 1) * d + 1)) // st + 1 for i, p, kk, d, st in zip(xs[2:], pads, ws[2:], dil,
                                                                                         strides))
    nhwc = (xs[0], xs[2], xs[3], xs[1])
    before = mod.conv_stack(True)
    try:
        assert mod.conv_direct_stacks(nhwc, ws[2:], strides, dil, pads, outs)
        run, ref, res, kc = _case(mod, case, 13)
        ref = np.maximum(ref, 0)
        bound = 2 * (kc + 2) * EPS + 1e-6
        kp = mod.conv_kpair(False)
        try:
            ys = {}
            for on in (True, False):
                mod.conv_stack(on)
                for nth in (1, 2):
                    ys[on, nth] = run("direct", nth, ("Relu",), res)
            packed = run("packed", 1, ("Relu",), res)
        finally:
            mod.conv_kpair(kp)
        for key, y in ys.items():
            np.testing.assert_allclose(y, ref, rtol=0, atol=bound, err_msg=str(key))
            if kc <= mod.KC:        # above one block the packed path rounds between K blocks
                np.testing.assert_array_equal(y, packed, err_msg=str(key))
            np.testing.assert_array_equal(y, ys[False, 1], err_msg=str(key))
        mod.conv_stack(True)
        for nth in (1, 2):
            np.testing.assert_allclose(run("direct", nth, ("Relu",), res), ref, rtol=0, atol=bound)
    finally:
        mod.conv_stack(before)


@pytest.mark.parametrize("isa", [i for i in VARIANTS if i != "generic"])
def test_conv_stack_choice(isa):
    """Where the direct path tiles down the batch (_dconv_stack): only with fewer tiles than along rows and down
    bands, never for one image or a pointwise conv, never with conv_stack off. Oracle: the tile counts worked out by
    hand (MR 12 / 6): 3 images of 2x2 3x3 'same': 12 one-pixel tiles against 4 of 3; of 8x8: 42 against 64."""
    mod = VARIANTS[isa]
    stacks = lambda n, hw, k=3, p=1: mod.conv_direct_stacks((n, hw, hw, 16), (k, k), (1, 1), (1, 1), (p, p),
                                                             (hw + 2 * p - k + 1,) * 2)  # noqa: E731
    before = mod.conv_stack(True)
    try:
        assert stacks(3, 2) and stacks(3, 4) and stacks(14, 2)
        assert not stacks(1, 2) and not stacks(3, 8) and not stacks(3, 4, k=1, p=0)
        mod.conv_stack(False)
        assert not stacks(3, 2)
    finally:
        mod.conv_stack(before)


@pytest.mark.parametrize("isa", [i for i in VARIANTS if i != "generic"])
def test_auto_direct_small_k_panels(isa):
    """_dconv_auto above one K block with a weight panel of at most 1/8 of L2 (K x NR floats): direct from
    DCONV_FILL_ROWS (4) pixels a tile on average, packed below. Oracle: tile counts by hand, batch 3, 3x3 'same' on
    8x8 (interior rows in one tile of 6, border columns down bands of 1, 6, 1 rows: 4.6 pixels a tile) -> direct;
    3x3/2 from 8x8 to 4x4 (2.7 pixels a tile) -> packed; K 288 (32 channels: a 36 KiB panel on AVX-512)."""
    mod = VARIANTS[isa]
    auto = mod.conv_direct_auto
    assert 32 * 9 > mod.KC
    assert auto((3, 8, 8, 32), (3, 3), (1, 1), (1, 1), (1, 1), (8, 8), 1, 32)
    assert not auto((3, 8, 8, 32), (3, 3), (2, 2), (1, 1), (1, 1), (4, 4), 1, 64)


CHAN_SPLIT_CASES = [  # the weight (Coutg x Kc) outweighs A (P x Kc) and P spans two row blocks: a slab per thread
    ((1, 300, 13, 13), (250, 300, 1, 1), 1, (1, 1), (1, 1), (0, 0)),      # 1x1, K above one block, cout tails
    ((1, 200, 13, 13), (250, 200, 1, 1), 1, (1, 1), (1, 1), (0, 0)),      # K within one block
    ((2, 40, 9, 9), (256, 40, 3, 3), 1, (1, 1), (1, 1), (1, 1)),          # 3x3 'same', two images, border tiles
]


@pytest.mark.parametrize("isa,path", [(i, p) for i in VARIANTS for p in ("packed", "direct")
                                      if not (i == "generic" and p == "direct")])   # generic: no direct path
@pytest.mark.parametrize("case", CHAN_SPLIT_CASES,
                         ids=lambda c: "x".join(map(str, c[0])) + "_k" + "x".join(map(str, c[1])))
def test_conv_nhwc_channel_split_threads_identical(isa, path, case):
    """Where the weight outweighs the input (_chan_split, off by default: each thread one slab of output channels
    over every row block): bit-identical to the split turned off and to one thread, with bias, residual (apart and
    in place) and an activation; the float64 direct conv (oracle) within the GEMM bound."""
    mod = VARIANTS[isa]
    run, ref, res, kc = _case(mod, case, 17)
    act = ("HardSwish",)
    P = case[0][0] * case[0][2] * case[0][3]
    before = mod.conv_chan_split()
    try:
        mod.conv_chan_split(True)
        # the packed path's row blocks: at most MC rows each
        assert mod.conv_chan_split_applies(-(-P // mod.MC), -(-case[1][0] // mod.NR), kc, P, 2)
        assert not mod.conv_chan_split_applies(-(-P // mod.MC), -(-case[1][0] // mod.NR), kc, P, 1)
        y_on = run(path, 2, act, res)
        y_in_place = run(path, 2, act, res, res.copy())
        mod.conv_chan_split(False)
        y_off = run(path, 2, act, res)
    finally:
        mod.conv_chan_split(before)
    y1 = run(path, 1, act, res)
    np.testing.assert_array_equal(y_on, y1)
    np.testing.assert_array_equal(y_off, y1)
    np.testing.assert_array_equal(y_in_place, y1)
    np.testing.assert_allclose(y1, HARD_SWISH(ref), rtol=0, atol=2 * (kc + 2) * EPS + 1e-6)


@pytest.mark.parametrize("isa,path", [(i, p) for i in VARIANTS for p in ("packed", "direct")
                                      if not (i == "generic" and p == "direct")])   # generic: no direct path
@pytest.mark.parametrize("kc_above_block", [False, True], ids=["K<=KC", "K>KC"])
def test_conv_nhwc_residual_in_place(isa, path, kc_above_block):
    """res may be y itself (the planner puts a conv's output in its residual's place), on both paths, with K above
    one block too (where the packed path writes y before its last K block): bit-identical to a separate res (so a
    planned run equals an unplanned one), and the float64 direct conv (oracle) within the GEMM bound. Any other
    overlap of res and y is refused."""
    cg = 40 if kc_above_block else 20
    run, ref, res, kc = _case(VARIANTS[isa], ((1, cg, 7, 9), (36, cg, 3, 3), 1, (1, 1), (1, 1), (1, 1)), 13)
    assert (kc > VARIANTS[isa].KC) == kc_above_block
    y_sep = run(path, 2, ("Relu",), res)
    y = run(path, 2, ("Relu",), res, res.copy())            # in place: res is y
    np.testing.assert_array_equal(y, y_sep)
    np.testing.assert_allclose(y, np.maximum(ref, 0), rtol=0, atol=2 * (kc + 2) * EPS + 1e-6)
    big = np.zeros(y.size + 8, np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        run("packed", 1, None, big[4:4 + y.size], big[:y.size])


@pytest.mark.parametrize("isa,path", [(i, p) for i in VARIANTS for p in ("packed", "direct")
                                      if not (i == "generic" and p == "direct")])   # generic: no direct path
@pytest.mark.parametrize("cg", [20, 40], ids=["K<=KC", "K>KC"])
def test_conv_nhwc_writes_a_channel_slice(isa, path, cg):
    """ldy: y is channels [5, 5 + cout) of a wider channel-last tensor (a Concat's output written in place):
    bit-identical to writing a tensor of its own, the other channels untouched (oracle: the same kernel, contiguous
    y); ldy with a residual, or below cout, is refused."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(17)
    cout, wide = 36, 50
    x = rng.uniform(-1, 1, (2, 6, 7, cg)).astype(np.float32)
    w = rng.uniform(-1, 1, (cout, cg, 3, 3)).astype(np.float32)
    b = rng.uniform(-1, 1, cout).astype(np.float32)
    wp = np.empty(mod.conv_nhwc_pack_weight_size(cout, cg * 9, 1), np.float32)
    mod.conv_nhwc_pack_weight(w, 1, wp)
    args = (x.reshape(-1), x.shape, wp, cout, 1, (3, 3), (1, 1), (1, 1), (1, 1), (6, 7), b, None)
    own = np.empty((2, 6, 7, cout), np.float32)
    mod.conv_nhwc_f32(*args, own.reshape(-1), False, 2, ("Relu",), path)
    full = np.full((2, 6, 7, wide), np.nan, np.float32)
    span = (2 * 6 * 7 - 1) * wide + cout
    mod.conv_nhwc_f32(*args, full.reshape(-1)[5:5 + span], False, 2, ("Relu",), path, wide)
    np.testing.assert_array_equal(full[..., 5:5 + cout], own)
    assert np.isnan(full[..., :5]).all() and np.isnan(full[..., 5 + cout:]).all()
    with pytest.raises(ValueError, match="ldy"):
        mod.conv_nhwc_f32(*args[:-1], own.reshape(-1), full.reshape(-1)[5:5 + span], False, 1, None, path, wide)
    with pytest.raises(ValueError, match="ldy"):
        mod.conv_nhwc_f32(*args, own.reshape(-1), False, 1, None, path, cout - 1)
    with pytest.raises(ValueError, match="y has"):
        mod.conv_nhwc_f32(*args, full.reshape(-1)[5:4 + span], False, 1, None, path, wide)


def test_conv_nhwc_direct_path_errors():
    """The direct path is refused where it does not apply (the generic variant), and path must be a known name (no
    oracle: error behaviour)."""
    w = np.zeros((4, 64, 3, 3), np.float32)
    wp = np.empty(GENERIC.conv_nhwc_pack_weight_size(4, 576, 1), np.float32)
    GENERIC.conv_nhwc_pack_weight(w, 1, wp)
    x = np.zeros(1 * 5 * 5 * 64, np.float32)
    y = np.zeros(1 * 5 * 5 * 4, np.float32)
    args = (x, (1, 5, 5, 64), wp, 4, 1, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5), None, None, y, False, 1, None)
    with pytest.raises(ValueError, match="direct path"):
        GENERIC.conv_nhwc_f32(*args, "direct")
    with pytest.raises(ValueError, match="path must be"):
        GENERIC.conv_nhwc_f32(*args, "fast")
    GENERIC.conv_nhwc_f32(*args, "packed")


def test_conv_nhwc_errors():
    """Wrong sizes raise ValueError naming what is wrong (no oracle: error behaviour)."""
    w = np.zeros((4, 3, 3, 3), np.float32)
    wp = np.empty(_kernels.conv_nhwc_pack_weight_size(4, 27, 1), np.float32)
    _kernels.conv_nhwc_pack_weight(w, 1, wp)
    x = np.zeros(1 * 5 * 5 * 3, np.float32)
    y = np.zeros(1 * 5 * 5 * 4, np.float32)
    geo = ((3, 3), (1, 1), (1, 1), (1, 1), (5, 5))
    with pytest.raises(ValueError, match="x has"):
        _kernels.conv_nhwc_f32(x[:-1], (1, 5, 5, 3), wp, 4, 1, *geo, None, None, y)
    with pytest.raises(ValueError, match="y has"):
        _kernels.conv_nhwc_f32(x, (1, 5, 5, 3), wp, 4, 1, *geo, None, None, y[:-1])
    with pytest.raises(ValueError, match="res has"):
        _kernels.conv_nhwc_f32(x, (1, 5, 5, 3), wp, 4, 1, *geo, None, y[:-1], y)
    with pytest.raises(ValueError, match="packed weight"):
        _kernels.conv_nhwc_f32(x, (1, 5, 5, 3), wp[:-1], 4, 1, *geo, None, None, y)
    with pytest.raises(ValueError, match="group"):
        _kernels.conv_nhwc_f32(x, (1, 5, 5, 3), wp, 4, 2, *geo, None, None, y)
    with pytest.raises(ValueError, match="bias"):
        _kernels.conv_nhwc_f32(x, (1, 5, 5, 3), wp, 4, 1, *geo, np.zeros(3, np.float32), None, y)
