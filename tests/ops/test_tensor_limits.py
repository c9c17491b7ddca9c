"""Size bombs and bad inputs of the tensor ops whose output shape comes from input values. Oracle: none -- a tiny model
asking for a terabyte gets onnxep's named error (naming node and shape) before anything is allocated, never a
MemoryError, and the session runs normally afterwards; bad values raise InvalidArgument naming the node."""
import numpy as np
import pytest

from onnxep.errors import Fail, InvalidArgument
from tests.ops._tensor_cases import cpu_session, data, model

I64 = np.int64
T = 2 ** 40   # elements: 4 TiB of float32


def _bomb(op, ok, bad, opset=18, **attrs):
    m = model(op, ok, opset=opset, dynamic=True, **attrs)
    sess = cpu_session(m)
    want = sess.run(None, ok)
    with pytest.raises(Fail, match=rf"{op.lower()}_0.*shape \(.*needs \d+ bytes, over the"):
        sess.run(None, bad)
    after = sess.run(None, ok)      # the session still works
    for a, b in zip(after, want):
        np.testing.assert_array_equal(a, b)


def test_expand_bomb():
    x = data((1, 3), np.float32)
    _bomb("Expand", {"x": x, "s": np.array([2, 3], I64)}, {"x": x, "s": np.array([T, 1 << 20, 3], I64)})


def test_tile_bomb():
    x = data((2, 3), np.float32)
    _bomb("Tile", {"x": x, "r": np.array([2, 2], I64)}, {"x": x, "r": np.array([T, T], I64)})


def test_pad_bomb():
    x = data((2, 3), np.float32)
    _bomb("Pad", {"x": x, "p": np.array([1, 1, 1, 1], I64)}, {"x": x, "p": np.array([0, T, 0, T], I64)})


@pytest.mark.parametrize("mode", ["edge", "reflect"])
def test_pad_bomb_modes(mode):
    x = data((2, 3), np.float32)
    _bomb("Pad", {"x": x, "p": np.array([1, 1, 1, 1], I64)}, {"x": x, "p": np.array([0, 2, 0, T], I64)}, mode=mode)


@pytest.mark.parametrize("dtype", [np.int64, np.float32])
def test_range_bomb(dtype):
    a = lambda v: np.array(v, dtype)  # noqa: E731
    _bomb("Range", {"s": a(0), "l": a(10), "d": a(1)}, {"s": a(0), "l": a(2.0 ** 50), "d": a(1)}, opset=11)


def test_constant_of_shape_bomb():
    _bomb("ConstantOfShape", {"s": np.array([2, 3], I64)}, {"s": np.array([T, T], I64)}, opset=9)


def test_one_hot_bomb():
    i = np.array([1, 2], I64)
    v = np.array([0, 1], np.float32)
    _bomb("OneHot", {"i": i, "d": np.array(4, I64), "v": v}, {"i": i, "d": np.array(T, I64), "v": v}, opset=11)


def test_expand_string_bomb():
    """Strings are allocated outside the arena: their size is checked too."""
    x = np.array(["a", "b"], object)
    m = model("Expand", {"x": x, "s": np.array([2], I64)}, opset=13, dynamic=True)
    sess = cpu_session(m)
    with pytest.raises(Fail, match="expand_0.*over the"):
        sess.run(None, {"x": x, "s": np.array([T, 1], I64)})
    assert sess.run(None, {"x": x, "s": np.array([2, 2], I64)})[0].shape == (2, 2)


BAD = [  # op, inputs, attrs, message
    ("Expand", {"x": data((2, 3), np.float32), "s": np.array([4, 3], I64)}, {}, "cannot be broadcast"),
    ("Expand", {"x": data((2, 3), np.float32), "s": np.array([-1, 3], I64)}, {}, "negative dim"),
    ("Range", {"s": np.array(0, I64), "l": np.array(5, I64), "d": np.array(0, I64)}, {}, "delta must not be 0"),
    ("Slice", {"x": data((4,), np.float32), "s": np.array([0], I64), "e": np.array([2], I64),
               "a": np.array([0], I64), "t": np.array([0], I64)}, {}, "step 0"),
    ("Slice", {"x": data((4,), np.float32), "s": np.array([0], I64), "e": np.array([2], I64),
               "a": np.array([3], I64)}, {}, "out of range"),
    ("Tile", {"x": data((2, 3), np.float32), "r": np.array([2], I64)}, {}, "must hold 2 non-negative"),
    ("Split", {"x": data((5, 2), np.float32), "s": np.array([2, 2], I64)}, {"n_out": 2}, "summing to 5"),
    ("GatherND", {"x": data((3, 2), np.float32), "i": np.array([[3]], I64)}, {}, r"must be in \[-3, 2\]"),
    ("GatherElements", {"x": data((3, 2), np.float32), "i": np.array([[0, 5]], I64)}, {"axis": 1},
     r"must be in \[-2, 1\]"),
    ("ScatterND", {"x": data((3, 2), np.float32), "i": np.array([[-4]], I64), "u": data((1, 2), np.float32)}, {},
     r"must be in \[-3, 2\]"),
    ("ScatterElements", {"x": data((3, 2), np.float32), "i": np.array([[0, 2]], I64),
                         "u": data((1, 2), np.float32)}, {"axis": 1}, r"must be in \[-2, 1\]"),
    ("Pad", {"x": data((2, 3), np.float32), "p": np.array([0, 0, 0], I64)}, {}, "2 values per padded axis"),
    ("Pad", {"x": data((2, 3), np.float32), "p": np.array([0, 0, -3, 0], I64)}, {}, "crop more"),
    ("CumSum", {"x": data((2, 3), np.float32), "a": np.array(2, I64)}, {}, "out of range"),
    ("OneHot", {"i": np.array([1], I64), "d": np.array(0, I64), "v": np.array([0, 1], np.float32)}, {},
     "depth must be positive"),
    ("Compress", {"x": data((2, 3), np.float32), "c": np.array([1, 0, 1], bool)}, {"axis": 0}, "condition has 3"),
    ("ReverseSequence", {"x": data((3, 2), np.float32), "l": np.array([4, 1], I64)}, {}, r"in \[0, 3\]"),
    ("DepthToSpace", {"x": data((1, 3, 2, 2), np.float32)}, {"blocksize": 2}, "divisible"),
    ("Trilu", {"x": data((3, 3), np.float32), "k": np.array([1, 2], I64)}, {}, "k must be a scalar"),
]


@pytest.mark.parametrize("op,ins,attrs,msg", BAD, ids=[b[0] + str(i) for i, b in enumerate(BAD)])
def test_bad_input(op, ins, attrs, msg):
    attrs = dict(attrs)
    n_out = attrs.pop("n_out", 1)
    m = model(op, ins, n_out=n_out, opset=18, **attrs)
    sess = cpu_session(m)
    with pytest.raises(InvalidArgument, match=rf"{op.lower()}_0.*{msg}"):
        sess.run(None, ins)
