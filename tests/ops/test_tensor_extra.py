"""CumProd (and CumSum, which shares its code), Unique, CenterCropPad, TensorScatter and Det on the cpu backend (the
fallback off). Oracles: onnxruntime where it has the kernel for the dtype (tests/ops/_tensor_cases.check asks it) and
onnx.reference (every case but the ones marked: its float16 CumProd accumulates in float16)."""
import ml_dtypes
import numpy as np
import pytest

from onnxep.errors import Fail, InvalidArgument
from tests.ops._tensor_cases import check, cpu_session, data, model, ort, reference, same

I64, I32 = np.int64, np.int32
BF16 = np.dtype(ml_dtypes.bfloat16)
T = 2 ** 40


def _bad(op, ok, bad, match, opset, n_out=1, **attrs):
    """bad inputs raise `match` (InvalidArgument or Fail by the message) naming the node; the session still runs."""
    m = model(op, ok, n_out, opset=opset, **attrs)
    for i in m.graph.input:         # any rank
        i.type.tensor_type.ClearField("shape")
    sess = cpu_session(m)
    want = sess.run(None, ok)
    for b in bad:
        with pytest.raises((InvalidArgument, Fail), match=rf"{op} node '{op.lower()}_0'.*{match}"):
            sess.run(None, b)
    for a, w in zip(sess.run(None, ok), want):
        np.testing.assert_array_equal(a, w)


# ------------------------------------------------------------------------------------------------ CumProd / CumSum
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cum_prod(dtype, exclusive, reverse, axis):
    x = (np.arange(24).reshape(2, 3, 4) % 5 + 1).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x = x * np.asarray(0.5, dtype) - np.asarray(1, dtype)
    for at in (I64, I32):
        check("CumProd", {"x": x, "a": np.array(axis, at)}, opset=26, exclusive=exclusive, reverse=reverse)
    check("CumSum", {"x": x, "a": np.array(axis, I64)}, opset=14, exclusive=exclusive, reverse=reverse)


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 1)])
def test_cum_prod_half_types(exclusive, reverse):
    """float16 / bfloat16 accumulate in float32 and round once (onnxruntime, float16: within float16 rounding);
    bfloat16 against the float32 result rounded."""
    x = (np.arange(12).reshape(3, 4) % 4 * 0.25 + 0.75).astype(np.float16)
    a = np.array(1, I64)
    check("CumProd", {"x": x, "a": a}, opset=26, exclusive=exclusive, reverse=reverse, with_ref=False, rtol=1e-3)
    xb = x.astype(BF16)
    got = cpu_session(model("CumProd", {"x": xb, "a": a}, opset=26, exclusive=exclusive, reverse=reverse)).run(
        None, {"x": xb, "a": a})[0]
    want = cpu_session(model("CumProd", {"x": xb.astype(np.float32), "a": a}, opset=26, exclusive=exclusive,
                             reverse=reverse)).run(None, {"x": xb.astype(np.float32), "a": a})[0]
    assert got.dtype == BF16
    np.testing.assert_array_equal(got, want.astype(BF16))


def test_cum_prod_empty_and_bad():
    check("CumProd", {"x": np.zeros((2, 0), np.float32), "a": np.array(1, I64)}, opset=26)
    x = data((2, 3), np.float32)
    _bad("CumProd", {"x": x, "a": np.array(1, I64)}, [{"x": x, "a": np.array(2, I64)},
                                                      {"x": x, "a": np.array([0, 1], I64)}], "axis", 26)


# ------------------------------------------------------------------------------------------------ Unique
U_DTYPES = [np.float32, np.float64, np.int64, np.int32, np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64,
            np.float16, np.bool_, object]


def _unique_oracle(x, sorted_, axis):
    """Unique in plain Python: a dict of first occurrences of the elements (axis None) or slices (as tuples)."""
    items = x.reshape(-1).tolist() if axis is None else [tuple(s.reshape(-1).tolist()) for s in np.moveaxis(x, axis, 0)]
    first = {}
    for i, it in enumerate(items):
        first.setdefault(it, i)
    keys = sorted(first) if sorted_ else list(first)
    pos = {k: j for j, k in enumerate(keys)}
    idx = np.array([first[k] for k in keys], I64)
    inv = np.array([pos[it] for it in items], I64)
    counts = np.bincount(inv, minlength=len(keys)).astype(I64)
    y = np.take(x.reshape(-1), idx) if axis is None else np.take(x, idx, axis=axis)
    return [y, idx, inv, counts]


def _check_unique(x, sorted_, axis=None, opset=11):
    """Oracles: the plain-Python one always; onnxruntime when it has the kernel and onnx.reference for sorted=1 only
    (with sorted=0 it takes the slices along axis 0 of the unflattened input), neither for strings with an axis."""
    attrs = {} if axis is None else {"axis": axis}
    ins = {"x": x}
    for n_out in (4, 1):
        m = model("Unique", ins, n_out, opset=opset, sorted=sorted_, **attrs)
        got = cpu_session(m).run(None, ins)
        same(got, _unique_oracle(x, sorted_, axis)[:n_out])
        if x.dtype == object and axis is not None:
            continue
        want = ort(m, ins)
        if want is not None:
            same(got, want)
        if sorted_:
            same(got, reference(m, ins))


@pytest.mark.parametrize("dtype", U_DTYPES)
@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_unique(dtype, sorted_, axis):
    x = data((4, 6), dtype) if dtype is not object else np.array(["b", "a", "", "b", "c", "a"] * 4, object)
    x = x.reshape(4, 6)
    x = np.concatenate([x, x[:, :2]], axis=1)      # repeated columns
    x = np.concatenate([x[:1], x, x[2:3]], axis=0)  # repeated rows
    _check_unique(x, sorted_, axis)


def test_unique_examples_and_shapes():
    _check_unique(np.array([2, 1, 1, 3, 4, 3], np.float32), 0)
    x = np.array([[[1, 1], [0, 1], [2, 1], [0, 1]], [[1, 1], [0, 1], [2, 1], [0, 1]]], np.float32)
    _check_unique(x, 1, 1)
    _check_unique(np.array(5, I64), 1)                  # a scalar
    _check_unique(np.zeros((0,), np.float32), 0)
    for s in (0, 1):
        _check_unique(data((3, 4, 2), np.int64) % 2, s, 2)
        _check_unique(data((3, 4, 2), np.float32) % 2, s, -2)
    xb = np.array([[1.5, 0.25, 1.5], [2, 0.25, 1.5]], np.float32).astype(BF16)
    got = cpu_session(model("Unique", {"x": xb}, 4, opset=28, sorted=0)).run(None, {"x": xb})
    want = _unique_oracle(xb.astype(np.float32), 0, None)
    want[0] = want[0].astype(BF16)
    same(got, want)


def test_unique_bad_axis():
    x = data((2, 3), np.float32)
    _bad("Unique", {"x": x}, [{"x": data((3,), np.float32)}], "axis 1 is out of range", 11, axis=1)


# ------------------------------------------------------------------------------------------------ CenterCropPad
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int8, np.int64, np.uint16, np.bool_, object])
@pytest.mark.parametrize("shape,axes", [([3, 5, 2], None), ([6, 1, 4], None), ([2, 7], [0, -1]), ([5], [1]),
                                        ([4, 5, 3], None), ([0, 3], [1, 2])])
def test_center_crop_pad(dtype, shape, axes):
    x = data((4, 5, 3), dtype)
    attrs = {} if axes is None else {"axes": axes}
    for st in (I64, I32):   # onnxruntime's function body fails on an int32 shape; it has no string kernel
        ins = {"x": x, "s": np.array(shape, st)}
        if dtype is not object:
            check("CenterCropPad", ins, opset=18, with_ort=st is I64, **attrs)
            continue
        m = model("CenterCropPad", ins, opset=18, **attrs)
        want = reference(m, ins)[0]     # it pads strings with the int 0: the spec's zero of a string is ""
        want[np.equal(want, 0)] = ""
        same(cpu_session(m).run(None, ins), [want])


def test_center_crop_pad_bad_and_bomb():
    x = data((2, 3), np.float32)
    ok = {"x": x, "s": np.array([4, 1], I64)}
    _bad("CenterCropPad", ok, [{"x": x, "s": np.array([4], I64)}], "one value per axis", 18)
    _bad("CenterCropPad", ok, [{"x": x, "s": np.array([-1, 2], I64)}], "negative size", 18)
    _bad("CenterCropPad", ok, [{"x": x, "s": np.array([T, T], I64)}], r"shape \(.*over the", 18)


# ------------------------------------------------------------------------------------------------ TensorScatter
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.int64, np.uint32, np.bool_, np.float64])
@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis,shape", [(-2, (2, 3, 6, 4)), (1, (2, 6, 3)), (2, (3, 2, 6)), (-1, (2, 6))])
def test_tensor_scatter(dtype, mode, axis, shape):
    past = data(shape, dtype)
    us = list(shape)
    us[axis] = 3
    upd = data(tuple(us), dtype, seed=1)
    w = np.array([0, 3, 2][:shape[0]], I64) if mode == "linear" else np.array([5, 1, 4][:shape[0]], I64)
    check("TensorScatter", {"p": past, "u": upd, "w": w}, opset=24, mode=mode, axis=axis)
    check("TensorScatter", {"p": past, "u": upd, "w": None}, opset=24, mode=mode, axis=axis)


def test_tensor_scatter_exotic_and_strings():
    """float8 / int4 / strings: data movement only (onnx.reference)."""
    for dt in (np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.int4), np.dtype(object)):
        past = data((2, 5, 3), np.float32).astype(dt) if dt != object else data((2, 5, 3), object)
        upd = data((2, 2, 3), np.float32, 1).astype(dt) if dt != object else data((2, 2, 3), object, 1)
        ins = {"p": past, "u": upd, "w": np.array([1, 3], I64)}
        m = model("TensorScatter", ins, opset=24, axis=1)
        same(cpu_session(m).run(None, ins), reference(m, ins))


def test_tensor_scatter_bad():
    p, u = data((2, 4, 3), np.float32), data((2, 2, 3), np.float32)
    ok = {"p": p, "u": u, "w": np.array([0, 2], I64)}
    _bad("TensorScatter", ok, [{"p": p, "u": u, "w": np.array([0, 3], I64)},
                               {"p": p, "u": u, "w": np.array([-1, 0], I64)}], "write_indices", 24, axis=1)
    _bad("TensorScatter", ok, [{"p": p, "u": data((2, 5, 3), np.float32), "w": np.array([0, 0], I64)},
                               {"p": p, "u": data((2, 2, 2), np.float32), "w": np.array([0, 0], I64)}],
         "update", 24, axis=1)
    _bad("TensorScatter", ok, [{"p": p, "u": u, "w": np.array([0, 0, 0], I64)}], "must have shape", 24, axis=1)


# ------------------------------------------------------------------------------------------------ Det
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 3, 1, 1), (0, 2, 2), (2, 0, 0), (5, 5)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_det(shape, dtype):
    x = data(shape, np.float32).astype(dtype) / 4
    tol = {np.float32: 1e-5, np.float64: 1e-12, np.float16: 2e-3}[dtype]
    check("Det", {"x": x}, opset=22, rtol=tol, atol=tol, with_ref=dtype is not np.float16)
    if dtype is np.float32:
        check("Det", {"x": x}, opset=11, rtol=tol, atol=tol)


def test_det_bfloat16():
    x = (data((2, 3, 3), np.float32) / 4).astype(BF16)
    got = cpu_session(model("Det", {"x": x}, opset=22)).run(None, {"x": x})[0]
    assert got.dtype == BF16 and got.shape == (2,)
    np.testing.assert_array_equal(got, np.linalg.det(x.astype(np.float32)).astype(BF16))


def test_det_bad():
    x = data((2, 2), np.float32)
    _bad("Det", {"x": x}, [{"x": data((2, 3), np.float32)}, {"x": data((3,), np.float32)}], r"\[\*, M, M\]", 22)
