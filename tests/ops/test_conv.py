"""Conv op. Oracles: onnx.reference (spec), onnxruntime (auto_pad/shape parity); packed vs unpacked weight paths."""
import numpy as np
import pytest
from onnx import helper

from tests._util import fallback_nodes, make_model, run_onnxep, run_ort, run_reference
from tests.ops._packing import assert_packing_modes_agree

EPS = float(np.finfo(np.float32).eps)

# (name, x shape, w shape, attrs, bias)
CASES = [
    ("1x1", (1, 3, 5, 5), (4, 3, 1, 1), {}, True),
    ("1x1_batch", (2, 8, 7, 3), (5, 8, 1, 1), {}, False),
    ("3x3", (1, 2, 6, 7), (3, 2, 3, 3), {}, True),
    ("3x3_pad", (2, 3, 8, 8), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, True),
    ("asym_pad", (1, 2, 7, 6), (3, 2, 3, 2), {"pads": [0, 2, 1, 1]}, True),
    ("stride", (1, 3, 9, 10), (2, 3, 3, 3), {"strides": [2, 3], "pads": [1, 0, 1, 2]}, False),
    ("dilation", (1, 2, 9, 9), (3, 2, 3, 3), {"dilations": [2, 3], "pads": [2, 1, 2, 3]}, True),
    ("group2", (2, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, True),
    ("depthwise", (2, 5, 7, 6), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]}, True),
    ("depthwise_mult2", (1, 3, 6, 6), (6, 1, 3, 3), {"group": 3, "strides": [2, 2]}, False),
    ("depthwise_dil", (1, 4, 9, 8), (4, 1, 3, 2), {"group": 4, "dilations": [2, 2], "pads": [0, 1, 2, 0]}, True),
    ("dw_same_big", (1, 16, 30, 33), (16, 1, 3, 3), {"group": 16, "pads": [1, 1, 1, 1]}, True),
    ("dw_same_asym", (2, 3, 7, 6), (3, 1, 3, 3), {"group": 3, "pads": [2, 0, 0, 2]}, True),
    ("dw_same_upper", (1, 4, 8, 9), (8, 1, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER"}, False),
    ("dw_s2_odd", (1, 8, 9, 11), (8, 1, 3, 3), {"group": 8, "strides": [2, 2], "pads": [1, 1, 1, 1]}, True),
    ("dw_s2_valid", (1, 4, 7, 8), (4, 1, 3, 3), {"group": 4, "strides": [2, 2]}, True),
    ("dw_s2_mult3", (2, 2, 10, 9), (6, 1, 3, 3), {"group": 2, "strides": [2, 2], "pads": [0, 1, 1, 0]}, True),
    ("dw_tiny", (1, 3, 1, 2), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}, True),
    ("dw_5x5", (1, 6, 14, 15), (6, 1, 5, 5), {"group": 6, "pads": [2, 2, 2, 2]}, True),
    ("dw_5x5_s2", (1, 6, 14, 15), (6, 1, 5, 5), {"group": 6, "pads": [2, 2, 2, 2], "strides": [2, 2]}, False),
    ("dw_3d", (1, 2, 3, 5, 6), (2, 1, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1, 1, 1]}, True),
    ("same_upper", (1, 3, 7, 8), (2, 3, 3, 4), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}, True),
    ("same_lower", (1, 3, 7, 8), (2, 3, 4, 3), {"auto_pad": "SAME_LOWER"}, True),
    ("same_dilated", (1, 2, 9, 8), (3, 2, 3, 2), {"auto_pad": "SAME_UPPER", "dilations": [2, 3]}, True),
    ("same_lower_stride", (2, 2, 9, 10), (3, 2, 2, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 3]}, False),
    ("valid", (1, 3, 7, 8), (2, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 1]}, False),
    ("kernel_shape", (1, 2, 5, 5), (2, 2, 2, 3), {"kernel_shape": [2, 3]}, True),
    ("odd_sizes", (3, 7, 11, 13), (9, 7, 5, 3), {"strides": [1, 2], "pads": [2, 1, 2, 1]}, True),
    ("one_pixel", (1, 1, 1, 1), (1, 1, 1, 1), {}, True),
    ("big_k", (1, 40, 12, 12), (33, 40, 3, 3), {"pads": [1, 1, 1, 1]}, True),       # K = 360 > KC
    ("1d", (2, 3, 10), (4, 3, 3), {"pads": [1, 2], "strides": [2]}, True),
    ("1d_dw", (1, 4, 9), (4, 1, 3), {"group": 4, "dilations": [2]}, False),
    ("1d_same", (1, 3, 10), (2, 3, 4), {"auto_pad": "SAME_UPPER"}, True),
    ("3d", (1, 2, 5, 6, 4), (3, 2, 3, 3, 2), {"pads": [1, 0, 1, 1, 1, 0]}, True),
    ("3d_stride_group", (2, 4, 6, 5, 5), (4, 2, 2, 3, 3), {"strides": [2, 1, 2], "group": 2}, False),
]


def _model(case, opset, weight_as_input=True):
    name, xs, ws, attrs, bias = case
    rng = np.random.default_rng(len(name) * 31 + len(xs))
    X = rng.uniform(-1, 1, xs).astype(np.float32)
    W = rng.uniform(-1, 1, ws).astype(np.float32)
    B = rng.uniform(-1, 1, ws[0]).astype(np.float32)
    ins = ["X", "W"] + (["B"] if bias else [])
    node = helper.make_node("Conv", ins, ["Y"], name=f"conv_{name}", **attrs)
    feeds = {"X": X, "W": W}
    if bias:
        feeds["B"] = B
    return node, feeds, X, W


def _tol(W):
    return 2 * (int(np.prod(W.shape[1:])) + 2) * EPS * 1.0 + 4 * EPS  # K*eps*max|X|*max|W| (+ bias rounding)


@pytest.mark.parametrize("opset", [1, 11])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_conv(case, opset):
    """Oracle: onnx.reference; shape/dtype also compared with onnxruntime at opset 11."""
    node, feeds, X, W = _model(case, opset)
    model = make_model([node], feeds, ["Y"], opset=opset)
    got, sess = run_onnxep(model, feeds)
    assert fallback_nodes(sess) == []
    ref = run_reference(model, feeds)[0]
    assert got[0].dtype == np.float32 and got[0].shape == ref.shape
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=_tol(W))
    # onnxruntime refuses dilations with auto_pad SAME_* ("Dilation not supported"): onnx.reference is the only oracle
    # for that case.
    if opset == 11 and case[0] != "same_dilated":
        o = run_ort(model, feeds)[0]
        assert o.shape == got[0].shape and o.dtype == got[0].dtype
        np.testing.assert_allclose(got[0], o, rtol=0, atol=_tol(W))


@pytest.mark.parametrize("case", [c for c in CASES if c[0] in ("1x1", "3x3_pad", "group2", "odd_sizes", "big_k", "1d",
                                                                 "3d", "depthwise")], ids=lambda c: c[0])
def test_conv_packing_modes(case):
    """Oracle: the unpacked path (W as graph input); packed (sharing), prepacking disabled and non-sharing identical.
    Depthwise convs are not packed (direct loop): the helper then checks the weight stays an ordinary input."""
    node, feeds, X, W = _model(case, 11)
    feeds = {k: v for k, v in feeds.items() if k != "W"}
    if case[0] == "depthwise":
        m = make_model([node], feeds, ["Y"], opset=11, initializers={"W": W})
        got, sess = run_onnxep(m, feeds)
        assert fallback_nodes(sess) == []
        ref = run_reference(m, feeds)[0]
        np.testing.assert_allclose(got[0], ref, rtol=0, atol=_tol(W))
        return
    assert_packing_modes_agree(node, feeds, "W", W, 11)


def test_conv_threads_identical():
    """Oracle: the single-threaded run; intra_op_num_threads must not change results (each output computed by one
    thread in a fixed K order)."""
    import onnxep
    node, feeds, X, W = _model(("t", (4, 16, 20, 20), (32, 16, 3, 3), {"pads": [1, 1, 1, 1]}, True), 11)
    model = make_model([node], feeds, ["Y"], opset=11)
    outs = []
    for nt in (1, 2):
        so = onnxep.SessionOptions()
        so.intra_op_num_threads = nt
        outs.append(run_onnxep(model, feeds, sess_options=so)[0][0])
    np.testing.assert_array_equal(outs[0], outs[1])


def test_conv_unsupported_falls_back():
    """Oracle: the partitioner's node assignment. Negative pads are not claimed by the cpu backend (left to the
    reference backend)."""
    import onnxep
    from tests._util import fallback_nodes
    node = helper.make_node("Conv", ["X", "W"], ["Y"], pads=[-1, 0, 0, 0])
    X = np.ones((1, 1, 4, 4), np.float32)
    W = np.ones((1, 1, 2, 2), np.float32)
    model = make_model([node], {"X": X, "W": W}, ["Y"], opset=11)
    sess = onnxep.InferenceSession(model.SerializeToString())
    assert fallback_nodes(sess) == [node.name or "Conv_0"]


def test_conv_bad_channels_raise():
    """Oracle: the documented error -- channel mismatch raises an error naming the node."""
    import onnxep
    node = helper.make_node("Conv", ["X", "W"], ["Y"], name="bad_conv")
    X = np.ones((1, 3, 4, 4), np.float32)
    W = np.ones((2, 2, 3, 3), np.float32)
    model = make_model([node], {"X": X, "W": W}, ["Y"], opset=11, input_shapes={"X": [1, "c", 4, 4]})
    sess = onnxep.InferenceSession(model.SerializeToString())
    with pytest.raises(Exception, match="bad_conv"):
        sess.run(None, {"X": X, "W": W})
