"""The fused attention kernel on bf16 operands (attention_masked_f32 with ATP_BF16 = 1: _native/attention.h
onnxep_atb_rows on bgemm.h's micro-kernel and packings), on every ISA variant this machine runs and every bf16
micro-kernel it can run (generic C everywhere; avx512bf16 vdpbf16ps only where the CPU has AVX512_BF16: skipped,
with the reason, elsewhere).

Oracle: numpy in float64 on the fp32 inputs, with the error bound of the bf16 products derived here. Rounding Q, K
to bf16 (8 significant bits, unit roundoff u = 2**-8) gives each product q~ k~ a relative error <= 2u + u**2; the
products are exact in fp32 and K of them summed in fp32 (vdpbf16ps pair sums) add <= K * 2**-23 sum |q||k|; alpha
and the mask add one fp32 rounding of |alpha s| + |m|. So the score error is |ds_j| <= E_j := alpha (2u + u**2 +
K 2**-23) sum_k |q_k||k_kj| + 2**-23 (|alpha s_j| + |m_j|). Then softmax(s + ds)_j / p_j lies in
[exp(-E_j) / A+, exp(E_j) / A-] with A+- = sum_l p_l exp(+-E_l), which bounds |p~_j - p_j| =: dp_j. The unnormalized
probabilities and V rounded to bf16 add 2u + u**2 relative per product, their fp32 sum N 2**-23, and the fp32 exp,
sum and division a few ulps (2**-19). Per output element:
    |y - y_ref| <= (1 + 2**-6) sum_j (dp_j + p_j (2u + u**2 + N 2**-23 + 2**-19)) |v_j|.
A packing or layout error (a wrong key, pair or column) is O(1) and fails this bound; fp32 operands pass it with a
margin of ~2**7, so the tests also check that the bf16 result is not the fp32 one."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
KERNELS = ["generic", "avx512bf16"]
CASES = [(v, k) for v in VARIANTS for k in KERNELS]
U = 2.0 ** -8


@pytest.fixture(params=CASES, ids=[f"{v}-{k}" for v, k in CASES])
def mod(request):
    m = VARIANTS[request.param[0]]
    if not m.bgemm_have(request.param[1]):
        pytest.skip(f"this CPU lacks {request.param[1]} (AVX512_BF16: vdpbf16ps)")
    m.bgemm_force(request.param[1])
    yield m
    m.bgemm_force(None)


def _offsets(n, size):
    return np.arange(n, dtype=np.int64) * size


def _params(T, M, N, K, D, strides, nan_zero, masks, bf16):
    params = [T, M, N, K, D, *strides, nan_zero, len(masks), bf16]
    for kind, cs in masks:
        params += [kind, cs]
    return np.array(params, np.int64)


def _oracle(q, k, v, alpha, madd, mkeep, nan_zero):
    """float64 y (T, M, D) and its bound from q (T, M, K), k (T, N, K), v (T, N, D), an additive mask madd and a
    keep mask mkeep (T, M, N) (False: -inf)."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    K, N = q.shape[-1], k.shape[1]
    s = alpha * np.einsum("tmk,tnk->tmn", q, k) + madd
    s = np.where(mkeep, s, -np.inf)
    E = alpha * (2 * U + U * U + K * 2.0 ** -23) * np.einsum("tmk,tnk->tmn", np.abs(q), np.abs(k))
    E = E + 2.0 ** -23 * (np.abs(alpha * np.einsum("tmk,tnk->tmn", q, k)) + np.abs(madd))
    E = np.where(madd < -1e30, 0.0, E)      # a fill of float32's lowest: the score is the fill, its exp 0
    with np.errstate(invalid="ignore"):
        e = np.exp(s - s.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
    if nan_zero:
        p = np.where(np.isnan(p), 0.0, p)
    pz = np.nan_to_num(p)
    a_plus = (pz * np.exp(E)).sum(-1, keepdims=True)
    a_minus = (pz * np.exp(-E)).sum(-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        dp = pz * np.maximum(np.exp(E) / a_minus - 1, 1 - np.exp(-E) / a_plus)
    dp = np.nan_to_num(dp)
    want = np.einsum("tmn,tnd->tmd", p, v)
    bound = (1 + 2.0 ** -6) * np.einsum("tmn,tnd->tmd", dp + pz * (2 * U + U * U + N * 2.0 ** -23 + 2.0 ** -19),
                                        np.abs(v))
    return want, bound


SHAPES = [(3, 7, 19, 5, 21), (2, 13, 16, 8, 8), (4, 30, 33, 3, 40), (1, 1, 1, 1, 1), (12, 11, 11, 16, 16),
          (2, 25, 77, 64, 64), (3, 40, 197, 80, 80), (2, 17, 130, 128, 33)]


@pytest.mark.parametrize("T,M,N,K,D", SHAPES)
@pytest.mark.parametrize("layout", ["rows", "transposed"])
@pytest.mark.parametrize("nan_zero", [0, 1])
def test_attention_bf16_bound(mod, T, M, N, K, D, layout, nan_zero):
    """Within the derived bound of the float64 oracle, with an additive float mask per key, a causal bool mask
    (fill: float32's lowest) and a padding bool mask (fill -inf) with a fully masked row (NaN, or zeros with
    nan_zero); layouts: heads read in place from (S, T*dim) rows (the head dim contiguous: the vector packings), or
    Q (T, K, M), K (T, K, N), V (T, D, N), Y (T, D, M) (column strides != 1: the gathered packings and the
    scattered output). Query rows past 12 take more register blocks; one thread and two give identical results;
    the result is not the fp32 kernel's (the bf16 path ran)."""
    rng = np.random.default_rng(T * 100 + M + N + K + D + nan_zero)
    q = rng.standard_normal((T, M, K)).astype(np.float32)
    k = rng.standard_normal((T, N, K)).astype(np.float32)
    v = rng.standard_normal((T, N, D)).astype(np.float32)
    add = rng.standard_normal((T, N)).astype(np.float32)
    causal = np.tril(np.ones((M, N), bool), k=N - M)
    pad = rng.uniform(size=(T, M, N)) < 0.8
    pad[0, 0, :] = False
    lowest = float(np.finfo(np.float32).min)
    alpha = float(K) ** -0.5
    if layout == "rows":
        qs, ks, vs = (np.ascontiguousarray(x.transpose(1, 0, 2)) for x in (q, k, v))
        y_shape = (M, T, D)
        offs = [_offsets(T, K), _offsets(T, K), _offsets(T, D), _offsets(T, D)]
        strides = (T * K, 1, 1, T * K, T * D, 1, T * D, 1)
    else:
        qs, ks, vs = (np.ascontiguousarray(x.transpose(0, 2, 1)) for x in (q, k, v))
        y_shape = (T, D, M)
        offs = [_offsets(T, M * K), _offsets(T, N * K), _offsets(T, N * D), _offsets(T, M * D)]
        strides = (1, M, N, 1, 1, N, 1, M)
    offs = np.concatenate(offs + [np.repeat(_offsets(T, N), M), np.tile(_offsets(M, N), T), _offsets(T * M, N)])
    masks = [(0, 1), (1, 1), (1, 1)]
    fparams = np.array([alpha, 0.0, lowest, -np.inf], np.float32)
    madd = np.broadcast_to(add[:, None, :], (T, M, N)).astype(np.float64)
    madd = np.where(causal[None], madd, lowest)     # the causal Where's fill (every row keeps a key: N >= M)
    want, bound = _oracle(q, k, v, alpha, madd, pad, nan_zero)
    if layout == "transposed":
        want, bound = want.transpose(0, 2, 1), bound.transpose(0, 2, 1)
    else:
        want, bound = want.transpose(1, 0, 2), bound.transpose(1, 0, 2)
    outs = []
    for nt in (1, 2):
        y = np.full(y_shape, 7.0, np.float32)
        mod.attention_masked_f32(qs, ks, vs, y, offs, (add, causal, pad),
                                 _params(T, M, N, K, D, strides, nan_zero, masks, 1), fparams, nt)
        outs.append(y)
    np.testing.assert_array_equal(outs[0], outs[1])
    y = outs[0].astype(np.float64)
    nan = np.isnan(want)
    assert (np.isnan(y) == nan).all()
    assert nan.any() != bool(nan_zero)
    err = np.abs(np.where(nan, 0, y - want))
    assert (err <= np.where(nan, 0, bound)).all(), float(np.max(err - bound))
    y32 = np.full(y_shape, 7.0, np.float32)
    mod.attention_masked_f32(qs, ks, vs, y32, offs, (add, causal, pad),
                             _params(T, M, N, K, D, strides, nan_zero, masks, 0), fparams, 1)
    if M * N * K > 8:
        assert not np.array_equal(np.nan_to_num(y32), np.nan_to_num(outs[0]))


@pytest.mark.parametrize("N,D", [(16, 5), (32, 33), (64, 64), (8, 80), (128, 17)])
def test_attention_bf16_exact_uniform(mod, N, D):
    """alpha = 0 makes every probability 1 / N (bf16-exact unnormalized exps of 1): with integer V (|v| <= 8, bf16
    exact) and N a power of two the output is exactly the float64 mean of V over the keys (catches a V panel, pair or
    column tail error exactly)."""
    rng = np.random.default_rng(N + D)
    T, M, K = 3, 14, 9
    q = rng.standard_normal((M, T, K)).astype(np.float32)
    k = rng.standard_normal((N, T, K)).astype(np.float32)
    v = rng.integers(-8, 9, (N, T, D)).astype(np.float32)
    y = np.full((M, T, D), np.nan, np.float32)
    offs = np.concatenate([_offsets(T, K), _offsets(T, K), _offsets(T, D), _offsets(T, D)])
    mod.attention_masked_f32(q, k, v, y, offs, (), _params(T, M, N, K, D, (T * K, 1, 1, T * K, T * D, 1, T * D, 1),
                                                           0, [], 1), np.array([0.0], np.float32), 1)
    np.testing.assert_array_equal(y, np.broadcast_to(v.astype(np.float64).mean(0), (M, T, D)))


@pytest.mark.parametrize("M,N,K,D", [(20, 50, 64, 64), (5, 7, 3, 9)])
def test_attention_bf16_grouped_query(mod, M, N, K, D):
    """Grouped-query heads: 6 query heads read 2 kv heads in place (item t's K and V offsets are kv head t // 3's),
    within the derived bound of the float64 oracle on the repeated heads; 1 and 2 threads give identical results."""
    rng = np.random.default_rng(M + N)
    T, G = 6, 2
    q = rng.standard_normal((M, T, K)).astype(np.float32)
    k = rng.standard_normal((N, G, K)).astype(np.float32)
    v = rng.standard_normal((N, G, D)).astype(np.float32)
    kv = np.arange(T) // (T // G)
    offs = np.concatenate([_offsets(T, K), kv * K, kv * D, _offsets(T, D)]).astype(np.int64)
    params = _params(T, M, N, K, D, (T * K, 1, 1, G * K, G * D, 1, T * D, 1), 0, [], 1)
    outs = []
    for nt in (1, 2):
        y = np.full((M, T, D), np.nan, np.float32)
        mod.attention_masked_f32(q, k, v, y, offs, (), params, np.array([0.3], np.float32), nt)
        outs.append(y)
    np.testing.assert_array_equal(outs[0], outs[1])
    want, bound = _oracle(q.transpose(1, 0, 2), k.transpose(1, 0, 2)[kv], v.transpose(1, 0, 2)[kv], 0.3,
                          np.zeros((T, M, N)), np.ones((T, M, N), bool), 0)
    err = np.abs(outs[0].transpose(1, 0, 2) - want)
    assert (err <= bound).all(), float(np.max(err - bound))


def test_attention_bf16_param_checked():
    """The bf16 flag is 0 or 1."""
    x = np.zeros(12, np.float32)
    params = _params(2, 2, 3, 2, 2, (2, 1, 1, 2, 2, 1, 2, 1), 0, [], 2)
    with pytest.raises(ValueError, match="parameters"):
        _kernels.attention_masked_f32(x, x, x, x.copy(), _offsets(8, 0), (), params, np.array([1.0], np.float32))


@pytest.mark.parametrize("N,K,D", [(19, 5, 7), (33, 64, 64), (77, 80, 33), (197, 64, 64), (40, 3, 16)])
def test_attention_bf16_exact_one_hot(mod, N, K, D):
    """Integer Q and K (|x| <= 4: bf16-exact, their dot products exact in fp32) and alpha = 128 put a gap of at least
    128 between a row's top score and the next (where the top is unique), beyond the exp's cutoff (-87): the
    probabilities are exactly one-hot and the output row is exactly V's row of the float64 argmax (catches a Q.K^T
    panel, pair, key-tail or head-dim-tail error exactly)."""
    rng = np.random.default_rng(N * 10 + K)
    T, M = 2, 29
    q = rng.integers(-4, 5, (M, T, K)).astype(np.float32)
    k = rng.integers(-4, 5, (N, T, K)).astype(np.float32)
    v = rng.integers(-8, 9, (N, T, D)).astype(np.float32)
    y = np.full((M, T, D), np.nan, np.float32)
    offs = np.concatenate([_offsets(T, K), _offsets(T, K), _offsets(T, D), _offsets(T, D)])
    mod.attention_masked_f32(q, k, v, y, offs, (), _params(T, M, N, K, D, (T * K, 1, 1, T * K, T * D, 1, T * D, 1),
                                                           0, [], 1), np.array([128.0], np.float32), 1)
    s = np.einsum("mtk,ntk->tmn", q.astype(np.float64), k.astype(np.float64))
    top = np.sort(s, -1)
    unique = top[..., -1] > top[..., -2]
    assert unique.sum() >= T * M // 4
    for t in range(T):
        for i in np.flatnonzero(unique[t]):
            np.testing.assert_array_equal(y[i, t], v[np.argmax(s[t, i]), t])


@pytest.mark.parametrize("N,D", [(17, 9), (37, 40), (99, 64)])
def test_attention_bf16_exact_masked_odd_keys(mod, N, D):
    """An odd key count (the last pair half empty) with alpha = 0 and a -inf mask keeping 16 keys, the last one among
    them: every kept probability is exactly 1 / 16, so the output is exactly the float64 mean of the kept V rows."""
    rng = np.random.default_rng(N + D)
    T, M, K = 2, 13, 6
    q = rng.standard_normal((M, T, K)).astype(np.float32)
    k = rng.standard_normal((N, T, K)).astype(np.float32)
    v = rng.integers(-8, 9, (N, T, D)).astype(np.float32)
    keep = np.concatenate([rng.choice(N - 1, 15, replace=False), [N - 1]])
    mask = np.full(N, -np.inf, np.float32)
    mask[keep] = 0.0
    y = np.full((M, T, D), np.nan, np.float32)
    offs = np.concatenate([_offsets(T, K), _offsets(T, K), _offsets(T, D), _offsets(T, D), np.zeros(T * M, np.int64)])
    mod.attention_masked_f32(q, k, v, y, offs, (mask,), _params(T, M, N, K, D, (T * K, 1, 1, T * K, T * D, 1, T * D, 1),
                                                                0, [(0, 1)], 1), np.array([0.0, 0.0], np.float32), 1)
    np.testing.assert_array_equal(y, np.broadcast_to(v[keep].astype(np.float64).mean(0), (M, T, D)))
