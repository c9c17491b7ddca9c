"""Add, Sub, Mul, Div (opsets 7, 13, 14) with broadcasting. Oracle: onnx.reference."""
import pytest

from tests.ops._eltshape import check_node, node, rand

BCAST = [((2, 3), (2, 3)), ((2, 3, 4), ()), ((), (5,)), ((1, 6, 3, 3), (6, 1, 1)), ((4, 5), (5,)),
         ((3, 1, 2), (1, 4, 1)), ((2, 0, 3), (1, 3)), ((1,), (1,)), ((2, 3, 300), (3, 1))]


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("opset", [7, 13, 14])
@pytest.mark.parametrize("sa,sb", BCAST)
def test_binary(op, opset, sa, sb):
    a, b = rand(sa, 1), rand(sb, 2) + 3.0   # b away from 0 for Div
    check_node(node(op, ["a", "b"], ["c"]), {"a": a, "b": b}, opset)


@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_binary_constant_operand(op):
    """Per-channel constant (the light model-zoo pattern), as an initializer."""
    x = rand((1, 8, 5, 5), 3)
    check_node(node(op, ["x", "w"], ["y"]), {"x": x}, 9, initializers={"w": rand((8, 1, 1), 4)})


def test_binary_incompatible_shapes_raise():
    """Oracle: none needed -- incompatible shapes must raise an error naming the node."""
    import onnxep
    from tests._util import make_model
    n = node("Add", ["a", "b"], ["c"])
    m = make_model([n], {"a": rand((2, 3)), "b": rand((4,))}, ["c"], opset=13, input_shapes={"a": ["N", 3], "b": ["M"]})
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(Exception, match="add_0"):
        sess.run(None, {"a": rand((2, 3)), "b": rand((4,))})


@pytest.mark.parametrize("op", ["Sum", "Max", "Min"])
@pytest.mark.parametrize("opset", [8, 13])
@pytest.mark.parametrize("shapes", [[(2, 3)], [(2, 3), (2, 3)], [(2, 3, 4), (4,), (3, 1)], [(5,), (), (1, 5), (5,)],
                                    [(0, 3), (3,)]])
def test_variadic(op, opset, shapes):
    feeds = {f"x{i}": rand(s, i) for i, s in enumerate(shapes)}
    check_node(node(op, list(feeds), ["y"]), feeds, opset)


@pytest.mark.parametrize("op", ["Sum", "Max", "Min"])
def test_variadic_opset6_same_shape(op):
    feeds = {f"x{i}": rand((3, 4), i) for i in range(3)}
    check_node(node(op, list(feeds), ["y"]), feeds, 6)


def test_sum_resnet_pattern():
    """Sum of two NCHW tensors (the light resnet50/shufflenet pattern), over several parallel chunks."""
    feeds = {"a": rand((1, 64, 40, 40), 1), "b": rand((1, 64, 40, 40), 2)}
    check_node(node("Sum", ["a", "b"], ["y"]), feeds, 9)
