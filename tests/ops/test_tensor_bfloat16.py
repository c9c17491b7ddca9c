"""bfloat16 (ml_dtypes arrays, as onnx's numpy_helper reads them) through the tensor ops, and the opset-1 forms whose
outputs shape inference leaves untyped (Split-1, Pad-1). Oracles: onnx.reference, numpy (the same op on float32 data
rounded to bfloat16: data movement is exact)."""
import numpy as np
import pytest

from tests.ops._tensor_cases import check, cpu_session, data, model

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = ml_dtypes.bfloat16
I64 = np.int64


def bf(shape, seed=0):
    return data(shape, np.float32, seed).astype(BF16)


CASES = [  # op, inputs, n_out, opset, attrs
    ("Where", {"c": data((2, 3), np.bool_), "x": bf((2, 3)), "z": bf((1, 3), 1)}, 1, 16, {}),
    ("Slice", {"x": bf((4, 5)), "s": np.array([1, -1], I64), "e": np.array([3, 0], I64), "a": np.array([0, 1], I64),
               "t": np.array([1, -2], I64)}, 1, 13, {}),
    ("Expand", {"x": bf((3, 1)), "s": np.array([2, 3, 4], I64)}, 1, 13, {}),
    ("Tile", {"x": bf((2, 3)), "r": np.array([2, 1], I64)}, 1, 13, {}),
    ("Split", {"x": bf((4, 6))}, 2, 18, {"axis": 1, "num_outputs": 2}),
    ("GatherND", {"x": bf((3, 4)), "i": np.array([[2], [0]], I64)}, 1, 13, {}),
    ("GatherElements", {"x": bf((3, 4)), "i": np.array([[2, 0, 1, 1]], I64)}, 1, 13, {}),
    ("ScatterND", {"x": bf((3, 4)), "i": np.array([[2], [0]], I64), "u": bf((2, 4), 1)}, 1, 18, {}),
    ("ScatterElements", {"x": bf((3, 4)), "i": np.array([[2, 0, 1, 1]], I64), "u": bf((1, 4), 1)}, 1, 18, {}),
    ("Pad", {"x": bf((2, 3)), "p": np.array([1, 0, 0, 2], I64), "v": np.array(1.5, BF16)}, 1, 19, {}),
    ("Pad", {"x": bf((2, 3)), "p": np.array([1, 0, 0, 2], I64)}, 1, 19, {"mode": "reflect"}),
    ("Trilu", {"x": bf((3, 4))}, 1, 14, {"upper": 0}),
    ("NonZero", {"x": np.array([[0, 1.5], [0, -2]], np.float32).astype(BF16)}, 1, 13, {}),
    ("EyeLike", {"x": bf((3, 4))}, 1, 22, {"k": 1}),
    ("ReverseSequence", {"x": bf((3, 2)), "l": np.array([3, 1], I64)}, 1, 10, {}),
    ("DepthToSpace", {"x": bf((1, 4, 2, 2))}, 1, 13, {"blocksize": 2}),
    ("SpaceToDepth", {"x": bf((1, 1, 4, 4))}, 1, 13, {"blocksize": 2}),
    ("Reshape", {"x": bf((2, 3)), "s": np.array([3, 2], I64)}, 1, 14, {}),
    ("Transpose", {"x": bf((2, 3, 4))}, 1, 13, {"perm": [1, 2, 0]}),
    ("Concat", {"a": bf((2, 3)), "b": bf((2, 1), 1)}, 1, 13, {"axis": 1}),
    ("Gather", {"x": bf((3, 4)), "i": np.array([2, -1], I64)}, 1, 13, {"axis": 1}),
    ("Squeeze", {"x": bf((1, 3)), "a": np.array([0], I64)}, 1, 13, {}),
    ("Unsqueeze", {"x": bf((3,)), "a": np.array([0], I64)}, 1, 13, {}),
    ("Flatten", {"x": bf((2, 3, 2))}, 1, 13, {}),
    ("Identity", {"x": bf((2, 3))}, 1, 16, {}),
]


@pytest.mark.parametrize("op,ins,n_out,opset,attrs", CASES, ids=[c[0] + str(i) for i, c in enumerate(CASES)])
def test_bfloat16(op, ins, n_out, opset, attrs):
    check(op, ins, n_out=n_out, opset=opset, with_ort=False, **attrs)


@pytest.mark.parametrize("src,dst", [(np.float32, 16), (np.float64, 16), (np.int64, 16), (BF16, 1), (BF16, 7),
                                     (BF16, 10), (BF16, 9)])
def test_cast_bfloat16(src, dst):
    x = np.array([0.1, -2.5, 3.0078125, 1e10, -0.0, 7], np.float32).astype(src)
    check("Cast", {"x": x}, to=dst, opset=13, with_ort=False)


def test_cumsum_bfloat16():
    """Oracle: numpy -- accumulated in float32, rounded once (as onnxruntime)."""
    x = bf((3, 8))
    m = model("CumSum", {"x": x, "a": np.array(1, I64)}, opset=14)
    got = cpu_session(m).run(None, {"x": x, "a": np.array(1, I64)})[0]
    assert got.dtype == BF16
    np.testing.assert_array_equal(got, np.cumsum(x.astype(np.float32), axis=1).astype(BF16))


def test_range_bfloat16():
    """Oracle: onnx.reference (opset 27: bfloat16 computed in float32)."""
    t = lambda v: np.array(v, BF16)  # noqa: E731
    check("Range", {"s": t(1.0), "l": t(6.0), "d": t(0.5)}, opset=27, with_ort=False)


def test_split_opset1():
    """Oracle: numpy np.split (opset 1: split as attribute or second input; onnx.reference has no opset 1)."""
    x = data((5, 6), np.float32)
    m = model("Split", {"x": x}, n_out=2, opset=1, axis=0, split=[1, 4])
    got = cpu_session(m).run(None, {"x": x})
    for g, w in zip(got, np.split(x, [1], axis=0)):
        np.testing.assert_array_equal(g, w)
    s = np.array([2, 4], np.float32)
    m = model("Split", {"x": x, "s": s}, n_out=2, opset=1, axis=1)
    got = cpu_session(m).run(None, {"x": x, "s": s})
    for g, w in zip(got, np.split(x, [2], axis=1)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_opset1(mode):
    """Oracle: numpy np.pad (opset 1 names the attribute paddings)."""
    x = data((3, 4), np.float32)
    m = model("Pad", {"x": x}, opset=1, paddings=[1, 0, 2, 2], mode=mode, value=0.5)
    got = cpu_session(m).run(None, {"x": x})[0]
    kw = {"constant_values": 0.5} if mode == "constant" else {}
    np.testing.assert_array_equal(got, np.pad(x, [(1, 2), (0, 2)], mode=mode, **kw))


@pytest.mark.parametrize("value", [np.array([1.5], BF16), np.array([3], np.uint16), np.array([True]),
                                   np.array([-2], np.int8), np.array([0.25], np.float16)])
def test_constant_of_shape_types(value):
    import onnx
    check("ConstantOfShape", {"s": np.array([2, 3], I64)}, opset=21, value=onnx.numpy_helper.from_array(value),
          with_ort=value.dtype != BF16)


def test_cast_reshape_concat_opset1():
    """Oracle: numpy -- the opset-1 forms: Cast's `to` a type name, Reshape's shape an attribute, Concat's axis 1 by
    default (onnx.reference does not run them all)."""
    x = data((2, 3), np.float32)
    got = cpu_session(model("Cast", {"x": x}, opset=1, to="INT32")).run(None, {"x": x})[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, x.astype(np.int32))
    got = cpu_session(model("Reshape", {"x": x}, opset=1, shape=[0, 3, -1])).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, x.reshape(2, 3, 1))
    feeds = {"a": x, "b": data((2, 1), np.float32, 1)}
    got = cpu_session(model("Concat", feeds, opset=1)).run(None, feeds)[0]
    np.testing.assert_array_equal(got, np.concatenate([feeds["a"], feeds["b"]], axis=1))
