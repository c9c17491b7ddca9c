"""The numpy-vectorised math ops without a native kernel: unary_table (Sign, Floor, Ceil, Round, Reciprocal, Log,
trig / hyperbolic), activations (Selu, Elu, Celu, HardSigmoid, HardSwish, Mish, Softplus, Softsign, Shrink,
ThresholdedRelu), Pow (mixed base / exponent types), Mod (fmod 0/1), Mean, PRelu, Gelu, Einsum.

Oracles: onnx.reference for every case, onnxruntime where it implements the op for the dtype (see
test_math_dtypes.check), numpy where onnx.reference is itself imprecise (named there). Sessions run with the cpu
fallback disabled."""
import numpy as np
import pytest

import onnxep
from tests._util import cpu_only_options
from tests.ops.test_math_dtypes import FLOATS, NUMERIC, SIGNED, UNSIGNED, check, one_node, sample

UNARY = [("Floor", 13), ("Ceil", 13), ("Reciprocal", 13), ("Log", 13), ("Sin", 7), ("Cos", 7), ("Tan", 7),
         ("Asin", 7), ("Acos", 7), ("Atan", 7), ("Sinh", 9), ("Cosh", 9), ("Asinh", 9), ("Acosh", 9), ("Atanh", 9)]
DOMAIN = {"Log": (0.1, 5), "Asin": (-0.99, 0.99), "Acos": (-0.99, 0.99), "Atanh": (-0.99, 0.99), "Acosh": (1, 5),
          "Reciprocal": (0.2, 5)}


@pytest.mark.parametrize("op,opset", UNARY)
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float(op, opset, dtype):
    lo, hi = DOMAIN.get(op, (-3, 3))
    x = np.random.default_rng(1).uniform(lo, hi, (4, 6)).astype(dtype)
    check(op, {"x": x}, opset)


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float_special_values(dtype):
    """Outside the domain: NaN, as onnxruntime and onnx.reference (no warning escapes either)."""
    x = np.array([-1.0, 0.0, 2.0, np.nan, np.inf, -np.inf], dtype)
    for op in ("Log", "Asin", "Acosh", "Atanh", "Reciprocal", "Floor", "Sign"):
        # onnxruntime's float16 Sign gives 0 for NaN (its float32/64 give NaN, as numpy and onnx.reference)
        check(op, {"x": x}, 13 if op in ("Log", "Reciprocal", "Floor", "Sign") else 9,
              ort=not (op == "Sign" and dtype == np.float16))


@pytest.mark.parametrize("dtype", FLOATS)
def test_round_halves_to_even(dtype):
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, -2.6, 0.0], dtype)
    y, = check("Round", {"x": x}, 11)
    np.testing.assert_array_equal(y, np.array([0, 2, 2, -0, -2, 2, -3, 0], dtype))


@pytest.mark.parametrize("dtype", NUMERIC)
def test_sign(dtype):
    check("Sign", {"x": sample(dtype, (3, 5), 2, high=3)}, 13)


ACTS = [("Selu", 6, {}), ("Selu", 6, {"alpha": 2.0, "gamma": 0.5}), ("Elu", 6, {}), ("Elu", 6, {"alpha": 0.3}),
        ("Celu", 12, {}), ("Celu", 12, {"alpha": 2.0}), ("HardSigmoid", 6, {}),
        ("HardSigmoid", 6, {"alpha": 0.3, "beta": 0.2}), ("HardSwish", 14, {}), ("Mish", 18, {}),
        ("Softplus", 1, {}), ("Softsign", 1, {}), ("Shrink", 9, {}), ("Shrink", 9, {"lambd": 1.5, "bias": 0.5}),
        ("ThresholdedRelu", 10, {}), ("ThresholdedRelu", 10, {"alpha": 0.5})]


# Celu is float32-only up to opset 27
@pytest.mark.parametrize("op,opset,attrs,dtype", [(op, v, a, dt) for op, v, a in ACTS for dt in FLOATS
                                                  if op != "Celu" or dt == np.float32])
def test_activation(op, opset, attrs, dtype):
    x = sample(dtype, (3, 7), 3)
    # float64: onnx.reference's HardSwish and onnxruntime's Shrink / HardSwish round through float32 (the
    # attributes, or the whole computation); onnxep stays in float64
    r = {np.float16: 1e-2, np.float64: 1e-6}.get(dtype)
    check(op, {"x": x}, opset, rtol=r, atol=r, **attrs)


def test_softplus_mish_large_inputs():
    """No overflow for large x: softplus(x) = x. Oracle: numpy float64 identities (onnx.reference overflows)."""
    x = np.array([-1000.0, -30.0, 0.0, 30.0, 1000.0])
    m = one_node("Softplus", {"x": x}, 1)
    y, = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options()).run(None, {"x": x})
    np.testing.assert_allclose(y, np.logaddexp(0, x), rtol=1e-15)
    assert y[-1] == 1000.0


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED)
def test_shrink_integers(dtype):
    check("Shrink", {"x": sample(dtype, (4, 5), 4, high=20)}, 9, lambd=3.0, bias=2.0)


POW_TYPES = [(a, b) for a in (np.float32, np.float64, np.float16, np.int32, np.int64)
             for b in (np.float32, np.float64, np.int64, np.int32, np.uint8, np.int8)]


@pytest.mark.parametrize("ta,tb", POW_TYPES)
def test_pow_mixed_types(ta, tb):
    """Base and exponent of different types (opset 15): Z has the base's type. Integer bases with a float
    exponent: onnxruntime truncates std::pow's double; so does onnxep."""
    a = sample(ta, (3, 4), 1, low=-4, high=4)
    if np.dtype(ta).kind == "f":
        a = np.abs(a) + np.asarray(0.5, ta)       # a real power of a negative base is NaN
    b = sample(tb, (4,), 2, low=0, high=3)
    if np.dtype(tb).kind == "f":
        b = np.round(b * 2) / 2                   # a few halves
        if np.dtype(ta).kind != "f":
            b = np.abs(b)
    check("Pow", {"a": a, "b": b}, 15, rtol=4e-3 if np.float16 in (ta, tb) else 1e-6)


def test_pow_int_negative_exponent():
    """2 ** -1 = 0 in integers (onnxruntime's std::pow truncated); numpy alone would raise."""
    a = np.array([2, 1, -1, 3, 0], np.int64)
    b = np.array([-1, -2, -3, 2, 3], np.int64)
    y, = check("Pow", {"a": a, "b": b}, 15, ref=False)
    np.testing.assert_array_equal(y, [0, 1, -1, 9, 0])


@pytest.mark.parametrize("opset", [7, 12, 13])
def test_pow_float_broadcast(opset):
    check("Pow", {"a": np.abs(sample(np.float32, (2, 3, 4), 5)), "b": sample(np.float32, (3, 1), 6)}, opset,
          rtol=1e-5)


@pytest.mark.parametrize("fmod", [0, 1])
@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED)
def test_mod_int(fmod, dtype):
    a = sample(dtype, (3, 5), 1, high=30)
    b = sample(dtype, (5,), 2, low=1, high=7)
    if np.dtype(dtype).kind == "i":
        b = b * np.where(sample(np.int8, (5,), 3) < 0, -1, 1).astype(dtype)
    check("Mod", {"a": a, "b": b}, 13, fmod=fmod)


@pytest.mark.parametrize("dtype", FLOATS)
def test_mod_float_fmod(dtype):
    check("Mod", {"a": sample(dtype, (3, 5), 1), "b": sample(dtype, (5,), 2) + np.asarray(0.1, dtype)}, 13,
          fmod=1)


def test_mod_int_zero_divisor_raises():
    """Oracle: none -- a zero integer divisor is InvalidArgument naming the node."""
    m = one_node("Mod", {"a": np.ones(3, np.int32), "b": np.ones(3, np.int32)}, 13)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.InvalidArgument, match="mod_0.*division by zero"):
        sess.run(None, {"a": np.ones(3, np.int32), "b": np.array([1, 0, 1], np.int32)})


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("opset", [8, 13])
def test_mean(dtype, opset):
    feeds = {"a": sample(dtype, (2, 3, 4), 1), "b": sample(dtype, (4,), 2), "c": sample(dtype, (3, 1), 3)}
    check("Mean", feeds, opset, rtol=4e-3 if dtype == np.float16 else None)
    check("Mean", {"a": feeds["a"]}, opset)


@pytest.mark.parametrize("dtype", FLOATS + (np.int32, np.int64))
@pytest.mark.parametrize("slope_shape", [(), (1,), (5,), (3, 1), (2, 3, 5)])
def test_prelu(dtype, slope_shape):
    check("PRelu", {"x": sample(dtype, (2, 3, 5), 1), "s": sample(dtype, slope_shape, 2)}, 16)


def test_prelu_slope_too_big_raises():
    m = one_node("PRelu", {"x": np.ones((3,), np.float64), "s": np.ones((2, 3), np.float64)}, 16)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.OnnxepError, match="prelu_0"):
        sess.run(None, {"x": np.ones((3,), np.float64), "s": np.ones((2, 3), np.float64)})


@pytest.mark.parametrize("approximate,dtype", [("none", np.float32), ("none", np.float16), ("none", np.float64),
                                               ("tanh", np.float16),
                                               ("tanh", np.float32), ("tanh", np.float64)])
def test_gelu(approximate, dtype):
    r = 4e-3 if dtype == np.float16 else 1e-6    # float64: the oracles' constants are float32
    check("Gelu", {"x": sample(dtype, (3, 17), 4)}, 20, rtol=r, atol=r, approximate=approximate)


EINSUM = [("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("ii->i", [(4, 4)]),
          ("ii", [(3, 3)]), ("ij->ji", [(2, 5)]), ("i,i", [(4,), (4,)]), ("i,j->ij", [(3,), (2,)]),
          ("...ij,...jk->...ik", [(2, 1, 3, 4), (1, 5, 4, 2)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
          ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]), ("ij", [(2, 3)]), ("ba", [(2, 3)]), ("->", [()]),
          ("ij->", [(0, 3)]), ("bqhd,bkhd->bhqk", [(2, 3, 4, 5), (2, 6, 4, 5)]), ("ij,kj->ki", [(2, 3), (4, 3)]),
          ("abc,cd->da", [(2, 3, 4), (4, 5)]), ("ij,jk->", [(2, 3), (3, 4)]), ("ijk,k->ij", [(2, 3, 4), (4,)]),
          ("i,i->i", [(4,), (4,)]), ("abcd,bd->ca", [(2, 3, 4, 5), (3, 5)]), ("ij,j->", [(2, 3), (1,)])]


@pytest.mark.parametrize("eq,shapes", EINSUM)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_einsum(eq, shapes, dtype):
    """Two-operand products run as one batched matmul (einsum.matmul_plan), the rest as np.einsum: both here."""
    feeds = {f"x{i}": sample(dtype, s, i) for i, s in enumerate(shapes)}
    check("Einsum", feeds, 12, rtol=1e-5 if dtype == np.float32 else None, equation=eq)


def test_einsum_float16():
    check("Einsum", {"a": sample(np.float16, (2, 3), 1), "b": sample(np.float16, (3, 4), 2)}, 12, rtol=1e-2,
          atol=1e-2, equation="ij,jk->ik")


def test_einsum_size_bomb_and_bad_equation():
    """Oracle: none -- an outer product asking for a terabyte is refused before allocating (onnxep's named error),
    a term that does not fit its input is InvalidArgument; the session still runs afterwards."""
    m = one_node("Einsum", {"a": np.ones(3, np.float32), "b": np.ones(3, np.float32)}, 12, equation="i,j,k->ijk")
    m = one_node("Einsum", {"a": np.ones(3, np.float32), "b": np.ones(3, np.float32), "c": np.ones(3, np.float32)},
                 12, equation="i,j,k->ijk")
    for i in range(3):
        m.graph.input[i].type.tensor_type.shape.dim[0].dim_param = "N"
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    big = np.zeros(100_000, np.float32)
    with pytest.raises(onnxep.errors.OnnxepError, match="einsum_0.*limit"):
        sess.run(None, {"a": big, "b": big, "c": big})
    y, = sess.run(None, {"a": np.ones(2, np.float32), "b": np.ones(2, np.float32), "c": np.ones(2, np.float32)})
    assert y.shape == (2, 2, 2) and (y == 1).all()
    m = one_node("Einsum", {"a": np.ones((2, 3), np.float32)}, 12, equation="ijk->i")
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    with pytest.raises(onnxep.errors.OnnxepError, match="Einsum"):
        onnxep.InferenceSession(m.SerializeToString(), cpu_only_options()).run(None, {"a": np.ones((2, 3),
                                                                                                   np.float32)})


@pytest.mark.parametrize("dtype", FLOATS)
def test_swish_swiglu(dtype):
    r = 4e-3 if dtype == np.float16 else None
    check("Swish", {"x": sample(dtype, (3, 7), 1)}, 24, rtol=r, atol=r, alpha=0.7)
    check("SwiGLU", {"a": sample(dtype, (3, 7), 1), "b": sample(dtype, (3, 7), 2)}, 28, rtol=r, atol=r, ort=False)


def test_erf_float64_against_math_erf():
    """Oracle: math.erf element by element (correctly rounded to ~1 ulp); onnx.reference computes float64 Erf in
    float32, so it is only a loose second oracle. Tails, signed zeros, infinities and NaN included."""
    import math
    x = np.concatenate([np.linspace(-7, 7, 4001), [0.0, -0.0, 1e-300, -1e-20, 2.9999999, 3.0, 3.0000001, 5.9,
                                                   27.0, np.inf, -np.inf, np.nan]])
    m = one_node("Erf", {"x": x}, 13)
    y, = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options()).run(None, {"x": x})
    want = np.array([math.erf(v) for v in x])
    assert y.dtype == np.float64 and np.isnan(y[-1]) and np.signbit(y[-11])
    np.testing.assert_allclose(y, want, rtol=8 * np.finfo(np.float64).eps, atol=0, equal_nan=True)
    check("Erf", {"x": sample(np.float64, (4, 5), 3)}, 13, rtol=1e-6, atol=1e-7)
