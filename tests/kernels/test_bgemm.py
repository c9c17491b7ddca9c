"""bf16 GEMM (onnxep/_native/bgemm.h via _k_bgemm.pxi), on every ISA variant this machine runs and every micro-kernel
it can run (generic C, avx512bf16 vdpbf16ps, amx AMX-BF16 tiles; each forced).

Oracles:
- exactness: integer-valued operands with |a|, |b| <= 8 are bf16-exact and every partial sum (< 2**24) is exact in
  fp32, so the result must equal numpy's float64 product exactly (catches packing / panel / tail layout errors);
- rounding: a 1 x 1 x 1 product with b = 1 returns bf16(a), compared with round-to-nearest-even computed in numpy
  on the bit patterns;
- error bound against the float64 product of the fp32 inputs: rounding a and b to bf16 (8 significant bits, unit
  roundoff u = 2**-8) gives |a~ b~ - a b| <= (2u + u**2) |a||b|; a bf16 x bf16 product is exact in fp32 (16 bits),
  and summing K of them in fp32 adds at most K * 2**-24 * sum |a||b| (gamma_K, first order; doubled for vdpbf16ps's
  pair sums); the epilogue (alpha, bias, residual) adds a few fp32 roundings of |y|. So per element
  |err| <= (2**-7 + 2**-16 + K * 2**-23) * sum_k |a||b| + 2**-21 * (sum_k |a||b| + |bias| + |r|)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
CASES = [(v, k) for v, m in VARIANTS.items() for k in m.BGEMM_KERNELS if m.bgemm_have(k)]
SIZES = [(1, 1, 1), (3, 5, 7), (7, 17, 33), (13, 3, 16), (50, 129, 31), (97, 64, 130), (12, 256, 32),
         (49, 513, 129), (2, 600, 65), (59, 40, 70), (60, 9, 33), (196, 96, 130), (155, 300, 40)]
# (row items of 48: 49, 59, 97, 155 and 196 rows end in one item of 49 .. 59 rows, 60 in two; register blocks of
# near-equal rows: 13 -> 7 + 6, 52 -> 11, 11, 10, 10, 10; bgemm.h bg_nmb, bg_micro_bf16)


@pytest.fixture(params=CASES, ids=[f"{v}-{k}" for v, k in CASES])
def mod(request):
    m = VARIANTS[request.param[0]]
    m.bgemm_force(request.param[1])
    assert m.bgemm_kernel() == request.param[1]
    yield m
    m.bgemm_force(None)


def _pack(mod, b, trans_b=False):
    K, N = (b.shape[1], b.shape[0]) if trans_b else b.shape
    bp = np.full(mod.bgemm_pack_b_size(K, N), np.nan, np.float32)   # every slot must be written
    mod.bgemm_pack_b(np.ascontiguousarray(b), trans_b, bp)
    assert not np.isnan(bp).any()
    return bp


def _rne_bf16(x):
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("M,K,N", SIZES)
@pytest.mark.parametrize("trans_b", [False, True])
def test_bgemm_exact_on_small_integers(mod, M, K, N, trans_b):
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    a = rng.integers(-8, 9, (M, K)).astype(np.float32)
    b = rng.integers(-8, 9, (K, N)).astype(np.float32)
    bp = _pack(mod, b.T.copy() if trans_b else b, trans_b)
    y = np.full((M, N), np.nan, np.float32)
    mod.bgemm_f32(a, bp, N, y, nthreads=2)
    np.testing.assert_array_equal(y, a.astype(np.float64) @ b)



@pytest.mark.parametrize("M,K,N", [(49, 960, 160), (49, 600, 300), (7, 384, 384), (128, 384, 384), (97, 513, 129),
                                   (13, 300, 40), (49, 2048, 512), (200, 96, 64)])
def test_bgemm_narrow_keeps_bits(mod, M, K, N):
    """A GEMM whose BG_NB column blocks would leave a thread idle runs narrower blocks of whole panels (bgemm.h
    bg_narrow, bgemm_narrow; on by default): 49 x 960 x 160 is one row item, so blocks of 128 + 32 columns. Oracle:
    numpy's float64 product on exact small integers, at 1, 2 and 3 threads with narrowing on and off; on random floats
    every setting gives the bits of 1 thread (each output's K sum runs in the same order). (49, 2048, 512) and
    (200, 96, 64) share out evenly and keep their blocks."""
    rng = np.random.default_rng(M * 7 + K + N)
    a = rng.integers(-8, 9, (M, K)).astype(np.float32)
    b = rng.integers(-8, 9, (K, N)).astype(np.float32)
    bp = _pack(mod, b)
    ref = a.astype(np.float64) @ b
    af = rng.standard_normal((M, K)).astype(np.float32)
    bpf = _pack(mod, rng.standard_normal((K, N)).astype(np.float32))
    yf = np.empty((M, N), np.float32)
    mod.bgemm_f32(af, bpf, N, yf, nthreads=1)
    before = mod.bgemm_narrow()
    try:
        for on in (True, False):
            mod.bgemm_narrow(on)
            for nth in (1, 2, 3):
                y = np.full((M, N), np.nan, np.float32)
                mod.bgemm_f32(a, bp, N, y, nthreads=nth)
                np.testing.assert_array_equal(y, ref, err_msg=f"narrow={on} nthreads={nth}")
                y = np.full((M, N), np.nan, np.float32)
                mod.bgemm_f32(af, bpf, N, y, nthreads=nth)
                np.testing.assert_array_equal(y, yf, err_msg=f"random, narrow={on} nthreads={nth}")
    finally:
        mod.bgemm_narrow(before)


@pytest.mark.parametrize("M,K,N", [(49, 600, 300), (97, 513, 129), (1, 1030, 260), (12, 256, 32)])
def test_bgemm_prefetch_keeps_bits(mod, M, K, N):
    """The next-B-block prefetch (bgemm_prefetch, on by default) crosses panels, K blocks (BG_KC = 256) and column
    blocks (BG_NB = 128) here, and the last block has nothing after it: oracle numpy's float64 product on exact
    small integers, with the prefetch on and off, 1 and 2 threads."""
    rng = np.random.default_rng(M + K + N)
    a = rng.integers(-8, 9, (M, K)).astype(np.float32)
    b = rng.integers(-8, 9, (K, N)).astype(np.float32)
    bp = _pack(mod, b)
    ref = a.astype(np.float64) @ b      # |sum| <= 64 K < 2**24: exact in fp32
    before = mod.bgemm_prefetch()
    try:
        for on in (True, False):
            mod.bgemm_prefetch(on)
            for nth in (1, 2):
                y = np.full((M, N), np.nan, np.float32)
                mod.bgemm_f32(a, bp, N, y, nthreads=nth)
                np.testing.assert_array_equal(y, ref, err_msg=f"prefetch={on} nthreads={nth}")
    finally:
        mod.bgemm_prefetch(before)


def test_bgemm_rounds_to_nearest_even(mod):
    rng = np.random.default_rng(0)
    xs = np.concatenate([rng.standard_normal(200).astype(np.float32),
                         np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -9, -(1 + 2 ** -8), 3.0], np.float32)])
    bp = _pack(mod, np.ones((1, 1), np.float32))
    for x in xs:
        y = np.empty((1, 1), np.float32)
        mod.bgemm_f32(np.array([[x]], np.float32), bp, 1, y)
        assert y[0, 0] == _rne_bf16(x), (x, y[0, 0], _rne_bf16(x))


@pytest.mark.parametrize("M,K,N", SIZES)
@pytest.mark.parametrize("epilogue", ["none", "bias", "bias_res_relu", "alpha_sigmoid"])
def test_bgemm_error_bound(mod, M, K, N, epilogue):
    rng = np.random.default_rng(K * 7 + N)
    a = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32) if epilogue != "none" and epilogue != "alpha_sigmoid" else None
    r = rng.standard_normal((M, N)).astype(np.float32) if epilogue == "bias_res_relu" else None
    alpha = 0.5 if epilogue == "alpha_sigmoid" else 1.0
    y = np.full((M, N), np.nan, np.float32)
    mod.bgemm_f32(a, _pack(mod, b), N, y, bias, r, alpha, "Sigmoid" if epilogue == "alpha_sigmoid" else None,
                  epilogue == "bias_res_relu", 2)
    s = np.abs(a).astype(np.float64) @ np.abs(b)
    ref = alpha * (a.astype(np.float64) @ b)
    extra = np.zeros_like(ref)
    if bias is not None:
        ref += bias
        extra += np.abs(bias)
    if r is not None:
        ref += r
        extra += np.abs(r)
    bound = (2 ** -7 + 2 ** -16 + K * 2 ** -23) * alpha * s + 2 ** -21 * (alpha * s + extra)
    if epilogue == "bias_res_relu":
        ref = np.maximum(ref, 0)          # Relu is 1-Lipschitz: the bound carries over
    elif epilogue == "alpha_sigmoid":
        ref = 1 / (1 + np.exp(-ref))      # sigmoid is 1/4-Lipschitz; plus expf's few ulps
        bound = bound / 4 + 1e-6
    assert np.all(np.abs(y - ref) <= bound), float(np.max(np.abs(y - ref) / bound))


def test_bgemm_shape_errors(mod):
    bp = _pack(mod, np.ones((4, 5), np.float32))
    # the packed length pads K to 32 (one AMX tile's depth), so the check sees a K from another 32-block
    with pytest.raises(ValueError, match="packed B"):
        mod.bgemm_f32(np.ones((2, 40), np.float32), bp, 5, np.empty((2, 5), np.float32))
    with pytest.raises(ValueError, match="Y is"):
        mod.bgemm_f32(np.ones((2, 4), np.float32), bp, 5, np.empty((3, 5), np.float32))
