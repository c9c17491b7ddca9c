"""QLinearMatMul on the int8 GEMM (_k_qgemm.pxi qlinear_matmul: qgemm.h's micro-kernels and the qg_requant_add
epilogue). Oracle: numpy integers -- (a - a_zp) @ (b - b_zp) in int64 wrapped to int32, float32(acc + bias) times the
float32 multiplier, numpy.rint (half to even), + y_zp, clipped: exact equality on every ISA variant this machine runs
and every micro-kernel it can run (generic, avx2, vnni forced). Covers rounding ties, saturation at both ends, per
column multipliers and zero points, the four operand type pairs, both output types, odd K / N tails, and a uint8 A
read in place (K a multiple of 4) as well as packed."""
import numpy as np
import pytest

from tests.kernels.test_qgemm import mod  # noqa: F401  (the fixture: each ISA variant x each micro-kernel it runs)

SIZES = [(1, 1, 1), (3, 5, 7), (7, 17, 33), (13, 4, 16), (50, 129, 31), (97, 64, 130), (6, 256, 17)]


def _oracle(a, za, b, zb, bias, mult, yz, ydt, lo, hi):
    acc = ((a.astype(np.int64) - za) @ (b.astype(np.int64) - zb))
    if bias is not None:
        acc = acc + bias
    acc = acc.astype(np.int32)          # int32 wraparound (no case here wraps)
    f = np.rint(acc.astype(np.float32) * mult.astype(np.float32)) + np.float32(yz)
    return np.clip(f, lo, hi).astype(ydt)


def _run(mod, a, za, b, zb, bias, mult, yz, ydt, lo=None, hi=None):
    K, N = b.shape
    info = np.iinfo(ydt)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    bp = np.empty(mod.qgemm_pack_b_size(K, N), np.uint8)
    mod.qgemm_pack_b(np.ascontiguousarray(b).view(np.uint8), b.dtype == np.int8, bp)
    zbs = (np.asarray(zb, np.int32).reshape(-1) - (128 if b.dtype == np.uint8 else 0)).astype(np.int32)
    y = np.empty((a.shape[0], N), ydt)
    mod.qlinear_matmul(np.ascontiguousarray(a).view(np.uint8), a.dtype == np.int8, bp, K, N, int(za), zbs,
                       np.ascontiguousarray(mult, np.float32).reshape(-1), bias, y.view(np.uint8), float(yz),
                       float(lo), float(hi), ydt == np.int8, 2)
    return y, _oracle(a, za, b, np.asarray(zb).reshape(-1) if np.size(zb) > 1 else int(np.asarray(zb).reshape(-1)[0]),
                      bias, mult, yz, ydt, lo, hi)


@pytest.mark.parametrize("M,K,N", SIZES)
@pytest.mark.parametrize("a_dt,b_dt", [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8),
                                       (np.int8, np.uint8)])
@pytest.mark.parametrize("y_dt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_col", [False, True])
def test_qlinear_matmul_exact(mod, M, K, N, a_dt, b_dt, y_dt, per_col):
    rng = np.random.default_rng(M * 1000 + K * 10 + N + per_col)
    ia, ib, iy = np.iinfo(a_dt), np.iinfo(b_dt), np.iinfo(y_dt)
    a = rng.integers(ia.min, ia.max + 1, (M, K)).astype(a_dt)
    b = rng.integers(ib.min, ib.max + 1, (K, N)).astype(b_dt)
    a[0, :] = ia.max
    b[:, 0] = ib.min
    za = int(rng.integers(ia.min, ia.max + 1))
    zb = rng.integers(ib.min, ib.max + 1, N if per_col else 1)
    # multipliers that spread the outputs over the type's range and past it (saturation at both ends)
    scale = np.float32(1.0 / (np.sqrt(K) * 128 * 40))
    mult = (scale * rng.uniform(0.5, 2.0, N if per_col else 1)).astype(np.float32)
    yz = int(rng.integers(iy.min, iy.max + 1))
    bias = rng.integers(-5000, 5000, N).astype(np.int32) if per_col else None
    y, want = _run(mod, a, za, b, zb, bias, mult, yz, y_dt)
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("y_dt", [np.uint8, np.int8])
def test_qlinear_matmul_ties_and_saturation(mod, y_dt):
    """mult 0.5 on odd sums: each such output a tie, rounded half to even; large sums saturate at both ends; a narrowed
    [qlo, qhi] (a fused Relu / Clip) clamps there."""
    rng = np.random.default_rng(7)
    M, K, N = 37, 3, 45
    a = rng.integers(0, 256, (M, K)).astype(np.uint8)
    b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    acc = a.astype(np.int64) @ b.astype(np.int64)
    assert (acc % 2 == 1).sum() > M * N // 4          # odd sums: ties under mult 0.5
    mult = np.full(1, 0.5, np.float32)
    info = np.iinfo(y_dt)
    for yz in (0, 3, info.min, info.max):
        y, want = _run(mod, a, 0, b, 0, None, mult, yz, y_dt)
        np.testing.assert_array_equal(y, want)
        y, want = _run(mod, a, 0, b, 0, None, mult, yz, y_dt, lo=info.min + 10, hi=info.max - 20)
        np.testing.assert_array_equal(y, want)
    half = np.rint(np.float32([0.5, 1.5, 2.5, -0.5, -1.5]))
    assert half.tolist() == [0.0, 2.0, 2.0, -0.0, -2.0]
    y, want = _run(mod, a, 0, b, 0, None, np.full(1, 8.0, np.float32), 0, y_dt)
    assert (want == info.min).any() and (want == info.max).any()
    np.testing.assert_array_equal(y, want)
