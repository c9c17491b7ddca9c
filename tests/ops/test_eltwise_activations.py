"""HardSigmoid, HardSwish (float32 native, float16 / float64 numpy), Gelu approximate "tanh" (float32 native,
float16 through it, float64 numpy) and the com.onnxep Silu / FastGelu kernels' bad input.
Oracle: onnx.reference (the default-domain ops); numpy in float64 (the com.onnxep ops, built directly)."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep.errors import OnnxepError
from tests._util import make_model
from tests.ops._eltshape import check_node, node, rand

SHAPES = [(), (1,), (7,), (2, 3, 5), (0, 4), (3, 20000)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("attrs", [{}, {"alpha": 0.3, "beta": 0.4}, {"alpha": -1.5, "beta": 0.0}])
def test_hard_sigmoid(shape, dtype, attrs):
    x = rand(shape, 1, dtype) * 4
    check_node(node("HardSigmoid", ["x"], ["y"], **attrs), {"x": x}, 6, rtol=2e-3 if dtype == np.float16 else 1e-6,
               atol=1e-3 if dtype == np.float16 else 2e-7)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_hard_swish(shape, dtype):
    x = rand(shape, 2, dtype) * 5
    check_node(node("HardSwish", ["x"], ["y"]), {"x": x}, 14, rtol=2e-3 if dtype == np.float16 else 1e-6,
               atol=2e-3 if dtype == np.float16 else 1e-6)


def test_hard_activations_special_values():
    x = np.array([np.nan, np.inf, -np.inf, -3.0, 3.0, 0.0], np.float32)
    check_node(node("HardSigmoid", ["x"], ["y"]), {"x": x}, 6)
    got = check_node(node("HardSwish", ["x"], ["y"]), {"x": x}, 14)[0]
    assert np.isnan(got[0]) and got[1] == np.inf and got[3] == 0 and got[4] == 3 and got[5] == 0


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_gelu_tanh(shape, dtype):
    x = rand(shape, 3, dtype) * 3
    tol = {np.float32: (2e-6, 1e-6), np.float16: (2e-3, 2e-3), np.float64: (1e-6, 1e-9)}[dtype]
    check_node(node("Gelu", ["x"], ["y"], approximate="tanh"), {"x": x}, 20, rtol=tol[0], atol=tol[1])


def _internal(op, n_in, attrs=None):
    ins = [helper.make_tensor_value_info(f"x{i}", 1, ["a", "b"]) for i in range(n_in)]
    g = helper.make_graph([helper.make_node(op, [i.name for i in ins], ["y"], domain="com.onnxep", **(attrs or {}))],
                          "t", ins, [helper.make_tensor_value_info("y", 1, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.onnxep", 1)],
                          ir_version=8)
    return onnxep.InferenceSession(m.SerializeToString())


def _sig(v):
    return 1 / (1 + np.exp(-v))


@pytest.mark.parametrize("alpha", [1.0, 1.702])
def test_silu_kernel(alpha):
    """com.onnxep Silu with and without the gate, non-contiguous inputs copied. Oracle: numpy float64."""
    x, g = rand((5, 33), 4) * 5, rand((5, 33), 5)
    s = _internal("Silu", 1, {"alpha": alpha})
    xa = (x * np.float32(alpha)).astype(np.float64)
    np.testing.assert_allclose(s.run(None, {"x0": x})[0], x * _sig(xa), rtol=5e-7, atol=1e-30)
    s2 = _internal("Silu", 2, {"alpha": alpha})
    np.testing.assert_allclose(s2.run(None, {"x0": x, "x1": g})[0], x * _sig(xa) * g, rtol=7e-7, atol=1e-30)
    xt = np.ascontiguousarray(x.T).T                       # a Fortran-order view (transposed data)
    np.testing.assert_allclose(s2.run(None, {"x0": xt, "x1": g})[0], x * _sig(xa) * g, rtol=7e-7, atol=1e-30)


def test_silu_gate_shape_mismatch_is_a_named_error():
    s = _internal("Silu", 2)
    x = rand((2, 4), 6)
    with pytest.raises(OnnxepError, match="gate"):
        s.run(None, {"x0": x, "x1": rand((2, 3), 7)})
    assert s.run(None, {"x0": x, "x1": x})[0].shape == (2, 4)      # still usable


def test_fast_gelu_kernel():
    x = rand((7, 40), 8) * 4
    v = x.astype(np.float64)
    want = 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))
    np.testing.assert_allclose(_internal("FastGelu", 1).run(None, {"x0": x})[0], want, rtol=4e-6, atol=1e-7)
    assert _internal("FastGelu", 1).run(None, {"x0": np.zeros((0, 3), np.float32)})[0].shape == (0, 3)
