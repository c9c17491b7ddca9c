"""QLinearAdd's kernel (_k_qgemm.pxi qlinear_add, qgemm.h qg_qadd_range). Oracle: the unfolded nodes in numpy
float32 -- DequantizeLinear of a and of b ((q - zp) * scale), their sum, QuantizeLinear (rint(x / scale) + zp,
clipped) -- exact equality on every ISA variant this machine runs. Covers every int8 / uint8 combination, a broadcast
b (trailing block, one element), odd lengths (vector tails), rounding ties and saturation at both ends."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
F32 = np.float32


def _oracle(a, sa, za, b, sb, zb, ys, yz, ydt):
    da = (a.astype(F32) - F32(za)) * F32(sa)
    db = (b.astype(F32) - F32(zb)) * F32(sb)
    r = np.rint(np.divide(da + db, F32(ys), dtype=F32)) + F32(yz)
    info = np.iinfo(ydt)
    return np.clip(r, info.min, info.max).astype(ydt)


def _rand(rng, dt, n):
    i = np.iinfo(dt)
    return rng.integers(i.min, i.max + 1, n).astype(dt)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("adt", [np.int8, np.uint8])
@pytest.mark.parametrize("bdt", [np.int8, np.uint8])
@pytest.mark.parametrize("ydt", [np.int8, np.uint8])
@pytest.mark.parametrize("n,nb", [(1, 1), (7, 7), (37, 37), (100, 1), (3 * 45, 45), (40000, 40000), (33 * 64, 64)])
def test_qlinear_add_exact(isa, adt, bdt, ydt, n, nb):
    mod = VARIANTS[isa]
    rng = np.random.default_rng(n * 7 + nb)
    a, b = _rand(rng, adt, n), _rand(rng, bdt, nb)
    za, zb, yz = int(_rand(rng, adt, 1)[0]), int(_rand(rng, bdt, 1)[0]), int(_rand(rng, ydt, 1)[0])
    sa, sb, ys = F32(0.031), F32(0.017), F32(0.043)
    y = np.empty(n, ydt)
    mod.qlinear_add(a.view(np.uint8), adt == np.int8, float(sa), za, b.view(np.uint8), bdt == np.int8, float(sb), zb,
                    y.view(np.uint8), float(ys), yz, ydt == np.int8, 2)
    np.testing.assert_array_equal(y, _oracle(a, sa, za, np.tile(b, n // nb), sb, zb, ys, yz, ydt))


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("ydt", [np.int8, np.uint8])
def test_qlinear_add_ties_and_saturation(isa, ydt):
    """Scales 0.5 / 0.5 / 1: every odd sum of centred values is a .5 tie (rounded half to even); scale 8 saturates
    both ends."""
    mod = VARIANTS[isa]
    rng = np.random.default_rng(3)
    n = 1001
    a, b = _rand(rng, np.uint8, n), _rand(rng, np.uint8, n)
    info = np.iinfo(ydt)
    for (sa, sb, ys) in ((0.5, 0.5, 1.0), (8.0, 8.0, 1.0)):
        y = np.empty(n, ydt)
        mod.qlinear_add(a, False, sa, 128, b, False, sb, 100, y.view(np.uint8), ys, 0, ydt == np.int8, 1)
        want = _oracle(a, sa, 128, b, sb, 100, ys, 0, ydt)
        np.testing.assert_array_equal(y, want)
        if sa == 8.0:
            assert (want == info.min).any() and (want == info.max).any()
        else:
            s = (a.astype(np.int64) - 128) + (b.astype(np.int64) - 100)
            assert (s % 2 == 1).sum() > n // 4
