"""Where, Cast, CastLike, Range, Slice, Expand, Split, Tile on the cpu backend (fallback off) in every dtype their
schemas allow that numpy holds. Oracles: onnx.reference, onnxruntime (where it has the kernel), numpy."""
import numpy as np
import pytest

from tests.ops._tensor_cases import ALL, check, cpu_session, data, model

STR = [object]


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("opset", [9, 16])
def test_where(dtype, opset):
    c = data((3, 1, 4), np.bool_)
    check("Where", {"c": c, "x": data((2, 4), dtype, 1), "z": data((1, 4), dtype, 2)}, opset=opset)


def test_where_long_mask():
    """Oracle: numpy np.where -- the attention-mask pattern (bool mask, scalar -inf)."""
    mask = np.tril(np.ones((5, 5), bool))[None]
    x = data((2, 5, 5), np.float32)
    got = check("Where", {"c": mask, "x": x, "z": np.array(-np.inf, np.float32)})
    np.testing.assert_array_equal(got[0], np.where(mask, x, -np.inf))


_CAST_TO = {np.float32: 1, np.uint8: 2, np.int8: 3, np.uint16: 4, np.int16: 5, np.int32: 6, np.int64: 7, object: 8,
            np.bool_: 9, np.float16: 10, np.float64: 11, np.uint32: 12, np.uint64: 13}


@pytest.mark.parametrize("src", ALL)
@pytest.mark.parametrize("dst", ALL)
def test_cast(src, dst):
    x = data((3, 5), src)
    if np.dtype(src).kind == "f" and np.dtype(dst).kind in "iu":
        x = np.abs(x)   # negative floats to unsigned are undefined
    check("Cast", {"x": x}, to=_CAST_TO[dst], opset=13)


@pytest.mark.parametrize("opset", [6, 9, 13, 19, 21])
def test_cast_opsets(opset):
    check("Cast", {"x": data((4,), np.float32)}, to=7, opset=opset)


def test_cast_float_to_int_truncates():
    """Oracle: numpy and the spec -- toward zero, not rounding."""
    x = np.array([-2.7, -0.5, 0.5, 1.5, 2.9, 100.99], np.float32)
    got = check("Cast", {"x": x}, to=7)
    np.testing.assert_array_equal(got[0], [-2, 0, 0, 1, 2, 100])


def test_cast_bool():
    """Oracle: the spec -- anything non-zero (NaN too) is True; True casts to 1."""
    x = np.array([0.0, -0.0, 1e-30, -3, np.nan, np.inf], np.float32)
    got = check("Cast", {"x": x}, to=9)
    np.testing.assert_array_equal(got[0], [False, False, True, True, True, True])
    got = check("Cast", {"x": np.array([True, False])}, to=1)
    np.testing.assert_array_equal(got[0], [1.0, 0.0])


@pytest.mark.parametrize("src", [np.float32, np.float64, np.int64, np.int32, np.uint8, np.bool_])
def test_cast_to_string(src):
    """Oracle: onnx.reference (numpy's str of each value)."""
    check("Cast", {"x": data((2, 3), src)}, to=8, with_ort=False)


@pytest.mark.parametrize("dst", [np.float32, np.float64, np.float16])
def test_cast_string_to_float(dst):
    x = np.array(["1.5", "-2", "1e3", "NaN", "INF", "-inf", "0.1"], object)
    got = check("Cast", {"x": x}, to=_CAST_TO[dst])
    assert np.isnan(got[0][3]) and got[0][4] == np.inf and got[0][5] == -np.inf


@pytest.mark.parametrize("dst", [np.int64, np.int32, np.uint8])
def test_cast_string_to_int(dst):
    check("Cast", {"x": np.array(["12", "-3", "0", "7"] if dst != np.uint8 else ["12", "3", "0", "255"], object)},
          to=_CAST_TO[dst])


@pytest.mark.parametrize("src,dst", [(np.float32, np.float16), (np.int64, np.float32), (np.float64, np.int32),
                                     (np.int32, np.bool_), (np.float32, object), (object, np.float32)])
def test_castlike(src, dst):
    x = data((2, 3), src) if src is not object else np.array(["1.5", "2", "-1"], object)
    like = data((1,), dst)
    check("CastLike", {"x": x, "t": like}, opset=15, with_ort=src is not object and dst is not object)


@pytest.mark.parametrize("dtype,start,limit,delta", [
    (np.float32, 1.0, 5.0, 0.3), (np.float64, 10.0, -3.0, -1.5), (np.int64, 0, 10, 3), (np.int32, 10, 4, -2),
    (np.int16, -5, 5, 1), (np.int64, 3, 3, 1), (np.int64, 5, 0, 1), (np.float32, 0.0, 1.0, 0.1)])
def test_range(dtype, start, limit, delta):
    t = lambda v: np.array(v, dtype)  # noqa: E731
    check("Range", {"s": t(start), "l": t(limit), "d": t(delta)}, opset=11, atol=1e-6, rtol=1e-6)


def test_range_float16_opset27():
    """Oracle: onnx.reference (opset 27 allows float16, computed in float32)."""
    t = lambda v: np.array(v, np.float16)  # noqa: E731
    check("Range", {"s": t(1.0), "l": t(9.0), "d": t(0.5)}, opset=25 if False else 27, with_ort=False, atol=1e-3)


SLICES = [  # data shape, starts, ends, axes, steps
    ((20, 10, 5), [0, 0], [3, 10], [0, 1], [1, 1]),
    ((20, 10, 5), [0, 0, 3], [20, 10, 4], None, None),
    ((20, 10, 5), [1], [1000], [1], [1]),
    ((20, 10, 5), [-2], [-1], [0], [1]),
    ((20, 10, 5), [20, 10, 4], [0, 0, 1], [0, 1, 2], [-1, -3, -2]),
    ((20, 10, 5), [0, 0, 3], [20, 10, 4], [0, -2, -1], None),
    ((20, 10, 5), [1000], [1000], [1], [1]),
    ((20, 10, 5), [-1], [-1000], [0], [-1]),
    ((6,), [2 ** 63 - 1], [-(2 ** 63)], [0], [-2]),
]


@pytest.mark.parametrize("shape,starts,ends,axes,steps", SLICES)
@pytest.mark.parametrize("itype", [np.int64, np.int32])
def test_slice(shape, starts, ends, axes, steps, itype):
    if itype == np.int32 and any(abs(v) > 2 ** 31 for v in starts + ends):
        pytest.skip("int32 cannot hold the bounds")
    a = lambda v: None if v is None else np.array(v, itype)  # noqa: E731
    ins = {"x": data(shape, np.float32), "st": a(starts), "en": a(ends), "ax": a(axes), "sp": a(steps)}
    if steps is None:
        del ins["sp"]
        if axes is None:
            del ins["ax"]
    check("Slice", ins, opset=13, const=[k for k in ("st", "en", "ax", "sp") if ins.get(k) is not None][:1])


@pytest.mark.parametrize("dtype", ALL + STR)
def test_slice_dtypes(dtype):
    check("Slice", {"x": data((4, 6), dtype), "st": np.array([1, -4], np.int64), "en": np.array([3, 100], np.int64),
                    "ax": np.array([0, 1], np.int64), "sp": np.array([1, 2], np.int64)}, opset=13)


def test_slice_opset1():
    check("Slice", {"x": data((4, 6, 3), np.float32)}, opset=1, starts=[1, 0], ends=[3, -1], axes=[0, 2])
    check("Slice", {"x": data((4, 6), np.int64)}, opset=1, starts=[1, 2], ends=[1000, 4])


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("xshape,shape", [((3, 1), (2, 1, 6)), ((3, 1), (3, 4)), ((1, 4), (1,)), ((2, 3), (1, 1)),
                                          ((), (2, 2)), ((1, 3), (0, 3))])
def test_expand(dtype, xshape, shape):
    check("Expand", {"x": data(xshape, dtype), "s": np.array(shape, np.int64)}, opset=13)


def test_expand_opset8():
    check("Expand", {"x": data((3, 1), np.float32), "s": np.array([2, 3, 4], np.int64)}, opset=8)


@pytest.mark.parametrize("dtype", ALL + STR)
def test_split_dtypes(dtype):
    check("Split", {"x": data((6, 4), dtype), "s": np.array([1, 2, 3], np.int64)}, n_out=3, opset=13)


@pytest.mark.parametrize("opset,ins,n_out,attrs", [
    (13, {"s": None}, 3, {"axis": 1}),                                     # equal parts
    (13, {"s": np.array([2, 4], np.int64)}, 2, {"axis": -1}),
    (13, {"s": np.array([0, 6, 0], np.int64)}, 3, {"axis": 1}),            # zero-size parts
    (18, {"s": None}, 4, {"axis": 1, "num_outputs": 4}),                   # 7 -> 2, 2, 2, 1
    (18, {"s": None}, 3, {"axis": 0, "num_outputs": 3}),                   # 5 -> 2, 2, 1
    (18, {"s": np.array([1, 4], np.int64)}, 2, {"axis": 0}),
    (11, {}, 2, {"axis": 0, "split": [3, 2]}),
    (11, {}, 3, {"axis": 1}),
    (2, {}, 2, {"axis": 1, "split": [5, 1]}),
])
def test_split(opset, ins, n_out, attrs):
    x = data((5, 6), np.float32)
    if attrs.get("num_outputs") == 4 and attrs["axis"] == 1:
        x = data((5, 7), np.float32)    # 7 -> 2, 2, 2, 1
    check("Split", {"x": x, **ins}, n_out=n_out, opset=opset, **attrs)


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("shape,reps", [((2, 3), (2, 3)), ((4,), (3,)), ((2, 1, 3), (1, 4, 0)), ((), ())])
def test_tile(dtype, shape, reps):
    check("Tile", {"x": data(shape, dtype), "r": np.array(reps, np.int64)}, opset=13)


def test_tile_matches_numpy():
    """Oracle: numpy np.tile."""
    x = data((3, 2, 5), np.float32)
    got = check("Tile", {"x": x, "r": np.array([2, 3, 1], np.int64)}, opset=6)
    np.testing.assert_array_equal(got[0], np.tile(x, (2, 3, 1)))


def test_tile_opset1():
    """Oracle: numpy np.tile (opset 1's tiles / axis inputs; onnx.reference and onnxruntime do not run opset 1).
    Tile-1's schema binds tiles and axis to T, the input's type: int64 ones are refused at load (graph/model.py
    _check_type_bindings), as onnxruntime refuses a type parameter bound to two types."""
    x = data((2, 3), np.float32)
    m = model("Tile", {"x": x, "t": np.array(3, np.float32), "a": np.array(1, np.float32)}, opset=1)
    got = cpu_session(m).run(None, {"x": x, "t": np.array(3, np.float32), "a": np.array(1, np.float32)})
    np.testing.assert_array_equal(got[0], np.tile(x, (1, 3)))


def test_cast_string_to_int_and_bool():
    """Oracle: the spec -- "100.5" to an integer may give 100; big integers stay exact; to bool as onnxruntime
    ("0" is False; onnx.reference's astype(bool) makes every non-empty string True)."""
    x = np.array(["100.5", "-7", "9007199254740993"], object)
    m = model("Cast", {"x": x}, opset=13, to=7)
    got = cpu_session(m).run(None, {"x": x})[0]
    assert got.dtype == np.int64 and got[0] == 100 and got[1] == -7
    check("Cast", {"x": np.array(["0", "1", "2", "0"], object)}, to=9, opset=13, with_ref=False)
    x = np.array(["0", "1", "2.5", "-0.0", "+INF", "nan"], object)
    got = cpu_session(model("Cast", {"x": x}, opset=13, to=9)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, [False, True, True, False, True, True])
    x = np.array(["9007199254740993", "-3"], object)
    np.testing.assert_array_equal(cpu_session(model("Cast", {"x": x}, opset=13, to=7)).run(None, {"x": x})[0],
                                  [9007199254740993, -3])
