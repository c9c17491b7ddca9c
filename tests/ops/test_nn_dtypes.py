"""The numpy paths of the float32-native nn kernels: Conv, MaxPool (+ int8 / uint8, Indices), AveragePool,
GlobalAveragePool / GlobalMaxPool, BatchNormalization, LRN, LayerNormalization in float16 / float64. Oracle:
onnxruntime's float32 result on the same values (every value of these inputs is exact in float32), and for
BatchNormalization with mixed types (opset 15) numpy."""
import numpy as np
import pytest

from tests._util import cpu_only_options, fallback_nodes, make_model, run_onnxep, run_ort
from tests.ops._eltshape import node, rand

FLOATS = [np.float16, np.float64]


def _check(n, feeds, opset, dtype, inits=None, n_out=1, tol=None):
    m = make_model([n], feeds, list(n.output)[:n_out], opset=opset, initializers=inits)
    got, sess = run_onnxep(m, feeds, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    f32 = {k: v.astype(np.float32) for k, v in feeds.items()}
    i32 = {k: v.astype(np.float32) for k, v in (inits or {}).items()}
    want = run_ort(make_model([n], f32, list(n.output)[:n_out], opset=opset, initializers=i32), f32)
    if tol is None:
        tol = 1e-2 if dtype == np.float16 else 1e-5
    for g, w in zip(got, want):
        assert g.shape == w.shape
        if w.dtype == np.int64:
            np.testing.assert_array_equal(g, w)
            continue
        assert g.dtype == dtype
        np.testing.assert_allclose(g.astype(np.float32), w, rtol=tol, atol=tol)
    return got


CONV = [  # x shape, w shape, attributes
    ((2, 3, 7, 6), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 4, 8, 7), (6, 2, 3, 2), {"group": 2, "strides": [2, 1], "dilations": [1, 2]}),
    ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((2, 3, 9), (2, 3, 4), {"pads": [2, 1]}),
    ((1, 2, 4, 5, 4), (3, 2, 2, 3, 2), {"strides": [1, 2, 1]}),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("xs,ws,attrs", CONV)
def test_conv(xs, ws, attrs, dtype, bias):
    feeds = {"x": rand(xs, 0, dtype)}
    inits = {"w": rand(ws, 1, dtype)}
    ins = ["x", "w"]
    if bias:
        inits["b"] = rand((ws[0],), 2, dtype)
        ins.append("b")
    _check(node("Conv", ins, ["y"], **attrs), feeds, 17, dtype, inits)


POOL = [
    ((1, 2, 7, 6), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((2, 3, 8, 7), {"kernel_shape": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 9), {"kernel_shape": [3], "strides": [2], "pads": [1, 0]}),
    ((1, 2, 4, 5, 4), {"kernel_shape": [2, 2, 2]}),
]


@pytest.mark.parametrize("dtype", FLOATS + [np.int8, np.uint8])
@pytest.mark.parametrize("xs,attrs", POOL)
def test_max_pool(xs, attrs, dtype):
    x = rand(xs, 0, np.float32) * 30
    x = np.round(x).astype(dtype) if dtype in (np.int8, np.uint8) else x.astype(dtype)
    if dtype == np.uint8:
        x = (np.random.default_rng(0).permutation(x.size) % 256).reshape(xs).astype(np.uint8)
    _check(node("MaxPool", ["x"], ["y"], **attrs), {"x": x}, 12, dtype)


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("dtype", FLOATS)
def test_max_pool_indices(dtype, storage_order):
    x = rand((2, 3, 7, 6), 0, dtype)
    n = node("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 1],
             storage_order=storage_order)
    _check(n, {"x": x}, 12, dtype, n_out=2)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("xs,attrs", POOL[:1] + POOL[2:])
def test_average_pool(xs, attrs, count_include_pad, dtype):
    _check(node("AveragePool", ["x"], ["y"], count_include_pad=count_include_pad, **attrs),
           {"x": rand(xs, 0, dtype)}, 19, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("xs", [(2, 3, 4, 5), (1, 2, 7), (1, 2, 3, 2, 2)])
def test_global_pool(xs, op, dtype):
    _check(node(op, ["x"], ["y"]), {"x": rand(xs, 0, dtype)}, 13, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("opset", [9, 14, 15])
def test_batch_normalization(opset, dtype):
    C = 3
    feeds = {"x": rand((2, C, 4, 5), 0, dtype)}
    inits = {"s": rand((C,), 1, dtype), "b": rand((C,), 2, dtype), "m": rand((C,), 3, dtype),
             "v": np.abs(rand((C,), 4, dtype)) + 0.5}
    _check(node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], epsilon=1e-3), feeds, opset, dtype, inits)


def test_batch_normalization_mixed_types():
    """Oracle: numpy -- opset 15 with float32 X, float16 scale / bias and float64 mean / var."""
    C = 4
    x = rand((2, C, 3), 0)
    s, b = rand((C,), 1, np.float16), rand((C,), 2, np.float16)
    mu, var = rand((C,), 3, np.float64), np.abs(rand((C,), 4, np.float64)) + 0.5
    m = make_model([node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])], {"x": x}, ["y"], opset=15,
                   initializers={"s": s, "b": b, "m": mu, "v": var})
    got, sess = run_onnxep(m, {"x": x}, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    want = (x - mu[:, None]) / np.sqrt(var[:, None] + 1e-5) * s[:, None].astype(np.float64) + b[:, None]
    assert got[0].dtype == np.float32
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn(size, dtype):
    _check(node("LRN", ["x"], ["y"], size=size, alpha=1e-2, beta=0.75, bias=1.5), {"x": rand((2, 5, 3, 4), 0, dtype)},
           13, dtype)


@pytest.mark.parametrize("size", [2, 4])
def test_lrn_even_size(size):
    """Oracle: onnxep's native float32 kernel (onnxruntime refuses an even size)."""
    x = rand((2, 6, 3, 4), 0, np.float64)
    n = node("LRN", ["x"], ["y"], size=size, alpha=1e-2, beta=0.75, bias=1.5)
    got = run_onnxep(make_model([n], {"x": x}, ["y"], opset=13), {"x": x}, sess_options=cpu_only_options())[0][0]
    x32 = x.astype(np.float32)
    want = run_onnxep(make_model([n], {"x": x32}, ["y"], opset=13), {"x": x32})[0][0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("axis,sshape", [(-1, (6,)), (1, (4, 6)), (2, (6,))])
def test_layer_normalization(axis, sshape, dtype):
    feeds = {"x": rand((2, 4, 6), 0, dtype) * 2 + 1}
    inits = {"s": rand(sshape, 1, dtype), "b": rand(sshape, 2, dtype)}
    got = _check(node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv"], axis=axis, epsilon=1e-3), feeds,
                 17, dtype, inits, n_out=1)
    assert got[0].dtype == dtype
