"""The NHWC max pool's interior runs with a fixed tap count (onnxep_pool_run_max: 3x3 and 2x2 windows, channels a
multiple of the vector width) on every ISA variant.

Oracles: maxpool_f32 (the NCHW kernel of the same variant) on the transposed input, bit-identical (the same
comparisons in the same order, NaNs included), and the numpy window oracle of test_pool."""
import numpy as np
import pytest

from tests.kernels.test_nhwc import VARIANTS
from tests.kernels.test_pool import geom as pool_geom, numpy_pool


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("k, s, p", [(3, 2, 1), (3, 1, 1), (3, 2, 0), (2, 2, 0), (2, 1, 1)])
@pytest.mark.parametrize("C", [8, 16, 32, 48, 24])
@pytest.mark.parametrize("nan", [False, True])
def test_fixed_tap_runs_match_nchw(isa, k, s, p, C, nan):
    mod = VARIANTS[isa]
    N, H, W = 2, 9, 12
    out3, gv = pool_geom((1, H, W), (1, k, k), (1, s, s), (0, p, p), (0, p, p), (1, 1, 1))
    Ho, Wo = out3[1:]
    rng = np.random.default_rng(C * 10 + k)
    x = rng.standard_normal((N, C, H, W)).astype(np.float32)
    if nan:     # first taps and later taps of interior windows, in the first and the last vector of channels
        x[0, 0, 2, 2] = x[0, C - 1, 4, 5] = x[1, 3, 5, 7] = x[1, C - 2, 6, 3] = np.nan
    xn = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1)
    for nt in (1, 2):
        y = np.full(N * Ho * Wo * C, np.nan, np.float32)
        mod.maxpool_nhwc_f32(xn, y, N, C, gv, nt)
        got = y.reshape(N, Ho, Wo, C).transpose(0, 3, 1, 2).reshape(-1)
        yc = np.empty(N * C * Ho * Wo, np.float32)
        mod.maxpool_f32(x.reshape(-1), yc, None, N * C, gv, 0, 1)
        np.testing.assert_array_equal(got, yc)
        if not nan:
            want = numpy_pool(x.reshape(-1), N * C, (1, H, W), out3, (1, k, k), (1, s, s), (0, p, p), (0, p, p),
                              (1, 1, 1), "max", 0)
            np.testing.assert_array_equal(got, want)
