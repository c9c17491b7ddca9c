"""Internal NHWC pooling ops (domain com.onnxep) through onnxep.InferenceSession.

Oracle: onnxruntime's CPU provider running the ONNX op of the same name (MaxPool-12, AveragePool-19,
GlobalAveragePool, GlobalMaxPool) on the NCHW-transposed input, its output transposed back to NHWC. The models carry
a com.onnxep node, which onnx.checker would reject (unknown domain): the checker is not called here."""
import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import fallback_nodes, make_model, run_ort
from tests.ops._pool_cases import assert_same

DOMAIN = "com.onnxep"


def _nhwc_model(op_type, x_nhwc, **attrs):
    node = helper.make_node(op_type, ["x"], ["y"], domain=DOMAIN, **attrs)
    g = helper.make_graph([node], "nhwc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_nhwc.shape)],
                          [helper.make_empty_tensor_value_info("y")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid(DOMAIN, 1)],
                             ir_version=8)


def _run(op_type, x_nhwc, **attrs):
    m = _nhwc_model(op_type, x_nhwc, **attrs)
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert fallback_nodes(sess) == [], "the com.onnxep node fell back to the reference backend"
    return sess.run(None, {"x": x_nhwc})


def _ort_nchw(op_type, opset, x_nhwc, **attrs):
    """Oracle: onnxruntime's op on the NCHW-transposed input, output transposed to NHWC."""
    x = np.ascontiguousarray(x_nhwc.transpose(0, 3, 1, 2))
    m = make_model([helper.make_node(op_type, ["x"], ["y"], **attrs)], {"x": x}, ["y"], opset=opset)
    return [np.ascontiguousarray(y.transpose(0, 2, 3, 1)) for y in run_ort(m, {"x": x})]


CASES = []
for k, s, d, ceil, auto_pad, pad in itertools.product(
        (1, 2, 3), (1, 2, 3), (1, 2), (0, 1), ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"), (0, 1, 2)):
    if auto_pad != "NOTSET" and (ceil or d > 1 or pad):
        continue
    if pad >= k or (auto_pad.startswith("SAME") and s > k):
        continue
    CASES.append((k, s, d, ceil, auto_pad, pad))


def _attrs(k, s, d, ceil, auto_pad, pad):
    a = dict(kernel_shape=[k, k + (k > 1 and s == 1)], strides=[s, max(1, s - 1)], dilations=[d, 1], ceil_mode=ceil)
    if auto_pad != "NOTSET":
        a["auto_pad"] = auto_pad
    else:
        a["pads"] = [pad, pad, pad, min(pad + 1, a["kernel_shape"][1] - 1)]   # asymmetric end pad
    return a


@pytest.mark.parametrize("k,s,d,ceil,auto_pad,pad", CASES)
@pytest.mark.parametrize("shape", [(2, 7, 9, 3), (1, 8, 8, 17)])
def test_nhwc_max_pool(k, s, d, ceil, auto_pad, pad, shape):
    """Oracle: onnxruntime MaxPool-12 on the transposed input (exact)."""
    x = np.random.default_rng(k * 10 + s).standard_normal(shape).astype(np.float32)
    a = _attrs(k, s, d, ceil, auto_pad, pad)
    assert_same(_run("NhwcMaxPool", x, **a), _ort_nchw("MaxPool", 12, x, **a), rtol=0, atol=0)


@pytest.mark.parametrize("k,s,d,ceil,auto_pad,pad", CASES)
@pytest.mark.parametrize("cip", [0, 1])
def test_nhwc_average_pool(k, s, d, ceil, auto_pad, pad, cip):
    """Oracle: onnxruntime AveragePool-19 on the transposed input (count_include_pad counts the pads, never the
    ceil_mode overhang)."""
    x = np.random.default_rng(k * 10 + s + cip).standard_normal((2, 7, 9, 17)).astype(np.float32)
    a = _attrs(k, s, d, ceil, auto_pad, pad)
    a["count_include_pad"] = cip
    assert_same(_run("NhwcAveragePool", x, **a), _ort_nchw("AveragePool", 19, x, **a))


def test_nhwc_pool_defaults():
    """Oracle: onnxruntime MaxPool-12 / AveragePool-19 with only kernel_shape given (the class-attribute defaults:
    strides 1, no pads, dilations 1, NOTSET, floor, count_include_pad 0); storage_order is accepted and ignored."""
    x = np.random.default_rng(5).standard_normal((1, 6, 5, 33)).astype(np.float32)
    assert_same(_run("NhwcMaxPool", x, kernel_shape=[2, 3], storage_order=1),
                _ort_nchw("MaxPool", 12, x, kernel_shape=[2, 3]), rtol=0, atol=0)
    assert_same(_run("NhwcAveragePool", x, kernel_shape=[3, 2]), _ort_nchw("AveragePool", 19, x, kernel_shape=[3, 2]))


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (2, 7, 9, 3), (1, 56, 56, 130), (3, 5, 4, 17)])
def test_nhwc_global_pool(op, shape):
    """Oracle: onnxruntime GlobalAveragePool / GlobalMaxPool on the transposed input."""
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32) + 3.0
    got = _run("Nhwc" + op, x)
    assert got[0].shape == (shape[0], 1, 1, shape[3])
    assert_same(got, _ort_nchw(op, 13, x))


def test_nhwc_pool_unsupported_goes_elsewhere():
    """Oracle: the op's supports(): a 3-D kernel, an Indices output or a float64 input is refused by the cpu
    backend (and then no backend runs it: the session says so)."""
    from onnxep.errors import NotImplemented as OnnxepNotImplemented
    x = np.zeros((1, 4, 4, 3), np.float32)
    for m in (_nhwc_model("NhwcMaxPool", x, kernel_shape=[2, 2, 2]),):
        with pytest.raises(OnnxepNotImplemented):
            onnxep.InferenceSession(m.SerializeToString())
    node = helper.make_node("NhwcMaxPool", ["x"], ["y", "i"], domain=DOMAIN, kernel_shape=[2, 2])
    g = helper.make_graph([node], "nhwc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_empty_tensor_value_info("y"), helper.make_empty_tensor_value_info("i")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid(DOMAIN, 1)])
    with pytest.raises(OnnxepNotImplemented):
        onnxep.InferenceSession(m.SerializeToString())
    node = helper.make_node("NhwcGlobalMaxPool", ["x"], ["y"], domain=DOMAIN)
    g = helper.make_graph([node], "nhwc", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, x.shape)],
                          [helper.make_empty_tensor_value_info("y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid(DOMAIN, 1)])
    with pytest.raises(OnnxepNotImplemented):
        onnxep.InferenceSession(m.SerializeToString())
