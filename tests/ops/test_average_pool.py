"""AveragePool on the cpu backend.

Oracles: onnxruntime's CPU provider for every case, and onnx.reference.ReferenceEvaluator as well except where it is
known to leave the spec (onnx 1.23.2): under ceil_mode, when the last window overhangs the padded input by >= 2 pixels,
it pads half of that overhang at the *beginning* and so shifts every window (measured: 1-D input 1..7, kernel 3,
stride 3, ceil_mode gives [1.5, 4, 6] instead of [2, 5, 7])."""
import itertools

import numpy as np
import pytest

from tests._util import run_ort, run_reference
from tests.ops._pool_cases import SHAPES, assert_same, oracles, run_pool

CASES = []
for rank, k, s, d, ceil, auto_pad, pad, cip in itertools.product(
        (1, 2, 3), (1, 2, 3), (1, 2, 3), (1, 2), (0, 1), ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), (0, 1),
        (0, 1)):
    if auto_pad != "NOTSET" and (ceil or d > 1 or pad):
        continue
    if pad >= k or (auto_pad.startswith("SAME") and s > k):
        continue
    if rank == 3 and (k == 1 or d == 2 and s == 3):
        continue
    CASES.append((rank, k, s, d, ceil, auto_pad, pad, cip))


def _attrs(rank, k, s, d, ceil, auto_pad, pad, cip, opset):
    a = dict(kernel_shape=[k] * rank, strides=[s] * rank)
    if opset >= 7:
        a["count_include_pad"] = cip
    if opset >= 10:
        a["ceil_mode"] = ceil
    if opset >= 19:
        a["dilations"] = [d] * rank
    if auto_pad != "NOTSET":
        a["auto_pad"] = auto_pad
    else:
        a["pads"] = [pad] * rank + [pad] * (rank - 1) + [min(pad + 1, k - 1)]
    return a


def _reference_follows_spec(a, x_shape, y_shape):
    if not a.get("ceil_mode"):
        return True
    r = len(a["kernel_shape"])
    pads = a.get("pads", [0] * 2 * r)
    for i in range(r):
        sw = (a["kernel_shape"][i] - 1) * a.get("dilations", [1] * r)[i] + 1
        extra = (y_shape[2 + i] - 1) * a["strides"][i] + sw - x_shape[2 + i] - pads[i] - pads[r + i]
        if extra >= 2:
            return False
    return True


@pytest.mark.parametrize("rank,k,s,d,ceil,auto_pad,pad,cip", CASES)
def test_averagepool_grid(rank, k, s, d, ceil, auto_pad, pad, cip):
    rng = np.random.default_rng(rank * 100 + k * 10 + s)
    x = rng.standard_normal(SHAPES[rank]).astype(np.float32)
    a = _attrs(rank, k, s, d, ceil, auto_pad, pad, cip, 19)
    m, got = run_pool("AveragePool", x, 19, **a)
    ort, ref = oracles(m, x)
    assert_same(got, ort)
    if _reference_follows_spec(a, x.shape, got[0].shape):
        assert_same(got, ref())


def test_averagepool_reference_divergence_is_the_documented_one():
    """The case named in the module docstring: onnxruntime is the oracle (and the reference does differ)."""
    x = (np.arange(7, dtype=np.float32) + 1).reshape(1, 1, 7)
    for cip in (0, 1):
        m, got = run_pool("AveragePool", x, 19, kernel_shape=[3], strides=[3], ceil_mode=1, count_include_pad=cip)
        ort, ref = oracles(m, x)
        assert_same(got, ort)
        np.testing.assert_allclose(got[0].ravel(), [2, 5, 7])
        assert not np.allclose(ref()[0], got[0])


@pytest.mark.parametrize("opset", [7, 10, 11, 19])
@pytest.mark.parametrize("cip", [0, 1])
def test_averagepool_opsets(opset, cip):
    """Oracle: onnx.reference and onnxruntime."""
    x = np.random.default_rng(opset).standard_normal((1, 4, 8, 7)).astype(np.float32)
    m, got = run_pool("AveragePool", x, opset, **_attrs(2, 3, 2, 1, 0, "NOTSET", 1, cip, opset))
    assert_same(got, run_reference(m, {"x": x}))
    assert_same(got, run_ort(m, {"x": x}))


def test_averagepool_opset1_excludes_pads():
    """AveragePool-1 has no count_include_pad; its spec divides by the number of elements excluding pads.
    Oracle: onnxruntime running the same node at opset 7 with count_include_pad=0 (onnxruntime has no AveragePool-1
    kernel, and onnx.reference pads with zeros there because it reads the absent attribute as None)."""
    x = np.random.default_rng(1).standard_normal((1, 4, 8, 7)).astype(np.float32)
    a = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 2])
    _, got = run_pool("AveragePool", x, 1, **a)
    m7, _ = run_pool("AveragePool", x, 7, count_include_pad=0, **a)
    assert_same(got, run_ort(m7, {"x": x}))


def test_averagepool_large_parallel():
    """Large enough for the multi-threaded path. Oracle: onnxruntime."""
    x = np.random.default_rng(3).standard_normal((2, 16, 33, 35)).astype(np.float32)
    for cip in (0, 1):
        m, got = run_pool("AveragePool", x, 19, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                          count_include_pad=cip, ceil_mode=1)
        assert_same(got, oracles(m, x)[0])


@pytest.mark.parametrize("op", ["AveragePool", "MaxPool"])
@pytest.mark.parametrize("n,k,s,cip", [(4, 128, 128, 1), (7, 9, 9, 0), (5, 6, 2, 1), (7, 8, 3, 0)])
def test_ceil_mode_kernel_larger_than_input(op, n, k, s, cip):
    """ceil_mode=1 with a kernel larger than the input (transformers' EfficientNet pooler: kernel = hidden_dim on a
    7x7 map): one window over the whole input, as onnxruntime counts it (oracle: onnxruntime)."""
    x = np.random.default_rng(n * k).standard_normal((2, 3, n, n)).astype(np.float32)
    attrs = dict(kernel_shape=[k, k], strides=[s, s], ceil_mode=1)
    if op == "AveragePool":
        attrs["count_include_pad"] = cip
    m, got = run_pool(op, x, 19, **attrs)
    want, _ = oracles(m, x)
    assert got[0].shape == (2, 3, 1, 1)
    assert_same(got, want)
