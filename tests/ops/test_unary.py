"""LeakyRelu, Sigmoid, Tanh, Clip, Exp, Sqrt, Neg, Abs (float32). Oracle: onnx.reference."""
import numpy as np
import pytest

from tests.ops._eltshape import check_node, node, rand

SHAPES = [(), (1,), (7,), (2, 3, 5), (0, 4), (3, 20000)]


@pytest.mark.parametrize("op", ["Sigmoid", "Tanh", "Exp", "Sqrt", "Neg", "Abs", "LeakyRelu"])
@pytest.mark.parametrize("opset", [6, 13, 16])
@pytest.mark.parametrize("shape", SHAPES)
def test_unary(op, opset, shape):
    x = rand(shape, 1) * 3
    if op == "Sqrt":
        x = np.abs(x)
    check_node(node(op, ["x"], ["y"]), {"x": x}, opset, rtol=2e-6)


@pytest.mark.parametrize("alpha", [0.0, 0.3, -2.0])
def test_leaky_relu_alpha(alpha):
    check_node(node("LeakyRelu", ["x"], ["y"], alpha=alpha), {"x": rand((4, 9), 2)}, 16)


@pytest.mark.parametrize("attrs", [{}, {"min": -0.5}, {"max": 0.25}, {"min": -0.5, "max": 0.5}, {"min": 1.0, "max": 0.0}])
def test_clip_6(attrs):
    check_node(node("Clip", ["x"], ["y"], **attrs), {"x": rand((3, 7), 3)}, 6)


@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("bounds", [(None, None), (-0.5, None), (None, 0.3), (-0.2, 0.4)])
def test_clip_11(opset, bounds):
    lo, hi = bounds
    ins = ["x", "" if lo is None else "lo", "" if hi is None else "hi"]
    while ins and not ins[-1]:
        ins.pop()
    feeds = {"x": rand((2, 3, 5), 4)}
    if lo is not None:
        feeds["lo"] = np.array(lo, np.float32)
    if hi is not None:
        feeds["hi"] = np.array(hi, np.float32)
    check_node(node("Clip", ins, ["y"]), feeds, opset)


def test_clip_constant_bounds():
    check_node(node("Clip", ["x", "lo", "hi"], ["y"]), {"x": rand((10,), 5)}, 13,
               initializers={"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)})
