"""int8 GEMM (onnxep/_native/qgemm.h via _k_qgemm.pxi). Oracle: numpy int64 products, wrapped to int32 -- exact
equality, on every ISA variant this machine runs and every micro-kernel it can run (generic, avx2, vnni forced)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
CASES = [(v, k) for v, m in VARIANTS.items() for k in ("generic", "avx2", "vnni") if m.qgemm_have(k)]
SIZES = [(1, 1, 1), (3, 5, 7), (7, 17, 33), (13, 3, 16), (50, 129, 31), (97, 64, 130), (6, 256, 32)]


def _oracle(a, za, b, zb):
    return ((a.astype(np.int64) - za) @ (b.astype(np.int64) - zb)).astype(np.int32)


@pytest.fixture(params=CASES, ids=[f"{v}-{k}" for v, k in CASES])
def mod(request):
    m = VARIANTS[request.param[0]]
    m.qgemm_force(request.param[1])
    assert m.qgemm_kernel() == request.param[1]
    yield m
    m.qgemm_force(None)


@pytest.mark.parametrize("M,K,N", SIZES)
@pytest.mark.parametrize("a_dt,b_dt", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8),
                                       (np.int8, np.uint8)])
@pytest.mark.parametrize("zp", ["zero", "mid", "per_column"])
def test_qgemm_exact(mod, M, K, N, a_dt, b_dt, zp):
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    info_a, info_b = np.iinfo(a_dt), np.iinfo(b_dt)
    a = rng.integers(info_a.min, info_a.max + 1, (M, K)).astype(a_dt)
    b = rng.integers(info_b.min, info_b.max + 1, (K, N)).astype(b_dt)
    a[0, :] = info_a.max                      # extremes: the s16 pair sums vpmaddubsw would saturate
    b[:, 0] = info_b.min
    if zp == "zero":
        za, zb = np.zeros(1, np.int64), np.zeros(1, np.int64)
    elif zp == "mid":
        za = np.array([128 if a_dt == np.uint8 else 0]); zb = np.array([128 if b_dt == np.uint8 else -3])
    else:
        za = np.array([rng.integers(info_a.min, info_a.max + 1)])
        zb = rng.integers(info_b.min, info_b.max + 1, N)
    bp = np.empty(mod.qgemm_pack_b_size(K, N), np.uint8)
    mod.qgemm_pack_b(b.view(np.uint8), b_dt == np.int8, bp)
    y = np.empty((M, N), np.int32)
    zb_shift = (zb - (128 if b_dt == np.uint8 else 0)).astype(np.int32)
    mod.qgemm(a.view(np.uint8), a_dt == np.int8, bp, K, N, za.astype(np.int32), zb_shift, y, 2)
    np.testing.assert_array_equal(y, _oracle(a, za, b, zb))


@pytest.mark.parametrize("M,K,N", SIZES)
def test_dq_matmul_matches_unfused(mod, M, K, N):
    """Fused dynamic quantization + GEMM equals DynamicQuantizeLinear -> exact integer product -> float epilogue."""
    rng = np.random.default_rng(K)
    x = rng.standard_normal((M, K)).astype(np.float32)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    bs = np.float32(0.01)
    bias = rng.standard_normal(N).astype(np.float32)
    q = np.empty(M * K, np.uint8)
    sa, za = mod.dynamic_quantize_linear_u8(x.reshape(-1), q)
    acc = _oracle(q.reshape(M, K), int(za), b, 0)
    want = acc.astype(np.float32) * np.float32(np.float32(sa) * bs) + bias
    bp = np.empty(mod.qgemm_pack_b_size(K, N), np.uint8)
    mod.qgemm_pack_b(b.view(np.uint8), True, bp)
    y = np.empty((M, N), np.float32)
    mod.dq_matmul_f32(x, bp, K, N, np.zeros(1, np.int32), np.array([bs]), bias, y, 2)
    # the integer product is exact and the epilogue is compiled without FMA contraction: the unfused Mul then Add
    np.testing.assert_array_equal(y, want)


def _dql_oracle(x):
    """ONNX DynamicQuantizeLinear in numpy float32: (y, scale, zero point)."""
    f = np.float32
    hi, lo = f(max(f(0), x.max())), f(min(f(0), x.min()))
    s = f(1) if hi == lo else f((hi - lo) / f(255))
    z = np.rint(np.clip(f(0) - lo / s, f(0), f(255)))
    y = np.clip(np.rint(np.divide(x, s, dtype=f)) + z, 0, 255).astype(np.uint8)
    return y, s, int(z)


@pytest.mark.parametrize("n", [1, 7, 8, 15, 16, 17, 33, 255, 1000])
@pytest.mark.parametrize("kind", ["normal", "halves", "positive", "negative"])
def test_dynamic_quantize_exact(mod, n, kind):
    """The vector min / max, division, round-half-even and clamp of every ISA variant against numpy, tails included;
    "halves" puts values on exact .5 quotients (ties to even)."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    if kind == "halves":
        x = (rng.integers(-40, 40, n) + np.float32(0.5)).astype(np.float32)
    elif kind == "positive":
        x = np.abs(x) + 1
    elif kind == "negative":
        x = -np.abs(x) - 1
    y = np.empty(n, np.uint8)
    s, z = mod.dynamic_quantize_linear_u8(x, y)
    wy, ws, wz = _dql_oracle(x)
    assert np.float32(s) == ws and z == wz
    np.testing.assert_array_equal(y, wy)
    # the fused op's row quantization (padded rows + row sums) through dq_matmul_f32 with B = identity columns
    K = n
    b = np.eye(K, dtype=np.int8)
    bp = np.empty(mod.qgemm_pack_b_size(K, K), np.uint8)
    mod.qgemm_pack_b(b.view(np.uint8), True, bp)
    out = np.empty((1, K), np.float32)
    mod.dq_matmul_f32(x.reshape(1, K), bp, K, K, np.zeros(1, np.int32), np.ones(1, np.float32), None, out, 1)
    np.testing.assert_array_equal(out.reshape(-1), (wy.astype(np.int32) - wz).astype(np.float32) * ws)
