"""GatherND, GatherElements, ScatterND, ScatterElements, CumSum, Pad, OneHot, Trilu, NonZero, Size, EyeLike, Compress,
ReverseSequence, DepthToSpace and SpaceToDepth on the cpu backend (fallback off). Oracles: onnx.reference,
onnxruntime (where it has the kernel), numpy."""
import numpy as np
import pytest

from tests.ops._tensor_cases import ALL, check, data

STR = [object]
I64 = np.int64


@pytest.mark.parametrize("dtype", ALL + STR)
def test_gather_nd_dtypes(dtype):
    check("GatherND", {"x": data((3, 4, 2), dtype), "i": np.array([[0, 1], [2, -1], [1, 3]], I64)}, opset=13)


@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("xshape,idx,b", [
    ((2, 2), [[0, 0], [1, 1]], 0), ((2, 2), [[1], [0]], 0), ((2, 2, 2), [[0, 1], [1, 0]], 0),
    ((2, 2, 2), [[[0, 1]], [[1, 0]]], 0), ((2, 2, 2), [[1], [0]], 1), ((2, 3, 4), [[[1, 2], [0, 0]], [[2, 3], [1, 1]]], 1),
    ((2, 3, 4, 5), np.zeros((2, 3, 6, 1), int), 2), ((4, 5), np.zeros((0, 2), int), 0)])
def test_gather_nd(opset, xshape, idx, b):
    if b and opset < 12:
        pytest.skip("batch_dims from opset 12")
    kw = {"batch_dims": b} if b else {}
    check("GatherND", {"x": data(xshape, np.float32), "i": np.array(idx, I64)}, opset=opset, **kw)


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_gather_elements(dtype, itype):
    idx = np.array([[0, -1], [1, 0], [3, 3]], itype)
    check("GatherElements", {"x": data((3, 4), dtype), "i": idx}, axis=1, opset=13)
    check("GatherElements", {"x": data((3, 4), dtype), "i": np.array([[2, 0, 1, 0]], itype)}, axis=0, opset=11)


def test_gather_elements_matches_take_along_axis():
    """Oracle: numpy np.take_along_axis (the position gather of torch.gather)."""
    x = data((4, 5, 6), np.float32)
    idx = np.random.default_rng(1).integers(-5, 5, size=(4, 7, 6)).astype(I64)
    got = check("GatherElements", {"x": x, "i": idx}, axis=1)
    np.testing.assert_array_equal(got[0], np.take_along_axis(x, idx % 5, axis=1))


@pytest.mark.parametrize("dtype", ALL + STR)
def test_scatter_nd_dtypes(dtype):
    x, upd = data((4, 3), dtype), data((2, 3), dtype, 1)
    check("ScatterND", {"x": x, "i": np.array([[3], [0]], I64), "u": upd}, opset=13)


@pytest.mark.parametrize("reduction,opset", [("none", 11), ("none", 16), ("add", 16), ("mul", 16), ("max", 18),
                                             ("min", 18)])
def test_scatter_nd_reduction(reduction, opset):
    """Repeated indices accumulate in order (the reductions); without reduction indices are unique."""
    x = data((4, 4, 4), np.float32)
    idx = np.array([[0], [2]], I64) if reduction == "none" else np.array([[0], [2], [0], [-2]], I64)
    upd = data(idx.shape[:1] + (4, 4), np.float32, 2)
    kw = {} if opset < 16 else {"reduction": reduction}
    check("ScatterND", {"x": x, "i": idx, "u": upd}, opset=opset, rtol=1e-6, **kw)


def test_scatter_nd_elements():
    check("ScatterND", {"x": data((3, 4), np.int64), "i": np.array([[0, 1], [2, 3], [0, 1]], I64),
                        "u": np.array([5, 6, 7], I64)}, opset=18, reduction="add")


@pytest.mark.parametrize("dtype", ALL + STR)
def test_scatter_elements_dtypes(dtype):
    check("ScatterElements", {"x": data((3, 3), dtype), "i": np.array([[1, 0, 2], [0, 2, 1]], I64),
                              "u": data((2, 3), dtype, 1)}, axis=0, opset=13)


@pytest.mark.parametrize("reduction,opset", [("add", 16), ("mul", 16), ("max", 18), ("min", 18), ("none", 11)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64, np.int32])
def test_scatter_elements_reduction(reduction, opset, dtype):
    idx = np.array([[1, 1, -1], [0, 1, 1]], I64) if reduction != "none" else np.array([[1, 0, 2], [0, 2, 1]], I64)
    kw = {} if reduction == "none" else {"reduction": reduction}
    check("ScatterElements", {"x": data((3, 3), dtype), "i": idx, "u": data((2, 3), dtype, 1)}, axis=1,
          opset=opset, rtol=1e-6, **kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
def test_cumsum(dtype, exclusive, reverse):
    x = data((3, 5), dtype) if np.dtype(dtype).kind != "u" else data((3, 5), dtype) % 7
    for axis in (np.array(1, I64), np.array(-2, np.int32)):
        # float16 accumulates in float32 (as onnxruntime; onnx.reference sums in float16)
        check("CumSum", {"x": x, "a": axis}, exclusive=exclusive, reverse=reverse, opset=14, rtol=1e-6,
              atol=1e-2 if dtype == np.float16 else 0)


def test_cumsum_opset11_matches_numpy():
    """Oracle: numpy np.cumsum (the position-id pattern: cumsum of an attention mask)."""
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0]], I64)
    got = check("CumSum", {"x": mask, "a": np.array(1, I64)}, opset=11)
    np.testing.assert_array_equal(got[0], np.cumsum(mask, axis=1))


@pytest.mark.parametrize("dtype", ALL + STR)
def test_pad_constant_dtypes(dtype):
    v = data((), dtype, 3)
    check("Pad", {"x": data((2, 3), dtype), "p": np.array([1, 0, 2, 1], I64), "v": v}, opset=13)
    # the default value: '' for strings (onnx.reference pads strings with the int 0)
    check("Pad", {"x": data((2, 3), dtype), "p": np.array([0, 2, 1, 0], I64)}, opset=18, with_ref=dtype is not object)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[1, 2, 2, 1], [0, 0, 3, 2], [-1, 1, 1, -2], [2, 0, 0, 0]])
def test_pad_modes(mode, pads):
    x = data((4, 5), np.float32)
    # negative pads crop: onnx.reference (np.pad) refuses them, onnxruntime is the oracle
    check("Pad", {"x": x, "p": np.array(pads, I64), "v": np.array(1.5, np.float32)}, opset=19, mode=mode,
          with_ref=min(pads) >= 0)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_attribute_form(mode):
    x = data((1, 2, 4, 5), np.float32)
    check("Pad", {"x": x}, opset=2, mode=mode, pads=[0, 0, 1, 2, 0, 0, 2, 1], value=0.5)


@pytest.mark.parametrize("axes", [[1], [-1, 0], [2, 0]])
def test_pad_axes_input(axes):
    x = data((3, 4, 2), np.int64)
    pads = np.array([1] * len(axes) + [2] * len(axes), I64)
    check("Pad", {"x": x, "p": pads, "v": np.array(7, I64), "a": np.array(axes, I64)}, opset=18)
    check("Pad", {"x": x, "p": pads, "v": None, "a": np.array(axes, np.int32)}, opset=19, mode="edge")


def test_pad_matches_numpy():
    """Oracle: numpy np.pad (torch's ReflectionPad2d pattern)."""
    x = data((1, 2, 5, 6), np.float32)
    got = check("Pad", {"x": x, "p": np.array([0, 0, 2, 3, 0, 0, 1, 2], I64)}, opset=13, mode="reflect")
    np.testing.assert_array_equal(got[0], np.pad(x, [(0, 0), (0, 0), (2, 1), (3, 2)], mode="reflect"))


@pytest.mark.parametrize("opset", [9, 11])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("itype,vtype", [(np.int64, np.float32), (np.int32, np.int64), (np.float32, np.float32),
                                         (np.int64, object), (np.uint8, np.int32)])
def test_one_hot(opset, axis, itype, vtype):
    idx = np.array([[1, 9], [2, 4]]) if opset == 9 or itype == np.uint8 else np.array([[1, 9], [-2, 4]])
    vals = np.array(["off", "on"], object) if vtype is object else np.array([2, 5], vtype)
    # string values: onnxruntime only (onnx.reference subtracts them)
    check("OneHot", {"i": idx.astype(itype), "d": np.array(5, I64), "v": vals}, opset=opset, axis=axis,
          with_ref=vtype is not object)


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_dtypes(dtype, upper):
    # strings: the zero is '' (onnx.reference writes the int 0): onnxruntime is the oracle
    check("Trilu", {"x": data((2, 3, 4), dtype)}, opset=14, upper=upper, with_ref=dtype is not object)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("shape,k", [((4, 5), -1), ((4, 5), 2), ((3, 3), -7), ((3, 3), 9), ((1, 5), 0), ((2, 0, 3), 1)])
def test_trilu(upper, shape, k):
    """Oracle also numpy np.triu / np.tril (the causal-mask pattern)."""
    x = data(shape, np.float32)
    got = check("Trilu", {"x": x, "k": np.array(k, I64)}, opset=14, upper=upper)
    np.testing.assert_array_equal(got[0], (np.triu if upper else np.tril)(x, k))


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("shape", [(3, 4), (5,), (2, 0), ()])
def test_nonzero(dtype, shape):
    x = data(shape, dtype)
    if dtype is object and x.size:
        x.reshape(-1)[::2] = ""
    # a scalar counts as shape [1] (onnxruntime; onnx.reference gives [0, n])
    check("NonZero", {"x": x}, opset=13, with_ref=bool(shape))


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("opset", [1, 13, 19, 21])
def test_size(dtype, opset):
    check("Size", {"x": data((2, 3, 0) if opset == 21 else (2, 3), dtype)}, opset=opset, with_ort=opset > 1)


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("k", [0, 1, -2, 7])
def test_eye_like(dtype, k):
    check("EyeLike", {"x": data((3, 4), dtype)}, opset=9, k=k)


def test_eye_like_dtype_attr():
    check("EyeLike", {"x": data((4, 4), np.int32)}, opset=22, dtype=1, k=1)
    check("EyeLike", {"x": data((2, 5), np.float32)}, opset=9, dtype=7)


@pytest.mark.parametrize("dtype", ALL + STR)
def test_compress_dtypes(dtype):
    check("Compress", {"x": data((3, 4), dtype), "c": np.array([True, False, True])}, axis=0, opset=11)


@pytest.mark.parametrize("axis,cond", [(None, [0, 1, 0, 0, 1]), (1, [1, 0]), (-1, [0, 1, 1, 0]), (0, [0, 0, 0])])
def test_compress(axis, cond):
    kw = {} if axis is None else {"axis": axis}
    check("Compress", {"x": data((3, 4), np.float32), "c": np.array(cond, bool)}, opset=11, **kw)


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(dtype, batch_axis, time_axis):
    shape = (4, 3, 2) if batch_axis == 1 else (3, 4, 2)
    check("ReverseSequence", {"x": data(shape, dtype), "l": np.array([4, 1, 2], I64)}, opset=10,
          batch_axis=batch_axis, time_axis=time_axis)


@pytest.mark.parametrize("dtype", ALL + STR)
@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(dtype, mode):
    check("DepthToSpace", {"x": data((2, 8, 3, 2), dtype)}, opset=13, blocksize=2, mode=mode)


def test_depth_to_space_opset1():
    check("DepthToSpace", {"x": data((1, 9, 2, 2), np.float32)}, opset=1, blocksize=3)


@pytest.mark.parametrize("dtype", ALL + STR)
def test_space_to_depth(dtype):
    check("SpaceToDepth", {"x": data((2, 3, 4, 6), dtype)}, opset=13, blocksize=2)


def test_space_to_depth_crd():
    check("SpaceToDepth", {"x": data((1, 2, 4, 4), np.float32)}, opset=28, blocksize=2, mode="CRD", with_ort=False)


def test_gather_scatter_elements_smaller_indices():
    """Oracles: numpy (take_along_axis on data cut to indices' shape; onnx.reference wants equal dims) and
    onnxruntime -- indices may be smaller than data on the other axes."""
    x = data((4, 5, 6), np.float32)
    idx = np.random.default_rng(2).integers(-5, 5, size=(3, 7, 2)).astype(I64)
    got = check("GatherElements", {"x": x, "i": idx}, axis=1, with_ref=False)
    np.testing.assert_array_equal(got[0], np.take_along_axis(x[:3, :, :2], idx % 5, axis=1))
    idx = np.array([[[1, 0], [3, 2]], [[0, 4], [-1, 1]]], I64)
    upd = data(idx.shape, np.float32, 3)
    got = check("ScatterElements", {"x": x, "i": idx, "u": upd}, axis=1, opset=18, reduction="add", with_ref=False)
    want = x.copy()
    np.add.at(want, (np.arange(2)[:, None, None], idx % 5, np.arange(2)[None, None, :]), upd)
    np.testing.assert_allclose(got[0], want, rtol=1e-6)
