"""MaxPool on the cpu backend.

Oracles: onnxruntime's CPU provider for every case, and onnx.reference.ReferenceEvaluator as well wherever it follows
the spec. It does not in these measured cases (onnx 1.23.2), where onnxruntime is the only oracle: with strides and
dilations all 1 it takes a generic path that gets Indices, ceil_mode with pads and 1-D/3-D auto_pad wrong, and for
SAME_LOWER with strides > 1 it sizes the output floor(in / s) instead of the spec's ceil(in / s)."""
import itertools

import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import make_model, fallback_nodes
from tests.ops._pool_cases import SHAPES, assert_same, oracles, run_pool

CASES = []
for rank, k, s, d, ceil, auto_pad, pad in itertools.product(
        (1, 2, 3), (1, 2, 3), (1, 2, 3), (1, 2), (0, 1), ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), (0, 1)):
    if auto_pad != "NOTSET" and (ceil or d > 1 or pad):
        continue
    if pad >= k or (auto_pad.startswith("SAME") and s > k):
        continue
    if rank == 3 and (k == 1 or d == 2 and s == 3):
        continue  # keep the 3-D grid small
    CASES.append((rank, k, s, d, ceil, auto_pad, pad))


def _attrs(rank, k, s, d, ceil, auto_pad, pad, opset):
    a = dict(kernel_shape=[k] * rank, strides=[s] * rank)
    if opset >= 10:
        a["dilations"] = [d] * rank
        a["ceil_mode"] = ceil
    if auto_pad != "NOTSET":
        a["auto_pad"] = auto_pad
    else:
        # asymmetric: one more at the end of the last dim when allowed
        a["pads"] = [pad] * rank + [pad] * (rank - 1) + [min(pad + 1, k - 1)]
    return a


def _reference_follows_spec(s, d, auto_pad):
    strided = s > 1 or d > 1
    return strided and auto_pad != "SAME_LOWER"


@pytest.mark.parametrize("rank,k,s,d,ceil,auto_pad,pad", CASES)
@pytest.mark.parametrize("with_indices", [False, True])
def test_maxpool_grid(rank, k, s, d, ceil, auto_pad, pad, with_indices):
    rng = np.random.default_rng(rank * 100 + k * 10 + s)
    x = rng.standard_normal(SHAPES[rank]).astype(np.float32)
    m, got = run_pool("MaxPool", x, 12, 2 if with_indices else 1, **_attrs(rank, k, s, d, ceil, auto_pad, pad, 12))
    ort, ref = oracles(m, x)
    assert_same(got, ort, rtol=0, atol=0)
    if _reference_follows_spec(s, d, auto_pad):
        assert_same(got, ref(), rtol=0, atol=0)


@pytest.mark.parametrize("opset", [1, 8, 10, 11, 12])
def test_maxpool_opsets(opset):
    """Oracle: onnx.reference and onnxruntime (strided case, where both follow the spec)."""
    x = np.random.default_rng(opset).standard_normal((1, 4, 8, 7)).astype(np.float32)
    m, got = run_pool("MaxPool", x, opset, **_attrs(2, 3, 2, 1, 0, "NOTSET", 1, opset))
    ort, ref = oracles(m, x)
    assert_same(got, ort, rtol=0, atol=0)
    assert_same(got, ref(), rtol=0, atol=0)


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("kernel,strides", [((2, 3, 2), (1, 2, 1)), ((3, 1, 2), (2, 1, 3))])
def test_maxpool_storage_order_1(rank, kernel, strides):
    """Indices in column-major order. Oracle: onnxruntime (2-D; 3-D as well) and onnx.reference when strided."""
    x = np.random.default_rng(7).standard_normal(SHAPES[rank]).astype(np.float32)
    a = dict(kernel_shape=list(kernel[:rank]), strides=list(strides[:rank]), storage_order=1)
    m, got = run_pool("MaxPool", x, 12, 2, **a)
    ort, ref = oracles(m, x)
    assert_same(got, ort, rtol=0, atol=0)
    if max(strides[:rank]) > 1:
        assert_same(got, ref(), rtol=0, atol=0)


def test_maxpool_ties_first_max_wins():
    """Constant input: every window's max is a tie; Indices must name the first tap. Oracle: onnxruntime."""
    x = np.ones((1, 2, 5, 5), np.float32)
    m, got = run_pool("MaxPool", x, 12, 2, kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 0, 0])
    ort, _ = oracles(m, x)
    assert_same(got, ort, rtol=0, atol=0)


def test_maxpool_size_one_and_large_parallel():
    """1x1 spatial input, and an input large enough to take the multi-threaded path. Oracle: onnxruntime."""
    x = np.random.default_rng(1).standard_normal((1, 1, 1, 1)).astype(np.float32)
    m, got = run_pool("MaxPool", x, 12, 2, kernel_shape=[1, 1])
    assert_same(got, oracles(m, x)[0], rtol=0, atol=0)
    x = np.random.default_rng(2).standard_normal((2, 16, 33, 35)).astype(np.float32)
    m, got = run_pool("MaxPool", x, 12, 2, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    assert_same(got, oracles(m, x)[0], rtol=0, atol=0)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[2, 2], pads=[2, 0, 0, 0]),                       # pad >= kernel
    dict(kernel_shape=[2, 2], auto_pad="SAME_UPPER", ceil_mode=1),     # ceil_mode with auto_pad
    dict(kernel_shape=[2, 2], auto_pad="SAME_UPPER", dilations=[2, 2]),
    dict(kernel_shape=[2, 2], strides=[3, 3], auto_pad="SAME_UPPER"),  # negative total pad on 9
    dict(kernel_shape=[2, 2], storage_order=2),
])
def test_maxpool_refused_cases_fall_back(attrs):
    """supports() refuses what it does not implement exactly; the node then runs on the reference backend."""
    x = np.zeros((1, 1, 7, 9), np.float32)
    m = make_model([helper.make_node("MaxPool", ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=12)
    sess = onnxep.InferenceSession(m.SerializeToString())  # not run: onnx.reference may reject some of these
    assert len(fallback_nodes(sess)) == 1
