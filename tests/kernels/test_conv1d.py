"""1-D (NCW) convs in conv_f32, whose im2col is packed straight from x (an implicit one-channel A, no col buffer), and
the one-channel channel-last conv (conv_nhwc_f32 with C = 1) sharing that packing.

Oracle: the float64 numpy direct convolution of test_conv.py; every ISA variant the machine runs, at one and two
threads. Tolerance: the GEMM bound Kc * eps32 * max|x| * max|w| (+ bias rounding), x2. Cases cover borders (pads,
strides, dilations that put a panel of MR output points partly in the padding), K above one KC block, more output
points than one MC row block, groups, a single input channel, and tails off the MR / NR tiles (also of the scratch
tile's transposed copy into NCW y); a kernel window wider than _pack_a_implicit_c1's PACK_WIN."""
import numpy as np
import pytest

from tests.kernels.test_conv import EPS, VARIANTS, _ref_conv
from tests.kernels.test_conv_nhwc import _expected as _expected_nhwc

CASES_1D = [  # N, C, L, cout, k, stride, dilation, (pad begin, pad end), group
    (3, 64, 54, 64, 16, 1, 1, (8, 8), 4),        # wav2vec2's grouped positional conv (small)
    (3, 1, 1100, 32, 10, 5, 1, (0, 0), 1),       # wav2vec2's first feature-extractor conv
    (3, 32, 219, 32, 3, 2, 1, (0, 0), 1),
    (2, 80, 100, 64, 3, 1, 1, (1, 1), 1),        # whisper's conv1 / conv2
    (2, 64, 100, 64, 3, 2, 1, (1, 1), 1),
    (1, 20, 37, 7, 16, 1, 1, (8, 7), 1),         # K = 320: two KC blocks; asymmetric pads
    (2, 6, 301, 6, 5, 1, 2, (4, 3), 3),          # 301 points: more than one MC block; dilation
    (1, 3, 13, 17, 7, 3, 1, (6, 6), 1),          # stride 3 with pads wider than a stride
    (2, 4, 5, 10, 9, 1, 1, (4, 4), 2),           # kernel wider than the input
    (1, 2, 40, 3, 1, 2, 1, (0, 0), 1),           # 1-wide kernel with a stride (not pointwise)
    (2, 3, 97, 11, 5, 2, 3, (7, 5), 1),          # stride and dilation through the packing window, wide pads
    (1, 2, 1500, 5, 1100, 1, 1, (3, 2), 1),      # a window wider than PACK_WIN: read column by column
]


def _conv1d(mod, x, w, b, case, nthreads):
    N, C, L, cout, k, s, d, (p0, p1), group = case
    Lo = (L + p0 + p1 - (k - 1) * d - 1) // s + 1
    kc = (C // group) * k
    wp = np.empty(mod.conv_pack_weight_size(cout, kc, group), np.float32)
    mod.conv_pack_weight(w.reshape(-1), cout, group, wp)
    y = np.full((N, cout, Lo), np.nan, np.float32)
    mod.conv_f32(x.reshape(-1), (N, C, 1, 1, L), wp, cout, group, (1, 1, k), (1, 1, s), (1, 1, d), (0, 0, p0),
                 (1, 1, Lo), b, y.reshape(-1), False, nthreads)
    return y, Lo


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", CASES_1D)
@pytest.mark.parametrize("nthreads", [1, 2])
def test_conv1d_matches_direct_conv(isa, case, nthreads):
    """Oracle: float64 numpy direct conv, within the GEMM error bound, every output written (no NaN left)."""
    N, C, L, cout, k, s, d, pads, group = case
    rng = np.random.default_rng(N + C + L + cout + k)
    x = rng.uniform(-1, 1, (N, C, L)).astype(np.float32)
    w = rng.uniform(-1, 1, (cout, C // group, k)).astype(np.float32)
    b = rng.uniform(-1, 1, cout).astype(np.float32)
    y, Lo = _conv1d(VARIANTS[isa], x, w, b, case, nthreads)
    ref = _ref_conv(x[:, :, None, None], w[:, :, None, None], b, group, (1, 1, s), (1, 1, d), (0, 0, pads[0]),
                    (1, 1, Lo))[:, :, 0, 0]
    assert not np.isnan(y).any()
    np.testing.assert_allclose(y, ref, rtol=0, atol=2 * ((C // group) * k + 3) * EPS)


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_conv1d_threads_identical(isa):
    """The thread count splits tiles, never a dot product: 1 and 2 threads give bit-identical results."""
    case = (2, 6, 301, 40, 5, 1, 2, (4, 3), 1)
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (2, 6, 301)).astype(np.float32)
    w = rng.uniform(-1, 1, (40, 6, 5)).astype(np.float32)
    y1, _ = _conv1d(VARIANTS[isa], x, w, None, case, 1)
    y2, _ = _conv1d(VARIANTS[isa], x, w, None, case, 2)
    np.testing.assert_array_equal(y1, y2)


CASES_NHWC_C1 = [  # x shape (N, 1, H, W), w shape, strides, dilations, pads, out spatial
    ((2, 1, 9, 30), (8, 1, 3, 7), (1, 1), (1, 1), (1, 3), (9, 30)),
    ((1, 1, 17, 17), (5, 1, 5, 5), (2, 2), (1, 1), (2, 2), (9, 9)),
    ((1, 1, 6, 40), (33, 1, 2, 3), (1, 3), (2, 1), (0, 4), (4, 15)),
]


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", CASES_NHWC_C1)
@pytest.mark.parametrize("nthreads", [1, 2])
def test_conv_nhwc_one_channel(isa, case, nthreads):
    """conv_nhwc_f32's packed path over a one-channel input (panels across output rows and images, borders). Oracle: float64 numpy
    direct conv."""
    xs, ws, strides, dil, pads, outs = case
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x = rng.uniform(-1, 1, xs).astype(np.float32)
    w = rng.uniform(-1, 1, ws).astype(np.float32)
    b = rng.uniform(-1, 1, ws[0]).astype(np.float32)
    mod = VARIANTS[isa]
    wp = np.empty(mod.conv_nhwc_pack_weight_size(ws[0], int(np.prod(ws[1:])), 1), np.float32)
    mod.conv_nhwc_pack_weight(w, 1, wp)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    y = np.full((xs[0], outs[0], outs[1], ws[0]), np.nan, np.float32)
    mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, ws[0], 1, ws[2:], strides, dil, pads, outs, b, None,
                      y.reshape(-1), False, nthreads, path="packed")
    ref = _expected_nhwc(x, w, b, None, 1, strides, dil, pads, outs, False)
    assert not np.isnan(y).any()
    np.testing.assert_allclose(y, ref, rtol=0, atol=2 * (int(np.prod(ws[1:])) + 3) * EPS)
