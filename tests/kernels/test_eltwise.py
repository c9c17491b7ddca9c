"""Elementwise kernels: every ISA variant against the generic one, and the generic one against numpy (oracle)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels
from onnxep.ops.math._broadcast import collapse

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
GENERIC = importlib.import_module("onnxep._kernels_generic")

BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
          "min": np.minimum}
# (a shape, b shape): same shape, scalars, per-channel, trailing, both broadcast, 0-size, sizes over two chunks
SHAPES = [((7,), (7,)), ((3, 5), ()), ((), (3, 5)), ((), ()), ((1, 8, 5, 5), (8, 1, 1)), ((4, 9), (9,)),
          ((5, 1, 3), (1, 4, 1)), ((2, 0, 3), (3,)), ((1,), (1,)), ((2, 3, 1, 5), (1, 3, 4, 1)),
          ((3, 40000), (40000,)), ((2, 64, 300), (64, 1)), ((70001,), ()), ((6, 1, 2, 1, 3, 1, 5), (1, 4, 1, 2, 1, 7, 1)),
          # channel-last data times a per-image channel vector (short rows: the 2-D row loop, b tiled when it repeats),
          # odd channel counts, rows split across chunks, the vector on either side, rows over the tile
          ((3, 16, 16, 16), (3, 1, 1, 16)), ((3, 5, 7, 3), (3, 1, 1, 3)), ((2, 3000, 24), (2, 1, 24)),
          ((3, 1, 1, 16), (3, 16, 16, 16)), ((2, 9, 9, 70), (2, 1, 1, 70)), ((2, 7, 130), (2, 1, 130)),
          ((4, 33, 5), (1, 33, 5)), ((5, 2, 64), (5, 1, 64))]


def _data(shape, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(np.float32)
    return np.where(np.abs(a) < 0.05, 0.5, a).astype(np.float32)   # keep divisors away from 0


def _run_binary(mod, name, a, b):
    out = np.broadcast_shapes(a.shape, b.shape)
    z = np.empty(out, np.float32)
    dims, (sa, sb) = collapse(out, a.shape, b.shape)
    getattr(mod, f"{name}_f32")(a.reshape(-1), b.reshape(-1), z.reshape(-1), dims, sa, sb, 2)
    return z


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_vs_numpy_and_variants(name, sa, sb):
    """Oracle: numpy ufunc (bit-exact: one IEEE op per element); every ISA variant equals the generic one."""
    a, b = _data(sa, 1), _data(sb, 2)
    want = BINARY[name](a, b)
    got = _run_binary(GENERIC, name, a, b)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)
    for isa, mod in VARIANTS.items():
        np.testing.assert_array_equal(_run_binary(mod, name, a, b), got, err_msg=isa)


@pytest.mark.parametrize("name", ["max", "min", "add", "div"])
def test_binary_special_values(name):
    """Oracle: numpy (NaN propagates through max/min like numpy.maximum/minimum; x/0 is inf)."""
    a = np.array([np.nan, 1, -np.inf, 0, 2, np.nan, -0.0, 3], np.float32)
    b = np.array([1, np.nan, 5, 0, -np.inf, np.nan, 0.0, 0], np.float32)
    for mod in [GENERIC] + list(VARIANTS.values()):
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(_run_binary(mod, name, a, b), BINARY[name](a, b))


def test_binary_in_place():
    """Oracle: numpy. z aliasing a (Sum accumulates this way)."""
    a, b = _data((3, 50000), 3), _data((50000,), 4)
    want = a + b
    dims, (sa, sb) = collapse(a.shape, a.shape, b.shape)
    GENERIC.add_f32(a.reshape(-1), b.reshape(-1), a.reshape(-1), dims, sa, sb, 2)
    np.testing.assert_array_equal(a, want)
    for mod in [GENERIC] + list(VARIANTS.values()):      # channel-last rows times a channel vector, in place
        a, b = _data((2, 300, 12), 5), _data((2, 1, 12), 6)
        want = a * b
        dims, (sa, sb) = collapse(a.shape, a.shape, b.shape)
        mod.mul_f32(a.reshape(-1), b.reshape(-1), a.reshape(-1), dims, sa, sb, 2)
        np.testing.assert_array_equal(a, want)


def test_binary_errors():
    a = np.zeros(6, np.float32)
    z = np.zeros(6, np.float32)
    with pytest.raises(ValueError, match="output has 6 elements"):
        GENERIC.add_f32(a, a, z, (7,), (1,), (1,))
    with pytest.raises(ValueError, match="too small"):
        GENERIC.add_f32(a, a[:3], z, (6,), (1,), (1,))
    with pytest.raises(ValueError, match="innermost"):
        GENERIC.add_f32(a, a, z, (3, 2), (2, 2), (2, 1))
    with pytest.raises(ValueError, match="collapsed dims"):
        GENERIC.add_f32(a, a, z, (), (), ())
    with pytest.raises(ValueError, match="collapsed dims"):
        GENERIC.add_f32(a, a, z, (1,) * 17, (0,) * 17, (0,) * 17)


def test_collapse():
    """Oracle: hand-derived collapsed dims and strides."""
    assert collapse((1, 8, 5, 5), (1, 8, 5, 5), (8, 1, 1)) == ((8, 25), [(25, 1), (1, 0)])
    assert collapse((4, 9), (4, 9), (9,)) == ((4, 9), [(9, 1), (0, 1)])
    assert collapse((3, 5), (3, 5), ()) == ((15,), [(1,), (0,)])
    assert collapse((), (), ()) == ((1,), [(0,), (0,)])
    assert collapse((2, 3, 4), (2, 3, 4), (2, 3, 4)) == ((24,), [(1,), (1,)])


UNARY = {
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x.astype(np.float64))), (), 2e-6),
    "tanh": (lambda x: np.tanh(x.astype(np.float64)), (), 2e-6),
    "exp": (lambda x: np.exp(x.astype(np.float64)), (), 2e-6),
    "sqrt": (lambda x: np.sqrt(np.abs(x).astype(np.float64)), (), 1e-7),
    "neg": (np.negative, (), 0),
    "abs": (np.abs, (), 0),
    "leaky_relu": (lambda x: np.where(x >= 0, x, x * np.float32(0.3)), (0.3,), 0),
    "clip": (lambda x: np.clip(x, np.float32(-0.5), np.float32(0.7)), (-0.5, 0.7), 0),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("n", [0, 1, 7, 16384, 3 * 16384 + 5])
def test_unary_vs_numpy_and_variants(name, n):
    """Oracle: numpy in float64 for transcendental ops (rtol from float32 rounding), exact for the others; every ISA
    variant equals the generic one up to a few ulp (FMA or not in the polynomials)."""
    ref, params, rtol = UNARY[name]
    x = _data((n,), 5) * 4
    if name == "sqrt":
        x = np.abs(x)
    y = np.empty_like(x)
    getattr(GENERIC, f"{name}_f32")(x, y, *params, 2)
    want = ref(x)
    if rtol:
        np.testing.assert_allclose(y, want, rtol=rtol, atol=1e-7)
    else:
        np.testing.assert_array_equal(y, want)
    for isa, mod in VARIANTS.items():
        y2 = np.empty_like(x)
        getattr(mod, f"{name}_f32")(x, y2, *params, 2)
        # the vectorised exp / sigmoid / tanh use FMA in avx2 / avx512, not in generic: a few ulp apart
        np.testing.assert_allclose(y2, y, rtol=5e-7 if rtol else 2e-7, atol=0, err_msg=isa)


def test_unary_special_values():
    """Oracle: numpy. NaN through clip stays NaN; sigmoid saturates without overflow; sqrt(-1) is NaN."""
    x = np.array([np.nan, -np.inf, np.inf, -100, 100, -1], np.float32)
    y = np.empty_like(x)
    GENERIC.clip_f32(x, y, -1, 1)
    np.testing.assert_array_equal(y, np.clip(x, -1, 1))
    GENERIC.sigmoid_f32(x, y)
    np.testing.assert_allclose(y[1:5], np.array([0, 1, 0, 1], np.float32), rtol=0, atol=1e-30)
    assert np.isnan(y[0])
    GENERIC.sqrt_f32(x, y)
    assert np.isnan(y[5]) and np.isnan(y[0])


def test_unary_size_mismatch():
    with pytest.raises(ValueError, match="sigmoid_f32: x has 3 elements, y has 2"):
        GENERIC.sigmoid_f32(np.zeros(3, np.float32), np.zeros(2, np.float32))
