"""The SIMD micro-kernels' per-tile epilogue fast path (sgemm.h onnxep_uk_store_fast, switch sgemm_store_fast).

It takes full tiles (MR rows) of whole vectors (16 or 32 channels on AVX-512, 16 on AVX2) with a column bias, alpha 1,
beta 0, no row bias, activation none / Relu / Clip, residual or not; everything else stays on the general loop.
Oracle: the float64 numpy direct convolution (test_conv.py's) + residual, then the activation, within the GEMM bound;
and the fast path must give the general loop's bits (same operations in the same order): on / off bit-identical on
every SIMD variant, through the packed, direct and k-pair paths of conv_nhwc_f32 (the three kernels that share the
epilogue), 1 and 2 threads. Output channel counts cover the fast path (16, 32, 48, 96) and its neighbours that must
stay general (15, 17, 24, 33); pixels: 96 in one image (the direct path's pointwise rows: full tiles only, 12 and 6
rows) and 2 x 55 (tiles of 11 and partial ones: the general loop)."""
import numpy as np
import pytest

from tests.kernels.test_conv import EPS, VARIANTS, _ref_conv

SIMD = [i for i in VARIANTS if i != "generic"]
ACTS = [("",), ("Relu",), ("Clip", -0.25, 0.5)]
COUTS = [15, 16, 17, 24, 32, 33, 48, 96]


def _run(mod, xh, wp, b, res, yshape, cout, act, path, nthreads):
    y = np.full(yshape, np.nan, np.float32)
    mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, 1, (1, 1), (1, 1), (1, 1), (0, 0), yshape[1:3], b,
                      None if res is None else res.reshape(-1), y.reshape(-1), False, nthreads, act, path)
    return y


@pytest.mark.parametrize("isa", SIMD)
@pytest.mark.parametrize("cout", COUTS)
@pytest.mark.parametrize("act", ACTS, ids=lambda a: a[0] or "none")
@pytest.mark.parametrize("with_res", [False, True], ids=["nores", "res"])
@pytest.mark.parametrize("xshape", [(1, 16, 8, 12), (2, 16, 5, 11)], ids=["96px", "2x55px"])
def test_store_fast_matches_general_and_oracle(isa, cout, act, with_res, xshape):
    mod = VARIANTS[isa]
    rng = np.random.default_rng(cout)
    N, C, H, W = xshape
    x = rng.uniform(-1, 1, (N, C, H, W)).astype(np.float32)
    w = rng.uniform(-1, 1, (cout, C, 1, 1)).astype(np.float32)
    b = rng.uniform(-1, 1, cout).astype(np.float32)
    yshape = (N, H, W, cout)
    res = rng.uniform(-1, 1, yshape).astype(np.float32) if with_res else None
    wp = np.empty(mod.conv_nhwc_pack_weight_size(cout, C, 1), np.float32)
    mod.conv_nhwc_pack_weight(w, 1, wp)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    ref = _ref_conv(x[:, :, None], w[:, :, None], b, 1, (1, 1, 1), (1, 1, 1), (0, 0, 0),
                    (1, H, W))[:, :, 0].transpose(0, 2, 3, 1)
    if res is not None:
        ref = ref + res
    ref = {"": ref, "Relu": np.maximum(ref, 0), "Clip": np.clip(ref, *act[1:])}[act[0]]
    kpair = mod.conv_kpair()
    try:
        for path, kp in (("packed", True), ("direct", False), ("direct", True)):
            mod.conv_kpair(kp)
            for nthreads in (1, 2):
                before = mod.sgemm_store_fast(False)
                try:
                    slow = _run(mod, xh, wp, b, res, yshape, cout, act, path, nthreads)
                    mod.sgemm_store_fast(True)
                    fast = _run(mod, xh, wp, b, res, yshape, cout, act, path, nthreads)
                finally:
                    mod.sgemm_store_fast(before)
                np.testing.assert_array_equal(fast, slow, err_msg=f"{path} kpair={kp} threads={nthreads}")
                np.testing.assert_allclose(fast, ref, rtol=0, atol=2 * (C + 2) * EPS + 1e-6,
                                           err_msg=f"{path} kpair={kp} threads={nthreads}")
    finally:
        mod.conv_kpair(kpair)


def test_store_fast_switch_every_variant():
    """sgemm_store_fast reads and sets the switch (on by default) in every variant, the generic one included."""
    for mod in VARIANTS.values():
        assert mod.sgemm_store_fast() is True
        assert mod.sgemm_store_fast(False) is True
        assert mod.sgemm_store_fast(True) is False
        assert mod.sgemm_store_fast() is True
