"""SGEMM kernel tests. Oracle: numpy in float64.

Tolerance (elementwise): the standard forward error bound of a float32 dot product of length K,
    |C - C_ref| <= K * eps32 * max|A| * max|B| * |alpha|,
taken with K + 2 (the alpha scaling and the final add) and a factor 2, plus 80 * eps32 for rounding the epilogue
(beta*C + bias, whose magnitude is below 10 in these tests)."""
import importlib
import math

import numpy as np
import pytest
from hypothesis import given, strategies as st

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
EPS = float(np.finfo(np.float32).eps)


def _sizes(mod):
    """Sizes at and just off the tile multiples of this variant, plus 0, 1 and primes."""
    out = {0, 1, 2, 3, 5, 7, 13, 31, 37}
    for t in (mod.MR, mod.NR, mod.KC, mod.MC):
        out |= {t - 1, t, t + 1, 2 * t + 1}
    return sorted(out)


def _ref(trans_a, trans_b, alpha, A, B, beta, C, bias_col=None, bias_row=None, relu=False):
    a = A.astype(np.float64).T if trans_a else A.astype(np.float64)
    b = B.astype(np.float64).T if trans_b else B.astype(np.float64)
    r = alpha * (a @ b) + (beta * C.astype(np.float64) if beta != 0 else 0.0)
    if bias_col is not None:
        r = r + bias_col
    if bias_row is not None:
        r = r + bias_row[:, None]
    return np.maximum(r, 0) if relu else r


def _bound(K, A, B, alpha):
    ma = float(np.abs(A).max()) if A.size else 0.0
    mb = float(np.abs(B).max()) if B.size else 0.0
    return 2 * (K + 2) * EPS * ma * mb * abs(alpha) + 80 * EPS


def _case(rng, M, N, K, trans_a, trans_b):
    A = rng.uniform(-1, 1, (K, M) if trans_a else (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (N, K) if trans_b else (K, N)).astype(np.float32)
    C = rng.uniform(-1, 1, (M, N)).astype(np.float32)
    return A, B, C


@pytest.mark.parametrize("isa", list(VARIANTS))
@given(data=st.data())
def test_sgemm_f32_matches_numpy(isa, data):
    """Oracle: numpy float64. Hypothesis draws M, N, K from 0, 1, primes and sizes just off MR/NR/KC/MC."""
    mod = VARIANTS[isa]
    sizes = st.sampled_from(_sizes(mod))
    M, N, K = data.draw(sizes, "M"), data.draw(sizes, "N"), data.draw(sizes, "K")
    ta, tb = data.draw(st.booleans(), "trans_a"), data.draw(st.booleans(), "trans_b")
    alpha = data.draw(st.sampled_from([1.0, 0.5, -2.0]), "alpha")
    beta = data.draw(st.sampled_from([0.0, 1.0, 0.25]), "beta")
    epi = data.draw(st.sampled_from(["none", "col", "row", "relu", "col+relu"]), "epilogue")
    rng = np.random.default_rng(M * 10007 + N * 101 + K)
    A, B, C = _case(rng, M, N, K, ta, tb)
    bc = rng.uniform(-1, 1, N).astype(np.float32) if "col" in epi else None
    br = rng.uniform(-1, 1, M).astype(np.float32) if "row" in epi else None
    relu = "relu" in epi
    expect = _ref(ta, tb, alpha, A, B, beta, C, bc, br, relu)
    out = C.copy()
    if beta == 0.0:
        out[...] = np.nan  # C must not be read when beta == 0
    mod.sgemm_f32(ta, tb, alpha, A, B, beta, out, 0, bc, br, relu)
    assert out.shape == (M, N) and out.dtype == np.float32
    assert np.all(np.abs(out - expect) <= _bound(K, A, B, alpha))


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (0, 5, 3), (4, 0, 3), (3, 4, 0), (17, 45, 513), (130, 70, 257)])
def test_packed_equals_unpacked(isa, M, N, K):
    """Oracle: the on-the-fly sgemm_f32 of the same variant -- packed B must give bit-identical results, whatever the
    thread count."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(1)
    for tb in (False, True):
        A, B, _ = _case(rng, M, N, K, False, tb)
        bp = np.empty(mod.sgemm_pack_b_size(K, N), np.float32)
        mod.sgemm_pack_b(B, tb, bp)
        c1 = np.empty((M, N), np.float32)
        mod.sgemm_f32(False, tb, 1.0, A, B, 0.0, c1)
        for nt in (1, 2):
            c2 = np.empty((M, N), np.float32)
            mod.sgemm_packed_f32(False, 1.0, A, bp, N, 0.0, c2, nthreads=nt)
            np.testing.assert_array_equal(c1, c2)


@pytest.mark.parametrize("isa", [v for v in VARIANTS if v != "generic"])
def test_variants_agree_with_generic(isa):
    """Oracle: the generic variant (and through it numpy). NMSE threshold 1e-12 per variant (float32 rounding and FMA
    contraction differ between variants)."""
    gen, mod = VARIANTS["generic"], VARIANTS[isa]
    rng = np.random.default_rng(2)
    for M, N, K in [(1, 1, 1), (33, 65, 300), (200, 97, 513), (7, 1000, 9)]:
        A, B, C = _case(rng, M, N, K, False, False)
        r_gen = C.copy()
        r_isa = C.copy()
        gen.sgemm_f32(False, False, 0.5, A, B, 1.0, r_gen)
        mod.sgemm_f32(False, False, 0.5, A, B, 1.0, r_isa)
        nmse = float(np.sum((r_gen.astype(np.float64) - r_isa) ** 2) / max(np.sum(r_gen.astype(np.float64) ** 2), 1e-30))
        assert nmse < 1e-12, (M, N, K, nmse)


def test_format_and_errors():
    """Oracle: the documented layout size (K * roundup(N, NR)) and ValueError on mismatched shapes."""
    mod = _kernels
    assert mod.sgemm_pack_b_size(10, mod.NR + 1) == 10 * 2 * mod.NR
    assert f"nr={mod.NR}" in mod.SGEMM_FORMAT and f"kc={mod.KC}" in mod.SGEMM_FORMAT and mod.ISA in mod.SGEMM_FORMAT
    A = np.ones((3, 4), np.float32)
    with pytest.raises(ValueError, match="inner"):
        mod.sgemm_f32(False, False, 1.0, A, np.ones((5, 2), np.float32), 0.0, np.empty((3, 2), np.float32))
    with pytest.raises(ValueError, match="C is"):
        mod.sgemm_f32(False, False, 1.0, A, np.ones((4, 2), np.float32), 0.0, np.empty((3, 3), np.float32))
    with pytest.raises(ValueError, match="packed B"):
        mod.sgemm_packed_f32(False, 1.0, A, np.ones(7, np.float32), 2, 0.0, np.empty((3, 2), np.float32))
    with pytest.raises(ValueError, match="bias_col"):
        mod.sgemm_f32(False, False, 1.0, A, np.ones((4, 2), np.float32), 0.0, np.empty((3, 2), np.float32), 0,
                      np.ones(3, np.float32))


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("epi", ["beta", "col+relu", "row"])
def test_every_row_and_column_tail(isa, epi):
    """Oracle: numpy float64 (bound as above). Every row count 1..2*MR (each micro-kernel body, incl. tails) and column
    counts around NR (masked tails), with the epilogue fused in the micro-kernel."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(3)
    K = 37
    for M in range(1, 2 * mod.MR + 1):
        for N in (1, mod.NR - 1, mod.NR + 3):
            A, B, C = _case(rng, M, N, K, False, False)
            beta = 0.5 if epi == "beta" else 0.0
            bc = rng.uniform(-1, 1, N).astype(np.float32) if "col" in epi else None
            br = rng.uniform(-1, 1, M).astype(np.float32) if "row" in epi else None
            relu = "relu" in epi
            expect = _ref(False, False, 1.5, A, B, beta, C, bc, br, relu)
            out = C.copy()
            mod.sgemm_f32(False, False, 1.5, A, B, beta, out, 1, bc, br, relu)
            assert np.all(np.abs(out - expect) <= _bound(K, A, B, 1.5)), (M, N)


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_row_result_independent_of_panel(isa):
    """Oracle: the same variant on one row at a time -- a row's result must be bit-identical whether it sat in a full
    MR-row panel or in a tail panel (one micro-kernel body per row count, same k order)."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(4)
    M, N, K = 2 * mod.MR + 5, mod.NR + 7, mod.KC + 3
    A, B, _ = _case(rng, M, N, K, False, False)
    full = np.empty((M, N), np.float32)
    mod.sgemm_f32(False, False, 1.0, A, B, 0.0, full, 1)
    for i in range(M):
        row = np.empty((1, N), np.float32)
        mod.sgemm_f32(False, False, 1.0, A[i:i + 1], B, 0.0, row, 1)
        np.testing.assert_array_equal(row[0], full[i])


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("M,N,K,trans_a", [(300, 200, 600, False), (300, 70, 577, True), (2 * 144 + 1, 515, 40, False),
                                           (196, 256, 300, False), (729, 192, 70, False), (49, 512, 33, True),
                                           (5 * 144 + 7, 1000, 20, False), (197, 3072, 300, False),
                                           (197, 768, 70, False), (204, 1000, 33, False), (1500, 384, 40, False)])
def test_threads_do_not_change_results(isa, M, N, K, trans_a):
    """Oracle: the single-thread run of the same variant (bit-identical for any thread count and tile partition),
    and numpy float64 within the bound. The later sizes give row blocks one MR tile apart (the MR tiles dealt out
    evenly, the partial one last) and several column slabs on 2 and 3 threads (_sgemm_slab_mt), with the tiles on one
    counter where the schedule takes it and on the thread ranges (tile_claims_shared on / off); the last, row blocks
    rounded up to a multiple of the threads or not (sgemm_row_round on / off)."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(5)
    A, B, _ = _case(rng, M, N, K, trans_a, False)
    bp = np.empty(mod.sgemm_pack_b_size(K, N), np.float32)
    mod.sgemm_pack_b(B, False, bp)
    c1 = np.empty((M, N), np.float32)
    mod.sgemm_packed_f32(trans_a, 1.0, A, bp, N, 0.0, c1, nthreads=1)
    assert np.all(np.abs(c1 - _ref(trans_a, False, 1.0, A, B, 0.0, c1)) <= _bound(K, A, B, 1.0))
    before, rr = mod.tile_claims_shared(), mod.sgemm_row_round()
    try:
        for on, nt, rnd in ((True, 2, True), (True, 3, True), (False, 2, True), (False, 3, True), (True, 2, False)):
            mod.tile_claims_shared(on)
            mod.sgemm_row_round(rnd)
            c2 = np.empty((M, N), np.float32)
            mod.sgemm_packed_f32(trans_a, 1.0, A, bp, N, 0.0, c2, nthreads=nt)
            np.testing.assert_array_equal(c1, c2)
    finally:
        mod.tile_claims_shared(before)
        mod.sgemm_row_round(rr)


def test_k_blocks_are_even():
    """Oracle: the documented layout -- K is cut into ceil(K/KC) blocks of almost equal size, so packing B of K = KC+1
    rows puts the second block at row (KC+1+1)//2, i.e. panel 0 of block 1 starts at float (KC//2 + 1) * Np."""
    mod = _kernels
    K, N = mod.KC + 1, mod.NR
    B = np.arange(K * N, dtype=np.float32).reshape(K, N)
    bp = np.empty(mod.sgemm_pack_b_size(K, N), np.float32)
    mod.sgemm_pack_b(B, False, bp)
    k1 = (K + 1) // 2
    np.testing.assert_array_equal(bp[k1 * N:(k1 + 1) * N], B[k1])
    assert "ksplit=even" in mod.SGEMM_FORMAT


ACTS = [("Relu",), ("Clip", -0.5, 0.75), ("LeakyRelu", 0.1), ("Sigmoid",), ("HardSigmoid", 0.2, 0.5), ("Tanh",),
        ("Gelu",)]
_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu64(r):
    """Gelu (the erf form) in float64, math.erf's."""
    return r * 0.5 * (1.0 + _erf(r / math.sqrt(2.0)))


def _act_ref(r, act):
    name = act[0]
    if name == "Relu":
        return np.maximum(r, 0)
    if name == "Clip":
        return np.clip(r, act[1], act[2])
    if name == "LeakyRelu":
        return np.where(r >= 0, r, r * act[1])
    if name == "Sigmoid":
        return 1 / (1 + np.exp(-r))
    if name == "HardSigmoid":
        return np.clip(act[1] * r + act[2], 0, 1)
    if name == "Gelu":
        return gelu64(r)
    return np.tanh(r)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("act", ACTS, ids=lambda a: a[0])
@pytest.mark.parametrize("M,N,K", [(1, 1, 1), (13, 33, 7), (37, 70, 300)])
def test_fused_activation_epilogue(isa, act, M, N, K):
    """Oracle: numpy float64 GEMM + bias, then the activation (the epilogue is applied once, after the last K block;
    Gelu's slope is at most 1.13 and its own error 3e-7 max(1, |x|), both inside the factor 2 of tol). Every variant
    also agrees with the generic one, NaN and inf included (NaN stays NaN through Clip, LeakyRelu, Gelu)."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(M * 7 + N)
    A = rng.uniform(-1, 1, (M, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    C = np.empty((M, N), np.float32)
    mod.sgemm_f32(False, False, 1.0, A, B, 0.0, C, 2, bias, None, False, act)
    want = _act_ref(_ref(False, False, 1.0, A, B, 0.0, C, bias), act)
    tol = 2 * _bound(K + 2, A, B, 1.0) + 80 * EPS
    np.testing.assert_allclose(C, want, rtol=0, atol=tol)
    A[0, 0] = np.nan
    if M > 1:
        A[1, 0] = np.inf
    C2, G = np.empty_like(C), np.empty_like(C)
    mod.sgemm_f32(False, False, 1.0, A, B, 0.0, C2, 1, bias, None, False, act)
    VARIANTS["generic"].sgemm_f32(False, False, 1.0, A, B, 0.0, G, 1, bias, None, False, act)
    np.testing.assert_array_equal(np.isnan(C2), np.isnan(G))
    np.testing.assert_allclose(C2[np.isfinite(G)], G[np.isfinite(G)], rtol=0, atol=2 * tol)
    if act[0] in ("Clip", "LeakyRelu", "Tanh", "Sigmoid", "Gelu"):
        assert np.isnan(C2[0]).any()   # a NaN product reaches the output, not a clamped number


def test_unknown_activation_is_refused():
    """A name or parameter count not in ACTIVATIONS raises ValueError naming the valid ones (error contract)."""
    A = np.ones((2, 2), np.float32)
    C = np.empty((2, 2), np.float32)
    with pytest.raises(ValueError, match="unknown epilogue activation"):
        _kernels.sgemm_f32(False, False, 1.0, A, A, 0.0, C, 1, None, None, False, "Softplus")
    with pytest.raises(ValueError, match="unknown epilogue activation"):
        _kernels.sgemm_f32(False, False, 1.0, A, A, 0.0, C, 1, None, None, False, ("Clip", 0.0))


GEMV_SIZES = st.sampled_from([0, 1, 2, 3, 4, 5, 15, 16, 17, 31, 33, 63, 64, 65, 129, 513])


@pytest.mark.parametrize("isa", list(VARIANTS))
@given(data=st.data())
def test_gemv_f32_matches_numpy(isa, data):
    """gemv_f32 (one row against W as stored, both layouts). Oracle: numpy float64, within the SGEMM bound above;
    Hypothesis draws K and N around the 16 lanes, the 4-row blocks and the per-task chunks (64 rows, 512 columns), and
    0 and 1; 1 and 2 threads bit-identical."""
    mod = VARIANTS[isa]
    K, N = data.draw(GEMV_SIZES, "K"), data.draw(GEMV_SIZES, "N")
    tb, relu, with_bias = data.draw(st.booleans(), "trans_b"), data.draw(st.booleans(), "relu"), \
        data.draw(st.booleans(), "bias")
    rng = np.random.default_rng(K * 1000 + N)
    a = rng.uniform(-1, 1, K).astype(np.float32)
    W = rng.uniform(-1, 1, (N, K) if tb else (K, N)).astype(np.float32)
    bias = rng.uniform(-1, 1, N).astype(np.float32) if with_bias else None
    want = _ref(False, tb, 1.0, a.reshape(1, K), W, 0.0, np.zeros((1, N), np.float32), bias, None, relu)[0]
    ys = []
    for nt in (1, 2):
        y = np.full(N, np.nan, np.float32)
        mod.gemv_f32(a, W, tb, bias, y, relu, nt)
        ys.append(y)
    np.testing.assert_array_equal(ys[0], ys[1])
    np.testing.assert_allclose(ys[0], want, rtol=0, atol=_bound(K, a, W, 1.0))


@pytest.mark.parametrize("activation,fn", [
    (("Clip", -0.5, 0.5), lambda r: np.clip(r, -0.5, 0.5)), (("LeakyRelu", 0.1), lambda r: np.where(r >= 0, r, 0.1 * r)),
    ("Sigmoid", lambda r: 1 / (1 + np.exp(-r))), ("Tanh", np.tanh), ("Gelu", gelu64)])
def test_gemv_f32_activations(activation, fn):
    """The epilogue activations of make_act, applied to each output after the bias. Oracle: numpy float64 (the
    activation of the float64 product), within the SGEMM bound (the activations here are 1-Lipschitz, Gelu 1.13: the
    bound's factor 2 covers it) plus 4 eps32 for its own rounding (Gelu's 3e-7 max(1, |x|) is inside the bound's
    80 eps32)."""
    rng = np.random.default_rng(1)
    a, bias = rng.uniform(-1, 1, 37).astype(np.float32), rng.uniform(-1, 1, 70).astype(np.float32)
    for tb in (True, False):
        W = rng.uniform(-1, 1, (70, 37) if tb else (37, 70)).astype(np.float32)
        y = np.full(70, np.nan, np.float32)
        _kernels.gemv_f32(a, W, tb, bias, y, False, 2, activation)
        want = fn(_ref(False, tb, 1.0, a.reshape(1, -1), W, 0.0, np.zeros((1, 70), np.float32), bias)[0])
        np.testing.assert_allclose(y, want, rtol=0, atol=_bound(37, a, W, 1.0) + 4 * EPS)


def test_gemv_f32_refuses_mismatched_shapes():
    """Sizes are checked before anything runs: the error names what and the sizes."""
    a, W, y = np.ones(5, np.float32), np.ones((3, 5), np.float32), np.ones(3, np.float32)
    _kernels.gemv_f32(a, W, True, None, y)
    assert (y == 5).all()
    with pytest.raises(ValueError, match="a has 5 elements, op.W. is 3x5"):
        _kernels.gemv_f32(a, W, False, None, y)
    with pytest.raises(ValueError, match="y has 3 elements, expected 7"):
        _kernels.gemv_f32(a, np.ones((7, 5), np.float32), True, None, y)
    with pytest.raises(ValueError, match="bias"):
        _kernels.gemv_f32(a, W, True, np.ones(2, np.float32), y)


def test_tiles_go_to_one_counter_where_thread_ranges_leave_a_thread_idle():
    """Oracle: the tiling worked by hand (_k_gemm.pxi _row_block, _sgemm_slab_mt, _tile_schedule) on the AVX-512
    tiles (MR 12, NR 32, MC 144). Row blocks take the extra MR tile last, with the partial one: 196 rows (16 tiles
    and 4 rows) are blocks of 96 and 100, 197 rows of 96 and 101. On one slab the pool's thread ranges give each
    thread one block (96 rows against 101: 2.5% later than an even split); by 2 slabs of 48 panels one
    counter deals each thread one tile of each block, even: shared (TILE_SHARED_GAIN_PCT 2). 192 rows (2 x 96) split
    evenly under the ranges. 196 x 256 has slabs under SGEMM_SHARED_MIN_SLAB: the ranges. Without thread ranges in
    the pool (pool_affine(False)) every job already claims from one counter: nothing to choose."""
    mod = VARIANTS.get("avx512")
    if mod is None:
        pytest.skip("the hand-worked tiles are the AVX-512 variant's")
    assert (mod.MR, mod.NR, mod.MC) == (12, 32, 144)
    assert mod.sgemm_tiling(197, 3072, 2) == (2, 48, True, (0, 96, 197))
    assert mod.sgemm_tiling(197, 768, 2)[1:3] == (12, True)
    assert mod.sgemm_tiling(192, 3072, 2) == (2, 96, False, (0, 96, 192))
    assert mod.sgemm_tiling(196, 256, 2) == (2, 8, False, (0, 96, 196))
    assert mod.sgemm_tiling(197, 3072, 1)[:3] == (2, 96, False)
    assert mod.sgemm_tiling(3136, 384, 2)[3][:3] == (0, 132, 264)    # 262 tiles: two blocks of 11, twenty of 12
    before = mod.tile_claims_shared(False)
    try:
        assert mod.sgemm_tiling(197, 3072, 2)[2] is False
    finally:
        mod.tile_claims_shared(before)
    before = mod.pool_affine(False)
    try:
        assert mod.sgemm_tiling(197, 3072, 2)[2] is False
    finally:
        mod.pool_affine(before)


def test_row_blocks_round_up_to_the_threads():
    """Oracle: the tiling worked by hand (AVX-512 tiles: MR 12, NR 32, MC 144; a tile costs rows x (4 x panels + 1),
    _sgemm_tile_cost). 1500 x 384 (whisper's 1-D conv: 1500 positions, 384 channels) in MC-row blocks is 11 blocks;
    on 2 threads one slab leaves 6 blocks to one thread, so two slabs of 6 panels were taken (22 tiles, every
    block's A packed twice). 12 blocks of 120-132 rows take one slab: 12 tiles, a span of about 6 x 125 x 49
    against 11 x 136 x 25, and each A packed once. 3136 rows (22 blocks) and 1 thread keep MC-row blocks; one block
    (100 rows) is split into rows only for a conv's im2col; sgemm_row_round(False) gives the old tiling."""
    mod = VARIANTS.get("avx512")
    if mod is None:
        pytest.skip("the hand-worked tiles are the AVX-512 variant's")
    assert (mod.MR, mod.NR, mod.MC) == (12, 32, 144)
    mt, slab, _, rows = mod.sgemm_tiling(1500, 384, 2)
    assert (mt, slab) == (12, 12) and max(b - a for a, b in zip(rows, rows[1:])) <= 132
    assert mod.sgemm_tiling(3000, 384, 2)[:2] == (22, 12)
    assert mod.sgemm_tiling(3136, 384, 2)[0] == 22
    assert mod.sgemm_tiling(1500, 384, 1)[:2] == (11, 12)
    # one MC-row block: a plain A keeps splitting the columns, a conv's im2col (implicit) splits the rows
    assert mod.sgemm_tiling(100, 64, 2)[:2] == (1, 1)
    assert mod.sgemm_tiling(100, 64, 2, True)[:2] == (2, 2)
    before = mod.sgemm_row_round(False)
    try:
        assert mod.sgemm_tiling(1500, 384, 2)[:2] == (11, 6)
    finally:
        mod.sgemm_row_round(before)
