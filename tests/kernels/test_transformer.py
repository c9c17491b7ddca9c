"""Transformer kernels (erf, gelu, layernorm, batched strided SGEMM): every ISA variant in onnxep._kernels.AVAILABLE
against numpy oracles (float64, math.erf for erf), one thread vs many, in place, and the wrappers' checks."""
import importlib
import math

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
EPS = float(np.finfo(np.float32).eps)
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _erf_points():
    """A dense grid over [-6, 6], both split points (0.921875, 3.925) closely, and tiny magnitudes down to 1e-30."""
    x = [np.linspace(-6, 6, 200001), 10.0 ** np.arange(-30, 0.5, 0.05), -(10.0 ** np.arange(-30, 0.5, 0.05))]
    for p in (0.921875, 3.925):
        v = np.float32(p)
        near = [v]
        for _ in range(50):
            near.append(np.nextafter(near[-1], np.float32(10)))
            near.insert(0, np.nextafter(near[0], np.float32(0)))
        x += [np.array(near, np.float64), -np.array(near, np.float64)]
    return np.concatenate(x).astype(np.float32)


X_ERF = _erf_points()


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_erf_kernel_accuracy(isa):
    """Oracle: math.erf in float64. Within 2e-7 absolute and 3 ulp of the exact value everywhere."""
    y = np.empty_like(X_ERF)
    VARIANTS[isa].erf_f32(X_ERF, y, 1)
    want = _erf(X_ERF.astype(np.float64))
    err = np.abs(y.astype(np.float64) - want)
    assert err.max() <= 2e-7, (err.max(), X_ERF[err.argmax()])
    ulp = np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert (err / ulp).max() <= 3.0, ((err / ulp).max(), X_ERF[(err / ulp).argmax()])
    assert np.all(np.abs(y) <= 1.0)
    assert np.all(np.sign(y) == np.sign(X_ERF))      # odd, and erf(+-0) = +-0 keeps the sign


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_erf_kernel_special_values(isa):
    """Oracle: math.erf (NaN stays NaN, erf(+-inf) = +-1, erf(-0) = -0)."""
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32)
    y = np.empty_like(x)
    VARIANTS[isa].erf_f32(x, y, 1)
    assert np.isnan(y[0])
    np.testing.assert_array_equal(y[1:], _erf(x[1:].astype(np.float64)).astype(np.float32))
    assert np.signbit(y[4])


def _gelu64(x):
    x = x.astype(np.float64)
    return x * 0.5 * (1.0 + _erf(x / np.sqrt(2.0)))


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_gelu_kernel(isa):
    """Oracle: x * 0.5 * (1 + math.erf(x / sqrt(2))) in float64: within 3e-7 * max(1, |x|) absolute."""
    x = X_ERF * np.float32(1.4142135)
    y = np.empty_like(x)
    VARIANTS[isa].gelu_f32(x, y, 1)
    err = np.abs(y - _gelu64(x))
    bound = 3e-7 * np.maximum(1.0, np.abs(x))
    assert np.all(err <= bound), (err.max(), x[(err / bound).argmax()])
    s = np.array([np.nan, np.inf, 0.0, -0.0, -40.0], np.float32)
    t = np.empty_like(s)
    VARIANTS[isa].gelu_f32(s, t, 1)
    assert np.isnan(t[0]) and t[1] == np.inf and t[2] == 0 and t[3] == 0 and t[4] == 0


@pytest.mark.skipif("avx512" not in VARIANTS, reason="needs the avx512 variant")
def test_gelu_avx512_table_blocks_and_epilogues():
    """The avx512 variant's Gelu (erf.h onnxep_gelu_nv: a degree-5 polynomial per 16th of [0, 5.550788), picked by
    vpermps). Oracle: x * 0.5 * (1 + math.erf(x / sqrt(2))) in float64 within 3e-7 * max(1, |x|), at both sides of
    every interval edge and the clamp. Its paths -- eight vectors at a time, one, a masked tail; rows of a GEMM tile
    across the rows (sgemm), a bf16 GEMM block's rows of 128 (bgemm, N 300: blocks 128, 128, 44) -- give the same bits
    as the kernel on each value alone."""
    mod = VARIANTS["avx512"]
    edges = []
    for k in range(17):
        v = np.float32(k * 5.550788 / 16)
        near = [v]
        for _ in range(20):
            near.append(np.nextafter(near[-1], np.float32(10)))
            near.insert(0, np.nextafter(near[0], np.float32(-10)))
        edges += near
    e = np.array(edges, np.float32)
    e = np.concatenate([e, -e])
    y = np.empty_like(e)
    mod.gelu_f32(e, y, 1)
    err = np.abs(y - _gelu64(e))
    bound = 3e-7 * np.maximum(1.0, np.abs(e.astype(np.float64)))
    assert np.all(err <= bound), (err.max(), e[(err / bound).argmax()])

    def alone(v):
        out = np.empty(1, np.float32)
        res = np.empty_like(v)
        for i, s in enumerate(v.reshape(-1)):
            mod.gelu_f32(np.array([s], np.float32), out, 1)
            res.reshape(-1)[i] = out[0]
        return res

    rng = np.random.default_rng(29)
    x = (rng.standard_normal(300) * 4).astype(np.float32)
    x[[3, 40, 130, 131, 200]] = [np.nan, np.inf, 7.0, -0.0, -40.0]
    want = alone(x)
    for n in [0, 1, 15, 16, 17, 127, 128, 129, 143, 144, 145, 255, 256, 300]:
        got = np.empty(n, np.float32)
        mod.gelu_f32(x[:n], got, 1)
        np.testing.assert_array_equal(got.view(np.uint32), want[:n].view(np.uint32), err_msg=f"n={n}")
    for M, N, K in [(13, 33, 7), (12, 32, 40), (37, 70, 300), (5, 16, 3), (29, 200, 64)]:
        A = rng.uniform(-2, 2, (M, K)).astype(np.float32)
        B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
        bias = rng.uniform(-1, 1, N).astype(np.float32)
        C, P = np.empty((M, N), np.float32), np.empty((M, N), np.float32)
        mod.sgemm_f32(False, False, 1.0, A, B, 0.0, C, 1, bias, None, False, ("Gelu",))
        mod.sgemm_f32(False, False, 1.0, A, B, 0.0, P, 1, bias, None, False, None)
        np.testing.assert_array_equal(C.view(np.uint32), alone(P).view(np.uint32), err_msg=f"sgemm {M}x{N}x{K}")
    if mod.bgemm_have("avx512bf16"):
        for M, N, K in [(50, 300, 96), (7, 300, 300)]:
            A = rng.uniform(-2, 2, (M, K)).astype(np.float32)
            B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
            bias = rng.uniform(-1, 1, N).astype(np.float32)
            bp = np.empty(mod.bgemm_pack_b_size(K, N), np.float32)
            mod.bgemm_pack_b(B, False, bp)
            C, P = np.empty((M, N), np.float32), np.empty((M, N), np.float32)
            mod.bgemm_f32(A, bp, N, C, bias, None, 1.0, "Gelu", False, 1)
            mod.bgemm_f32(A, bp, N, P, bias, None, 1.0, None, False, 1)
            np.testing.assert_array_equal(C.view(np.uint32), alone(P).view(np.uint32), err_msg=f"bgemm {M}x{N}x{K}")


@pytest.mark.parametrize("fn", ["erf_f32", "gelu_f32"])
@pytest.mark.parametrize("n", [0, 1, 17, 16384 * 3 + 5])
def test_unary_kernels_threads_and_in_place(fn, n):
    """Oracle: the generic variant on one thread; every variant, threaded and in place, within 1 ulp-scale of it."""
    x = (np.random.default_rng(n).standard_normal(n) * 3).astype(np.float32)
    ref = np.empty_like(x)
    getattr(VARIANTS["generic"], fn)(x, ref, 1)
    for isa, mod in VARIANTS.items():
        y = np.empty_like(x)
        getattr(mod, fn)(x, y, 0)
        z = x.copy()
        getattr(mod, fn)(z, z, 0)
        np.testing.assert_array_equal(y, z, err_msg=isa)
        np.testing.assert_allclose(y, ref, rtol=4 * EPS, atol=2e-7, err_msg=isa)
    with pytest.raises(ValueError, match="elements"):
        getattr(_kernels, fn)(x, np.empty(n + 1, np.float32))


@pytest.mark.parametrize("r,k", [(1, 1), (1, 7), (3, 128), (12 * 128, 128), (64, 1000), (5, 33)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_lastaxis_kernel(r, k, log):
    """Oracle: numpy in float64 (max subtracted); rows with -1e4 / -inf masked entries give exactly 0 there."""
    x = (np.random.default_rng(k).standard_normal((r, k)) * 20).astype(np.float32)
    if k > 4:
        x[:, -3:] = -10000.0
        x[0, 1] = -np.inf
    z = x.astype(np.float64) - x.max(axis=1, keepdims=True)
    with np.errstate(divide="ignore"):
        want = z - np.log(np.exp(z).sum(axis=1, keepdims=True)) if log else np.exp(z) / np.exp(z).sum(axis=1,
                                                                                                   keepdims=True)
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.empty_like(x)
            mod.softmax_lastaxis_f32(x, y, log, nt)
            np.testing.assert_allclose(y, want, rtol=8 * EPS, atol=8 * EPS if log else 1e-9, err_msg=isa)
            if not log and k > 4:
                assert np.all(y[:, -3:] == 0) and y[0, 1] == 0
            z2 = x.copy()
            mod.softmax_lastaxis_f32(z2, z2, log, nt)
            np.testing.assert_array_equal(z2, y, err_msg=isa)


@pytest.mark.parametrize("mask_cs", [0, 1])
def test_softmax_mask_lastaxis_kernel(mask_cs):
    """Oracle: numpy softmax (float64) of x + the broadcast mask (added in float32, as the unfused Add does: x - 1e4
    keeps only ~1e-3 of x); offsets out of the mask are refused."""
    r, k = 24, 50
    rng = np.random.default_rng(mask_cs)
    x = (rng.standard_normal((r, k)) * 5).astype(np.float32)
    mask = np.where(rng.uniform(size=(3, k)) < 0.3, -10000.0, rng.standard_normal((3, k))).astype(np.float32)
    off = (np.arange(r, dtype=np.int64) % 3) * k + (0 if mask_cs else 7)
    full = mask.reshape(-1)[off[:, None] + np.arange(k) * mask_cs]
    z = (x + full).astype(np.float64)
    z -= z.max(axis=1, keepdims=True)
    want = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.empty_like(x)
            mod.softmax_mask_lastaxis_f32(x, y, mask.reshape(-1), off, mask_cs, False, nt)
            np.testing.assert_allclose(y, want, rtol=16 * EPS, atol=1e-9, err_msg=isa)
    with pytest.raises(ValueError, match="outside"):
        _kernels.softmax_mask_lastaxis_f32(x, y, mask.reshape(-1), off + 3 * k, mask_cs)


def test_softmax_lastaxis_kernel_nan():
    """A NaN in a row makes the whole row NaN (as with expf); other rows are unaffected."""
    x = np.array([[0.0, np.nan, 1.0], [0.0, 1.0, 2.0]], np.float32)
    y = np.empty_like(x)
    _kernels.softmax_lastaxis_f32(x, y)
    assert np.all(np.isnan(y[0])) and np.all(np.isfinite(y[1]))


def _layernorm64(x, scale, bias, eps):
    x = x.astype(np.float64)
    m = x.mean(axis=1, keepdims=True)
    v = ((x - m) ** 2).mean(axis=1, keepdims=True)
    inv = 1.0 / np.sqrt(v + eps)
    y = (x - m) * inv
    if scale is not None:
        y = y * scale
    if bias is not None:
        y = y + bias
    return y, m[:, 0], inv[:, 0]


@pytest.mark.parametrize("r,c", [(1, 1), (1, 7), (3, 768), (128, 768), (40, 1000), (5, 3), (13, 96), (37, 16),
                                 (9, 33), (3136, 96)])
@pytest.mark.parametrize("affine", ["scale_bias", "scale", "none"])
def test_layernorm_kernel(r, c, affine):
    """Oracle: numpy in float64 (two-pass variance, the spec's Mean / Var / InvStdDev). Rows go in blocks of 8
    (erf.h ONNXEP_LN_ROWS), 4 at a time then one by one on AVX-512, a row's last C % 16 under a mask: row counts
    and widths around those."""
    rng = np.random.default_rng(r * c)
    x = (rng.standard_normal((r, c)) * 3 + 5).astype(np.float32)   # an offset: a one-pass variance would lose it
    scale = rng.standard_normal(c).astype(np.float32) if affine != "none" else None
    bias = rng.standard_normal(c).astype(np.float32) if affine == "scale_bias" else None
    want, wm, wi = _layernorm64(x, scale, bias, 1e-5)
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y, m, inv = np.empty_like(x), np.empty(r, np.float32), np.empty(r, np.float32)
            mod.layernorm_f32(x, y, scale, bias, 1e-5, m, inv, nt)
            amp = 1.0 if scale is None else np.abs(scale).max()
            np.testing.assert_allclose(y, want, rtol=0, atol=(c + 8) * EPS * 4 * amp, err_msg=isa)
            np.testing.assert_allclose(m, wm, rtol=c * EPS, atol=0, err_msg=isa)
            np.testing.assert_allclose(inv, wi, rtol=(c + 8) * EPS, err_msg=isa)
            z = x.copy()
            mod.layernorm_f32(z, z, scale, bias, 1e-5, None, None, nt)     # in place, statistics not asked for
            np.testing.assert_array_equal(z, y, err_msg=isa)


def test_layernorm_kernel_constant_rows_and_checks():
    """Oracle: the spec formula: a constant row has variance 0, so y = 0 * 1/sqrt(eps) * scale + bias = bias."""
    x = np.full((4, 16), 3.25, np.float32)
    b = np.arange(16, dtype=np.float32)
    y = np.empty_like(x)
    _kernels.layernorm_f32(x, y, np.ones(16, np.float32), b, 1e-5)
    np.testing.assert_array_equal(y, np.broadcast_to(b, x.shape))
    with pytest.raises(ValueError, match="scale"):
        _kernels.layernorm_f32(x, y, np.ones(15, np.float32), None, 1e-5)
    with pytest.raises(ValueError, match="mean"):
        _kernels.layernorm_f32(x, y, None, None, 1e-5, np.empty(3, np.float32))
    with pytest.raises(ValueError, match="y is"):
        _kernels.layernorm_f32(x, np.empty((4, 15), np.float32), None, None, 1e-5)


def _same_for_every_thread_count(outs):
    """outs: (isa, result) pairs, one per thread count of each variant; within a variant they must be bit-identical."""
    by_isa = {}
    for isa, r in outs:
        by_isa.setdefault(isa, []).append(r)
    for isa, rs in by_isa.items():
        assert len(rs) >= 2, isa
        for r in rs[1:]:
            np.testing.assert_array_equal(r, rs[0], err_msg=f"{isa}: 1 thread and many differ")


def _offsets(n, size):
    return np.arange(n, dtype=np.int64) * size


@pytest.mark.parametrize("t,m,n,k", [(1, 1, 1, 1), (12, 128, 128, 64), (12, 128, 64, 128), (3, 37, 70, 300),
                                     (5, 13, 33, 1), (2, 0, 4, 3), (2, 4, 5, 0), (12, 11, 11, 16), (3, 7, 19, 5),
                                     (2, 40, 40, 40), (2, 41, 40, 40)])
def test_sgemm_batched_kernel(t, m, n, k):
    """Oracle: numpy.matmul in float64; |error| <= 2 (K + 2) eps max|A| max|B| (the GEMM bound); one thread and many
    give identical results (each item's sums are in the same order either way)."""
    rng = np.random.default_rng(t * 1000 + k)
    A = rng.uniform(-1, 1, (t, m, k)).astype(np.float32)
    B = rng.uniform(-1, 1, (t, k, n)).astype(np.float32)
    want = np.matmul(A.astype(np.float64), B.astype(np.float64))
    outs = []
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            C = np.full((t, m, n), np.nan, np.float32)
            mod.sgemm_batched_f32(A.reshape(-1), B.reshape(-1), C.reshape(-1), _offsets(t, m * k),
                                  _offsets(t, k * n), _offsets(t, m * n), m, n, k, k, 1, n, 1, n, 1, 1.0, nt)
            np.testing.assert_allclose(C, want, rtol=0, atol=2 * (k + 2) * EPS, err_msg=isa)
            outs.append((isa, C))
    _same_for_every_thread_count(outs)


def test_sgemm_batched_kernel_strided_and_broadcast():
    """Oracle: numpy.matmul on the equivalent views: attention's heads read in place from (S, H*D) rows (A, and B
    transposed), written into (S, H*D) rows; alpha applied; a broadcast B (repeated offset)."""
    S, H, D = 33, 4, 16
    rng = np.random.default_rng(3)
    xq = rng.standard_normal((S, H * D)).astype(np.float32)
    xk = rng.standard_normal((S, H * D)).astype(np.float32)
    C = np.empty((H, S, S), np.float32)
    _kernels.sgemm_batched_f32(xq.reshape(-1), xk.reshape(-1), C.reshape(-1), _offsets(H, D), _offsets(H, D),
                               _offsets(H, S * S), S, S, D, H * D, 1, 1, H * D, S, 1, 0.25, 0)
    q = xq.reshape(S, H, D).transpose(1, 0, 2).astype(np.float64)
    kt = xk.reshape(S, H, D).transpose(1, 2, 0).astype(np.float64)
    np.testing.assert_allclose(C, 0.25 * (q @ kt), rtol=0, atol=2 * (D + 2) * EPS * 16)
    P = rng.uniform(0, 1, (H, S, S)).astype(np.float32)
    out = np.empty((S, H * D), np.float32)
    _kernels.sgemm_batched_f32(P.reshape(-1), xk.reshape(-1), out.reshape(-1), _offsets(H, S * S),
                               np.zeros(H, np.int64), _offsets(H, D), S, D, S, S, 1, H * D, 1, H * D, 1, 1.0, 0)
    want = np.matmul(P.astype(np.float64), xk[:, :D].astype(np.float64))      # every head uses the same B
    np.testing.assert_allclose(out.reshape(S, H, D).transpose(1, 0, 2), want, rtol=0, atol=2 * (S + 2) * EPS * 4)


@pytest.mark.parametrize("t,m,n,k", [(12, 11, 11, 16), (4, 5, 37, 3), (3, 33, 20, 64), (2, 9, 100, 60)])
def test_sgemm_batched_kernel_small_items_strided(t, m, n, k):
    """Oracle: numpy.matmul in float64 on the views. Small items (the direct path: B copied into padded rows, A read
    in place) with B read transposed (column stride != 1) and C written transposed (column stride != 1), alpha
    applied; every ISA variant, one thread and many bit-identical."""
    rng = np.random.default_rng(t + m + n + k)
    A = rng.uniform(-1, 1, (t, m, k)).astype(np.float32)
    Bt = rng.uniform(-1, 1, (t, n, k)).astype(np.float32)          # B stored (n, k): B[k, n] at n*k + k
    want = 0.75 * np.matmul(A.astype(np.float64), Bt.transpose(0, 2, 1).astype(np.float64))
    outs = []
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            Ct = np.full((t, n, m), np.nan, np.float32)                # C stored (n, m)
            mod.sgemm_batched_f32(A.reshape(-1), Bt.reshape(-1), Ct.reshape(-1), _offsets(t, m * k),
                                  _offsets(t, n * k), _offsets(t, n * m), m, n, k, k, 1, 1, k, 1, m, 0.75, nt)
            np.testing.assert_allclose(Ct.transpose(0, 2, 1), want, rtol=0, atol=2 * (k + 2) * EPS, err_msg=isa)
            outs.append((isa, Ct))
    _same_for_every_thread_count(outs)


def test_sgemm_batched_kernel_checks():
    """Offsets / strides that reach outside a buffer are refused before anything runs."""
    a = np.zeros(12, np.float32)
    c = np.zeros(16, np.float32)
    with pytest.raises(ValueError, match="outside"):
        _kernels.sgemm_batched_f32(a, a, c, _offsets(2, 6), _offsets(2, 6), _offsets(2, 9), 3, 3, 2, 2, 1, 3, 1, 3, 1)
    with pytest.raises(ValueError, match="offsets"):
        _kernels.sgemm_batched_f32(a, a, c, _offsets(2, 0), _offsets(1, 0), _offsets(2, 0), 1, 1, 1, 1, 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match="negative"):
        _kernels.sgemm_batched_f32(a, a, c, _offsets(1, 0), _offsets(1, 0), _offsets(1, 0), 1, 1, 1, -1, 1, 1, 1, 1, 1)


def res_gemm_case(m, n, k, act):
    """Seeded A (m, k), B (k, n), bias, R and the float64 oracle act(A @ B + bias + R) with its tolerance: the GEMM
    bound (Gelu: its slope, at most 1.13, times the bound, plus its own 3e-7 max(1, |x|))."""
    rng = np.random.default_rng(m + n + k)
    A = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    B = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    R = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    want = A.astype(np.float64) @ B + bias + R
    tol = 2 * (k + 4) * EPS
    if act == "Relu":
        want = np.maximum(want, 0)
    elif act == "Gelu":
        tol = 1.13 * tol + 3e-7 * np.maximum(1.0, np.abs(want))
        want = _gelu64(want)
    return A, B, bias, R, want, tol


@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (128, 768, 768), (13, 70, 300), (5, 33, 0)])
@pytest.mark.parametrize("act", [None, "Relu", "Gelu"])
def test_sgemm_packed_res_kernel(m, n, k, act):
    """Oracle: numpy in float64, act(A @ B + bias + R) within the GEMM bound (Gelu: its slope, at most 1.13, times
    the bound, plus its own 3e-7 max(1, |x|)); R must not alias C."""
    A, B, bias, R, want, tol = res_gemm_case(m, n, k, act)
    for isa, mod in VARIANTS.items():
        bp = np.empty(mod.sgemm_pack_b_size(k, n), np.float32)
        mod.sgemm_pack_b(B, False, bp)
        for nt in (1, 0):
            C = np.full((m, n), np.nan, np.float32)
            mod.sgemm_packed_res_f32(A, bp, n, C, bias, R, False, nt, act)
            assert np.all(np.abs(C - want) <= tol), (isa, float(np.max(np.abs(C - want) / tol)))
        with pytest.raises(ValueError, match="alias"):
            mod.sgemm_packed_res_f32(A, bp, n, R, bias, R)


def _attention_want(xq, xk, xv, H, D, alpha, mask):
    """numpy float64: per head softmax(alpha * q k^T + mask) v, heads read from / written to (S, H*D) rows."""
    q, k, v = (x.reshape(x.shape[0], H, D).transpose(1, 0, 2).astype(np.float64) for x in (xq, xk, xv))
    s = alpha * q @ k.transpose(0, 2, 1)
    if mask is not None:
        s = s + mask
    s = np.exp(s - s.max(-1, keepdims=True))
    return ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(xq.shape[0], H * D)


@pytest.mark.parametrize("S,N,H,D,masked", [(128, 128, 12, 64, "row"), (300, 77, 3, 16, "row"),
                                            (5, 9, 2, 3, None), (1, 1, 1, 1, "per_row"), (150, 40, 1, 8, "per_row"),
                                            (1, 1001, 12, 64, "row"), (3, 50, 2, 70, "per_row"), (4, 17, 3, 5, None)])
def test_attention_kernel(S, N, H, D, masked):
    """Oracle: numpy in float64 (per-head softmax(alpha q k^T + mask) v with the heads read in place from (S, H*D)
    rows and written into them, as FusedAttention calls it); queries past 144 rows take a second row block. One
    thread and many give identical results."""
    rng = np.random.default_rng(S + N + H)
    xq = rng.standard_normal((S, H * D)).astype(np.float32)
    xk, xv = (rng.standard_normal((N, H * D)).astype(np.float32) for _ in range(2))
    alpha = float(1 / np.sqrt(D))
    mask, m_off, m_cs, mw = None, None, 0, None
    if masked == "row":            # one additive mask row of N keys, shared by every head and query
        mask = np.where(rng.uniform(size=N) < 0.3, -10000.0, 0.0).astype(np.float32)
        m_off, m_cs, mw = np.zeros(H * S, np.int64), 1, mask
    elif masked == "per_row":      # one value per (head, query) row
        mask = rng.standard_normal(H * S).astype(np.float32)
        m_off, m_cs, mw = _offsets(H * S, 1), 0, mask.reshape(H, S, 1)
    want = _attention_want(xq, xk, xv, H, D, alpha, mw)
    outs = []
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.full((S, H * D), np.nan, np.float32)
            mod.attention_f32(xq.reshape(-1), xk.reshape(-1), xv.reshape(-1), mask, y.reshape(-1), _offsets(H, D),
                              _offsets(H, D), _offsets(H, D), _offsets(H, D), m_off, m_cs, S, N, D, D,
                              H * D, 1, 1, H * D, H * D, 1, H * D, 1, alpha, nt)
            np.testing.assert_allclose(y, want, rtol=0, atol=1e-5 * max(1.0, float(np.abs(want).max())), err_msg=isa)
            outs.append((isa, y))
    _same_for_every_thread_count(outs)


@pytest.mark.parametrize("T,M,N,K,D", [(3, 7, 19, 5, 21), (2, 9, 16, 8, 8), (4, 6, 33, 3, 40), (1, 1, 2, 1, 1),
                                       (12, 11, 11, 16, 16), (2, 40, 5, 8, 8), (6, 70, 100, 64, 70)])
@pytest.mark.parametrize("masked", [None, "cols", "row_value", "inf_rows"])
def test_attention_kernel_transposed_layouts(T, M, N, K, D, masked):
    """Oracle: numpy in float64 on the same tensors. K stored (T, N, K) and read transposed, V stored (T, D, N)
    and Y written (T, D, M) (column strides != 1: the gathered V copy and the scattered output); sizes not multiples
    of any vector width (the padded scores rows and output tails); masks per key column, one value per row, and
    -inf entries (a fully masked row gives NaN, as the softmax of all -inf does). One thread and many give identical
    results."""
    rng = np.random.default_rng(T * 1000 + M + N + K + D)
    q = rng.standard_normal((T, M, K)).astype(np.float32)
    k = rng.standard_normal((T, N, K)).astype(np.float32)
    v = rng.standard_normal((T, D, N)).astype(np.float32)
    alpha = 0.37
    s = alpha * np.einsum("tmk,tnk->tmn", q.astype(np.float64), k.astype(np.float64))
    mask, m_off, m_cs = None, None, 0
    if masked == "cols":          # one row of N per item, shared by its queries
        mask = rng.standard_normal((T, N)).astype(np.float32)
        m_off, m_cs = np.repeat(_offsets(T, N), M), 1
        s = s + mask[:, None, :]
    elif masked == "row_value":   # one value per scores row
        mask = rng.standard_normal(T * M).astype(np.float32)
        m_off, m_cs = _offsets(T * M, 1), 0
        s = s + mask.reshape(T, M, 1)
    elif masked == "inf_rows":    # -inf keys, and query 0 of item 0 fully masked
        mask = np.where(rng.uniform(size=(T, M, N)) < 0.4, -np.inf, 0.0).astype(np.float32)
        mask[0, 0, :] = -np.inf
        m_off, m_cs = _offsets(T * M, N), 1
        s = s + mask
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        want = np.einsum("tmn,tdn->tdm", e / e.sum(-1, keepdims=True), v.astype(np.float64))
    outs = []
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.full((T, D, M), 7.0, np.float32)
            mod.attention_f32(q.reshape(-1), k.reshape(-1), v.reshape(-1), None if mask is None else mask.reshape(-1),
                              y.reshape(-1), _offsets(T, M * K), _offsets(T, N * K), _offsets(T, D * N),
                              _offsets(T, D * M), m_off, m_cs, M, N, K, D, K, 1, 1, K, 1, N, 1, M, alpha, nt)
            np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * max(1.0, float(np.abs(np.nan_to_num(want)).max())),
                                       err_msg=isa)
            outs.append((isa, y))
    _same_for_every_thread_count(outs)


@pytest.mark.parametrize("M,N,K,D", [(1, 1001, 64, 64), (2, 33, 70, 21), (4, 16, 8, 1), (3, 5, 1, 40)])
def test_attention_kernel_few_rows_in_place(M, N, K, D):
    """At most ONNXEP_AT_RB (4) query rows against K and V as stored (onnxep_at_rows_kv: nothing packed, batch-1
    decoding): K (T, N, K) and V (T, N, D) rows contiguous, Y written transposed (T, D, M; column stride M), head
    and value widths off the vector widths, two items sharing one K and V (a grouped-query head). Oracle: numpy in
    float64; one thread and many give identical results."""
    T = 3
    rng = np.random.default_rng(M * 1000 + N + K + D)
    q = rng.standard_normal((T, M, K)).astype(np.float32)
    k = rng.standard_normal((T - 1, N, K)).astype(np.float32)
    v = rng.standard_normal((T - 1, N, D)).astype(np.float32)
    kv = [0, 0, 1]                        # items 0 and 1 read the same K and V
    alpha = 0.37
    s = alpha * np.einsum("tmk,tnk->tmn", q.astype(np.float64), k[kv].astype(np.float64))
    e = np.exp(s - s.max(-1, keepdims=True))
    want = np.einsum("tmn,tnd->tdm", e / e.sum(-1, keepdims=True), v[kv].astype(np.float64))
    outs = []
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.full((T, D, M), 7.0, np.float32)
            mod.attention_f32(q.reshape(-1), k.reshape(-1), v.reshape(-1), None, y.reshape(-1), _offsets(T, M * K),
                              np.array(kv, np.int64) * N * K, np.array(kv, np.int64) * N * D, _offsets(T, D * M),
                              None, 0, M, N, K, D, K, 1, 1, K, D, 1, 1, M, alpha, nt)
            np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * max(1.0, float(np.abs(want).max())), err_msg=isa)
            outs.append((isa, y))
    _same_for_every_thread_count(outs)


def _masked_params(T, M, N, K, D, strides, nan_zero, masks, bf16=0):
    params = [T, M, N, K, D, *strides, nan_zero, len(masks), bf16]
    for kind, _, cs, _ in masks:
        params += [kind, cs]
    return np.array(params, np.int64), np.array([0.5] + [fill for _, _, _, fill in masks], np.float32)


@pytest.mark.parametrize("T,M,N,K,D", [(6, 11, 11, 16, 16), (2, 37, 20, 8, 24), (3, 5, 70, 32, 8),
                                       (4, 2, 1001, 64, 64), (3, 3, 17, 7, 70), (2, 4, 33, 80, 3)])
@pytest.mark.parametrize("nan_zero", [0, 1])
def test_attention_masked_kernel(T, M, N, K, D, nan_zero):
    """Oracle: numpy in float64, the masks applied in order as the exporters' graphs do: an additive float mask per
    key column shared by the queries, a bool causal Where(mask, s, lowest) and a bool padding Where(mask, s, -inf)
    with fully masked rows (NaN probabilities; zeros with nan_zero). Heads read from (S, H*D) rows. One thread and
    many give identical results."""
    rng = np.random.default_rng(T + M + N + K + D + nan_zero)
    q = rng.standard_normal((M, T, K)).astype(np.float32)
    k = rng.standard_normal((N, T, K)).astype(np.float32)
    v = rng.standard_normal((N, T, D)).astype(np.float32)
    add = rng.standard_normal((T, N)).astype(np.float32)
    causal = np.tril(np.ones((M, N), bool), k=N - M)
    pad = rng.uniform(size=(T, M, N)) < 0.8
    pad[0, 1, :] = False                                          # a fully masked row
    lowest = float(np.finfo(np.float32).min)
    masks = [(0, add, 1, 0.0), (1, causal, 1, lowest), (1, pad, 1, -np.inf)]
    offs = np.concatenate([_offsets(T, K), _offsets(T, K), _offsets(T, D), _offsets(T, D),
                           np.repeat(_offsets(T, N), M), np.tile(_offsets(M, N), T), _offsets(T * M, N)])
    params, fparams = _masked_params(T, M, N, K, D, (T * K, 1, 1, T * K, T * D, 1, T * D, 1), nan_zero, masks)
    s = 0.5 * np.einsum("mtk,ntk->tmn", q.astype(np.float64), k.astype(np.float64)) + add[:, None, :]
    s = np.where(causal[None], s, lowest)
    s = np.where(pad, s, -np.inf)
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
    if nan_zero:
        p = np.where(np.isnan(p), 0.0, p)
    want = np.einsum("tmn,ntd->mtd", p, v.astype(np.float64))
    outs = []
    for isa, mod in VARIANTS.items():
        for nt in (1, 0):
            y = np.full((M, T, D), 7.0, np.float32)
            mod.attention_masked_f32(q, k, v, y, offs, (add, causal, pad), params, fparams, nt)
            np.testing.assert_allclose(y, want, rtol=0, atol=2e-5 * max(1.0, float(np.abs(np.nan_to_num(want)).max())),
                                       err_msg=isa)
            outs.append((isa, y))
    _same_for_every_thread_count(outs)
    assert np.isnan(outs[0][1][1, 0]).all() != bool(nan_zero)


def test_attention_masked_kernel_checks():
    """Parameters that do not match the masks, offsets or masks that reach outside their buffers are refused."""
    x = np.zeros(12, np.float32)
    y = np.zeros(12, np.float32)
    m = np.zeros(6, bool)
    strides = (2, 1, 1, 2, 2, 1, 2, 1)      # 2 x 2 Q / K^T, 3 x 2 V (M=2, N=3 ... as attention_f32's checks)
    params, fparams = _masked_params(2, 2, 3, 2, 2, strides, 0, [(1, m, 1, -np.inf)])
    good = np.concatenate([_offsets(2, 0)] * 4 + [_offsets(4, 0)])
    _kernels.attention_masked_f32(x, x, x, y, good, (m,), params, fparams)
    with pytest.raises(ValueError, match="parameters"):
        _kernels.attention_masked_f32(x, x, x, y, good, (), params, fparams)
    with pytest.raises(ValueError, match="offsets"):
        _kernels.attention_masked_f32(x, x, x, y, good[:-1], (m,), params, fparams)
    with pytest.raises(ValueError, match="mask 0"):
        _kernels.attention_masked_f32(x, x, x, y, np.concatenate([good[:-1], [4]]), (m,), params, fparams)
    with pytest.raises(ValueError, match="outside the buffers"):
        _kernels.attention_masked_f32(x, x, x, y[:3], good, (m,), params, fparams)
    bad, _ = _masked_params(2, 2, 3, 2, 2, strides, 0, [(2, m, 1, -np.inf)])
    with pytest.raises(ValueError, match="kind"):
        _kernels.attention_masked_f32(x, x, x, y, good, (m,), bad, fparams)


def test_attention_kernel_checks():
    """Offsets that reach outside a buffer, a mask offset count that is not one per scores row, and no keys are
    refused before anything runs."""
    x = np.zeros(12, np.float32)
    y = np.zeros(12, np.float32)
    o = _offsets(2, 0)
    args = (2, 3, 2, 2, 2, 1, 1, 2, 2, 1, 2, 1)   # M, N, K, D and the strides of 2 x 2 / 3 x 2 operands
    with pytest.raises(ValueError, match="outside"):
        _kernels.attention_f32(x, x, x, None, y, o, o, o, _offsets(2, 9), o, 0, *args)
    with pytest.raises(ValueError, match="mask offsets"):
        _kernels.attention_f32(x, x, x, x, y, o, o, o, o, _offsets(3, 0), 1, *args)
    with pytest.raises(ValueError, match="0 mask offsets"):
        _kernels.attention_f32(x, x, x, x, y, o, o, o, o, None, 1, *args)
    with pytest.raises(ValueError, match="mask"):
        _kernels.attention_f32(x, x, x, x, y, o, o, o, o, _offsets(4, 11), 1, *args)
    with pytest.raises(ValueError, match="no keys"):
        _kernels.attention_f32(x, x, x, None, y, o, o, o, o, o, 0, 2, 0, 2, 2, 2, 1, 1, 2, 2, 1, 2, 1)
