"""Comparisons (Equal, Less, LessOrEqual, Greater, GreaterOrEqual), logical (And, Or, Xor, Not), bitwise
(BitwiseAnd/Or/Xor/Not, BitShift), IsNaN, IsInf: every dtype their schemas allow (bfloat16 aside), broadcasting.

Oracles: onnx.reference for every case, onnxruntime where it implements the op for the dtype (see
test_math_dtypes.check). Sessions run with the cpu fallback disabled."""
import numpy as np
import pytest

import onnxep
from tests._util import cpu_only_options
from tests.ops.test_math_dtypes import FLOATS, NUMERIC, SIGNED, UNSIGNED, check, one_node, sample

BCAST = [((2, 3, 4), (2, 3, 4)), ((3, 1, 5), (4, 1)), ((), (0, 3)), ((5,), ())]


@pytest.mark.parametrize("op,opset", [("Equal", 13), ("Less", 13), ("LessOrEqual", 16), ("Greater", 13),
                                      ("GreaterOrEqual", 16)])
@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("sa,sb", BCAST)
def test_compare(op, opset, dtype, sa, sb):
    a, b = sample(dtype, sa, 1, low=0, high=3), sample(dtype, sb, 2, low=0, high=3)   # small range: ties occur
    check(op, {"a": a, "b": b}, opset)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater"])
@pytest.mark.parametrize("opset", [7, 9, 11])
def test_compare_old_opsets(op, opset):
    dt = np.int64 if op == "Equal" or opset >= 9 else np.float32
    check(op, {"a": sample(dt, (3, 4), 1, low=0, high=2), "b": sample(dt, (4,), 2, low=0, high=2)}, opset)


def test_compare_nan():
    x = np.array([np.nan, 1.0, np.inf, -np.inf, 0.0])
    for op in ("Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"):
        check(op, {"a": x, "b": np.array([np.nan, 1.0, np.inf, np.inf, -0.0])}, 16)


def test_equal_bool_and_string():
    check("Equal", {"a": sample(bool, (3, 4), 1), "b": sample(bool, (4,), 2)}, 13)
    a = np.array([["a", "bc"], ["", "x"]], dtype=object)
    check("Equal", {"a": a, "b": np.array(["a", "x"], dtype=object)}, 19, ort=False)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
@pytest.mark.parametrize("sa,sb", BCAST)
def test_logical(op, sa, sb):
    check(op, {"a": sample(bool, sa, 1), "b": sample(bool, sb, 2)}, 7)


def test_not():
    check("Not", {"x": sample(bool, (3, 5), 1)}, 1)
    check("Not", {"x": np.zeros((0, 2), bool)}, 1)


def test_attention_mask_chain():
    """The transformers attention-mask pattern: Equal / Less on int64, And, Not; one session, every node native."""
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Equal", ["ids", "pad"], ["is_pad"]), helper.make_node("Not", ["is_pad"], ["keep"]),
             helper.make_node("Less", ["pos", "len"], ["in_range"]),
             helper.make_node("And", ["keep", "in_range"], ["mask"])]
    g = helper.make_graph(nodes, "mask", [
        helper.make_tensor_value_info("ids", TensorProto.INT64, ["B", "S"]),
        helper.make_tensor_value_info("pos", TensorProto.INT64, ["S"]),
        helper.make_tensor_value_info("len", TensorProto.INT64, ["B", 1])],
        [helper.make_tensor_value_info("mask", TensorProto.BOOL, ["B", "S"])],
        [helper.make_tensor(name="pad", data_type=TensorProto.INT64, dims=[], vals=[0])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    ids = np.array([[5, 7, 0, 0], [3, 0, 2, 9]], np.int64)
    feeds = {"ids": ids, "pos": np.arange(4, dtype=np.int64), "len": np.array([[3], [4]], np.int64)}
    y, = sess.run(None, feeds)
    np.testing.assert_array_equal(y, (ids != 0) & (np.arange(4) < feeds["len"]))   # oracle: numpy


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED)
def test_bitwise(op, dtype):
    info = np.iinfo(dtype)
    check(op, {"a": sample(dtype, (3, 4), 1, low=info.min, high=info.max // 2),
               "b": sample(dtype, (4,), 2, low=info.min, high=info.max // 2)}, 18)


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED)
def test_bitwise_not(dtype):
    info = np.iinfo(dtype)
    check("BitwiseNot", {"x": sample(dtype, (3, 4), 1, low=info.min, high=info.max // 2)}, 18)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", UNSIGNED)
def test_bit_shift(direction, dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = sample(dtype, (3, 4), 1, low=0, high=200)
    check("BitShift", {"x": x, "s": sample(dtype, (4,), 2, low=0, high=bits - 1)}, 11, direction=direction)


@pytest.mark.parametrize("dtype", FLOATS)
def test_is_nan(dtype):
    x = np.array([[np.nan, 1.0, np.inf], [-np.inf, 0.0, -np.nan]], dtype)
    check("IsNaN", {"x": x}, 13)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("neg,pos", [(1, 1), (0, 1), (1, 0), (0, 0)])
def test_is_inf(dtype, neg, pos):
    x = np.array([[np.nan, 1.0, np.inf], [-np.inf, 0.0, 3e38]], dtype)
    check("IsInf", {"x": x}, 10, detect_negative=neg, detect_positive=pos)


def test_is_inf_float16_opset20():
    check("IsInf", {"x": np.array([np.inf, -np.inf, 1, np.nan], np.float16)}, 20)


def test_compare_bad_shapes_raise():
    """Oracle: none -- InvalidArgument naming the node; the session runs afterwards."""
    m = one_node("Less", {"a": np.ones(3, np.int64), "b": np.ones(3, np.int64)}, 13)
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.errors.InvalidArgument, match="less_0"):
        sess.run(None, {"a": np.ones(4, np.int64), "b": np.ones(3, np.int64)})
    y, = sess.run(None, {"a": np.array([0, 5, 1], np.int64), "b": np.ones(3, np.int64)})
    np.testing.assert_array_equal(y, [True, False, False])


@pytest.mark.parametrize("op,dtype", [("Equal", np.int64), ("Equal", bool), ("Less", np.float32),
                                      ("Greater", np.float64), ("And", bool), ("Or", bool), ("Xor", bool)])
@pytest.mark.parametrize("sb,attrs", [((3, 4), {}), ((4,), {"broadcast": 1}), ((3,), {"broadcast": 1, "axis": 0}),
                                      ((1, 4), {"broadcast": 1, "axis": 0})])
def test_opset1_broadcast_attribute(op, dtype, sb, attrs):
    """Opset 1: B broadcasts to A only with broadcast=1, aligned at `axis`. Oracle: numpy with B reshaped at
    `axis` (onnx.reference ignores `axis`; onnxruntime has no opset-1 kernels)."""
    a = sample(dtype, (3, 4), 1, low=0, high=2)
    b = sample(dtype, sb, 2, low=0, high=2)
    got = check(op, {"a": a, "b": b}, 1, ref=False, ort=False, **attrs)
    axis = attrs.get("axis", 2 - len(sb))
    b2 = b.reshape((1,) * axis + b.shape + (1,) * (2 - axis - len(sb)))
    fn = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "And": np.logical_and, "Or": np.logical_or,
          "Xor": np.logical_xor}[op]
    np.testing.assert_array_equal(got[0], fn(a, b2))


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", SIGNED)
def test_bit_shift_signed_opset28(direction, dtype):
    """Opset 28 adds the signed types (a right shift keeps the sign, as numpy and C++)."""
    x = sample(dtype, (3, 4), 1, low=-100, high=100)
    check("BitShift", {"x": x, "s": sample(dtype, (4,), 2, low=0, high=5)}, 28, direction=direction)
