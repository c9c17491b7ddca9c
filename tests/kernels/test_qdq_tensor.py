"""qdq_tensor_f32 (qgemm.h qg_qdq_tensor, the com.onnxep QuantizeDequantize kernel): QuantizeLinear then
DequantizeLinear per tensor in one pass, on every ISA variant this machine runs.

Oracles: numpy's float32 operations of QuantizeLinear then DequantizeLinear (rint = round half to even, saturation,
NaN to the type's minimum) -- bit-exact -- and the two native kernels quantize_tensor_f32 / dequantize_tensor_f32 of
the same variant (bit-exact)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
RNG = np.random.default_rng(2929)


def _oracle(x, s, z, signed):
    lo, hi = (-128, 127) if signed else (0, 255)
    s, z = np.float32(s), np.float32(z)
    r = np.rint(x / s) + z
    r = np.fmin(np.fmax(r, np.float32(lo)), np.float32(hi))
    return ((r - z) * s).astype(np.float32)


def _inputs(n, s, z):
    x = RNG.uniform(-300 * s, 300 * s, n).astype(np.float32)
    k = RNG.integers(-140, 140, n)
    ties = ((k + 0.5) * s).astype(np.float32)          # halves (as float32 rounds them): both tie directions
    x[::3] = ties[::3]
    x[1::7] = (k[1::7] * s).astype(np.float32)         # exact steps
    if n > 5:
        x[5] = np.nan
        x[4] = np.inf
        x[3] = -np.inf
    return x


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("n", [1, 7, 8, 15, 16, 17, 33, 100, 1027, 40001])
@pytest.mark.parametrize("signed,s,z", [(False, 0.05, 3), (False, 0.5, 128), (True, 0.02, -2), (True, 1.0, 0),
                                        (True, 0.125, 127)])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_qdq_tensor_exact(isa, n, signed, s, z, nthreads):
    m = VARIANTS[isa]
    x = _inputs(n, np.float32(s), z)
    y = np.empty_like(x)
    m.qdq_tensor_f32(x, float(np.float32(s)), float(z), signed, y, nthreads)   # 40001: three chunks over the pool
    with np.errstate(invalid="ignore", over="ignore"):
        want = _oracle(x, s, z, signed)
    np.testing.assert_array_equal(y.view(np.uint32), want.view(np.uint32))
    q = np.empty(n, np.uint8)
    m.quantize_tensor_f32(x, float(np.float32(s)), float(z), signed, q)
    two = np.empty_like(x)
    m.dequantize_tensor_f32(q, signed, float(np.float32(s)), float(z), two)
    np.testing.assert_array_equal(y.view(np.uint32), two.view(np.uint32))
    m.qdq_tensor_f32(x, float(np.float32(s)), float(z), signed, x, nthreads)          # in place
    np.testing.assert_array_equal(x.view(np.uint32), two.view(np.uint32))


def test_qdq_tensor_sizes_checked():
    with pytest.raises(ValueError):
        _kernels.qdq_tensor_f32(np.zeros(4, np.float32), 1.0, 0.0, False, np.zeros(3, np.float32))
