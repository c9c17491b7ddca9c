"""The vectorised float32 exp / sigmoid / tanh and the activations built on them (_k_eltwise.pxi: exp_f32,
sigmoid_f32, tanh_f32, silu_f32, silu_gate_f32, gelu_tanh_f32, hard_sigmoid_f32, hard_swish_f32), every ISA variant
the machine runs.

Oracle: numpy in float64 (exp, tanh, 1 / (1 + exp(-x)), ...) rounded to float32, with the ulp bounds documented in
_k_eltwise.pxi; the piecewise-linear ones against numpy's float32 formula (the same roundings, FMA allowed: 1 ulp).
Sizes cover the vector tails (1, 7, 17, 33 ...) and several parallel chunks (ELTWISE_CHUNK = 16384)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels

MODS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
SIZES = [1, 7, 17, 33, 1000, 40001]
SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 88.72283, 88.7229, 88.8, 89.0, 1e30, -1e30, -87.4, -103.9,
                    -104.5, 1e-40, -1e-40, 0.625, -0.625, 9.0, -9.0, 1e-7, 3.4e38, -3.4e38], np.float32)


def _x(n, scale, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(n) * scale).astype(np.float32)
    return np.concatenate([SPECIAL, x])[:max(n, 1)] if n >= len(SPECIAL) else x


def _sig(v):
    with np.errstate(over="ignore"):
        return np.where(v >= 0, 1 / (1 + np.exp(-np.abs(v))), np.exp(-np.abs(v)) / (1 + np.exp(-np.abs(v))))


def _gelu_tanh(v):
    with np.errstate(over="ignore", invalid="ignore"):
        u = np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)
        return v / (1 + np.exp(-2 * u))


ORACLES = {"exp": np.exp, "sigmoid": _sig, "tanh": np.tanh, "silu": lambda v: v * _sig(v),
           "gelu_tanh": _gelu_tanh}
#: max error in ulps of the float32-rounded float64 result (_k_eltwise.pxi's comment: measured 1.3 / 2.3 / 1.6 / 3.1)
ULPS = {"exp": 2.0, "sigmoid": 3.0, "tanh": 2.5, "silu": 3.5}


def _ulps(got, want64):
    """Error in ulps of the float32-rounded oracle; results below 1e-36 (subnormal, or products of a subnormal
    sigmoid: x * sigmoid(x) for x < -87) are checked to 1e-40 absolute instead (0 ulps when within)."""
    want = want64.astype(np.float32)
    both_nan = np.isnan(got) & np.isnan(want)
    with np.errstate(all="ignore"):
        tiny = (np.abs(want64) < 1e-36) & (np.abs(got.astype(np.float64) - want64) <= 1e-40)
        same = (got == want) | both_nan | tiny
        err = np.abs(got.astype(np.float64) - want64) / np.spacing(np.abs(want)).astype(np.float64)
    return np.where(same, 0.0, err)


@pytest.mark.parametrize("isa", sorted(MODS))
@pytest.mark.parametrize("name", sorted(ULPS))
@pytest.mark.parametrize("n", SIZES)
def test_transcendental_ulps(isa, name, n):
    x = _x(n, 30.0 if name == "exp" else 8.0, seed=n)
    y = np.full_like(x, 7.0)
    fn = getattr(MODS[isa], f"{name}_f32")
    fn(x, y, nthreads=2) if name != "silu" else fn(x, y, 1.0, 2)
    with np.errstate(all="ignore"):
        want = ORACLES[name](x.astype(np.float64))
    u = _ulps(y, want)
    assert np.isnan(y).sum() == np.isnan(want.astype(np.float32)).sum()
    assert u.max() <= ULPS[name], (x[np.argmax(u)], y[np.argmax(u)], want[np.argmax(u)])


@pytest.mark.parametrize("isa", sorted(MODS))
def test_special_values(isa):
    """+-inf, NaN, overflow and the subnormal range as float32 expf-based formulas give them."""
    m = MODS[isa]
    x = np.array([np.inf, -np.inf, np.nan, 88.7229, 88.8, 1e30, -104.5, -1e30, 0.0, -0.0], np.float32)
    out = {k: np.empty_like(x) for k in ("exp", "sigmoid", "tanh", "silu")}
    m.exp_f32(x, out["exp"]), m.sigmoid_f32(x, out["sigmoid"]), m.tanh_f32(x, out["tanh"])
    m.silu_f32(x, out["silu"], 1.0)
    np.testing.assert_array_equal(out["exp"], [np.inf, 0, np.nan, np.inf, np.inf, np.inf, 0, 0, 1, 1])
    np.testing.assert_array_equal(out["sigmoid"], [1, 0, np.nan, 1, 1, 1, 0, 0, 0.5, 0.5])
    np.testing.assert_array_equal(out["tanh"], [1, -1, np.nan, 1, 1, 1, -1, -1, 0, 0])
    np.testing.assert_array_equal(out["silu"][[0, 2, 3, 6, 8]], np.array([np.inf, np.nan, 88.7229, 0, 0], np.float32))
    assert np.isnan(out["silu"][1])                       # -inf * sigmoid(-inf) = -inf * 0
    assert np.signbit(out["tanh"][9]) and not np.signbit(out["tanh"][8])
    sub = np.array([-87.4, -95.0, -103.0], np.float32)    # subnormal results, as expf gives them
    e = np.empty_like(sub)
    m.exp_f32(sub, e)
    np.testing.assert_allclose(e, np.exp(sub.astype(np.float64)).astype(np.float32), rtol=1e-6, atol=2e-45)
    m.sigmoid_f32(sub, e)
    np.testing.assert_allclose(e, np.exp(sub.astype(np.float64)).astype(np.float32), rtol=1e-6, atol=2e-45)


@pytest.mark.parametrize("isa", sorted(MODS))
@pytest.mark.parametrize("n", SIZES)
def test_gelu_tanh(isa, n):
    """Absolute error against float64: the float32 rounding of u (|u| up to ~20 where y is still visible) bounds the
    relative error by ~|2u| ulp, as any float32 evaluation of the formula."""
    x = _x(n, 4.0, seed=n + 1)
    x = np.where(np.abs(x) > 1e4, 3.0, x).astype(np.float32)      # keep x^3 finite for the float64 oracle
    y = np.empty_like(x)
    MODS[isa].gelu_tanh_f32(x, y, 2)
    want = _gelu_tanh(x.astype(np.float64))
    ok = np.isfinite(x)
    np.testing.assert_allclose(y[ok], want[ok], rtol=4e-6, atol=1e-7)
    assert np.isnan(y[np.isnan(x)]).all()


@pytest.mark.parametrize("isa", sorted(MODS))
@pytest.mark.parametrize("alpha", [1.0, 1.702, -0.5])
@pytest.mark.parametrize("n", [1, 33, 40001])
def test_silu_alpha_and_gate(isa, alpha, n):
    m = MODS[isa]
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * 6).astype(np.float32)
    g = rng.standard_normal(n).astype(np.float32)
    xa = (x * np.float32(alpha)).astype(np.float64)       # alpha * x rounded to float32 first, as the kernel does
    want = x.astype(np.float64) * _sig(xa)
    y = np.empty_like(x)
    m.silu_f32(x, y, alpha, 2)
    assert _ulps(y, want).max() <= 3.5
    m.silu_gate_f32(x, g, y, alpha, 2)
    np.testing.assert_allclose(y, want * g, rtol=6e-7, atol=1e-37)
    xc = x.copy()                                          # in place over x
    m.silu_gate_f32(xc, g, xc, alpha, 2)
    np.testing.assert_array_equal(xc, y)


def test_silu_gate_size_mismatch():
    with pytest.raises(ValueError, match="silu_gate_f32"):
        _kernels.silu_gate_f32(np.zeros(4, np.float32), np.zeros(3, np.float32), np.zeros(4, np.float32))


@pytest.mark.parametrize("isa", sorted(MODS))
@pytest.mark.parametrize("n", SIZES)
def test_hard_sigmoid_and_swish(isa, n):
    """Oracle: numpy's float32 formula (the kernels may fuse alpha * x + beta: 1 ulp before the clip)."""
    m = MODS[isa]
    x = _x(n, 5.0, seed=n + 2)
    y = np.empty_like(x)
    with np.errstate(all="ignore"):
        for alpha, beta in [(0.2, 0.5), (1 / 6, 0.5), (-0.7, 0.1)]:
            m.hard_sigmoid_f32(x, y, alpha, beta, 2)
            v = np.clip(x * np.float32(alpha) + np.float32(beta), 0, 1)
            np.testing.assert_allclose(y, v, rtol=2e-7, atol=1e-7)
            assert np.isnan(y[np.isnan(x)]).all()
        m.hard_swish_f32(x, y, 2)
        want = x * np.clip(x * np.float32(1 / 6) + np.float32(0.5), 0, 1)
    fin = np.isfinite(want)
    np.testing.assert_allclose(y[fin], want[fin], rtol=2e-7, atol=1e-6)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))


@pytest.mark.parametrize("isa", sorted(MODS))
def test_in_place(isa):
    m = MODS[isa]
    x = _x(40001, 5.0, seed=9)
    for name in ("exp", "sigmoid", "tanh", "gelu_tanh", "hard_swish"):
        y = np.empty_like(x)
        getattr(m, f"{name}_f32")(x, y)
        z = x.copy()
        getattr(m, f"{name}_f32")(z, z)
        np.testing.assert_array_equal(z, y, err_msg=name)


@pytest.mark.skipif(not {"avx2", "avx512"} <= set(MODS), reason="needs the avx2 and avx512 variants on this machine")
@pytest.mark.parametrize("name", ["exp", "sigmoid", "silu", "silu_gate", "gelu_tanh"])
def test_avx512_forms_give_the_scalar_bits(name):
    """The AVX-512 variant's Exp / Sigmoid / SiLU / tanh-form Gelu loops (eltwise.h onnxep_exp16 etc.: 2^n by one
    scalef) give the
    bits of the scalar forms, which the AVX2 variant vectorises with the same FMAs: every float32 class -- 1M random
    bit patterns (NaN, infinities, subnormals) and normal values over the range edges -- NaN lanes only need be NaN."""
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([SPECIAL, bits, rng.uniform(-120, 100, 1 << 20).astype(np.float32),
                        rng.uniform(-12, 12, 1 << 20).astype(np.float32)])
    g = rng.standard_normal(x.size).astype(np.float32)
    out = {}
    for isa in ("avx2", "avx512"):
        y = np.empty_like(x)
        if name == "silu_gate":
            MODS[isa].silu_gate_f32(x, g, y, 1.702, 1)
        elif name == "silu":
            MODS[isa].silu_f32(x, y, 1.0, 1)
        else:
            getattr(MODS[isa], f"{name}_f32")(x, y, 1)
        out[isa] = y
    a, b = out["avx2"], out["avx512"]
    same = (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))
    assert same.all(), (name, x[~same][:5], a[~same][:5], b[~same][:5])
