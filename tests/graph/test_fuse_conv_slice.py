"""fuse_conv_slice: a Slice keeping a prefix of a Conv's spatial output (wav2vec2's positional conv: Conv1d with
padding k/2, then [..., :-1]) becomes a smaller end pad of the Conv. Oracle: onnxruntime on the unfused model; the
fused graph is read back from the session's optimized_model_filepath."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from tests._util import cpu_only_options, run_ort

F = TensorProto.FLOAT


def _model(xshape, k, pads, strides, starts, ends, axes, steps=None, group=1, extra_reader=False, dynamic=False):
    rng = np.random.default_rng(5)
    nsp = len(xshape) - 2
    c = xshape[1]
    w = rng.standard_normal((8, c // group) + (k,) * nsp).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")]
    for name, v in (("starts", starts), ("ends", ends), ("axes", axes), ("steps", steps)):
        if v is not None:
            inits.append(numpy_helper.from_array(np.array(v, np.int64), name))
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=pads, strides=strides, group=group,
                            kernel_shape=[k] * nsp)
    sl = helper.make_node("Slice", ["c", "starts", "ends", "axes"] + (["steps"] if steps is not None else []), ["y"])
    nodes, outs = [conv, sl], [helper.make_tensor_value_info("y", F, None)]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["c"], ["r"]))
        outs.append(helper.make_tensor_value_info("r", F, None))
    decl = list(xshape[:2]) + ["L"] * (len(xshape) - 2) if dynamic else list(xshape)
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, decl)], outs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _run(m, xshape, tmp_path):
    so = cpu_only_options()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    x = np.random.default_rng(0).standard_normal(xshape).astype(np.float32)
    got = onnxep.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})
    for a, b in zip(got, run_ort(m, {"x": x})):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    return [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]


@pytest.mark.parametrize("case", [
    # x shape, k, pads, strides, starts, ends, axes, group
    ((2, 8, 30), 16, [8, 8], [1], [0], [-1], [2], 4),          # wav2vec2's positional conv
    ((2, 8, 30), 4, [2, 2], [1], [0], [-1], [-1], 1),
    ((1, 4, 31), 3, [1, 5], [2], [0], [16], [2], 1),           # stride 2, two outputs dropped (end pad 5 -> 1)
    ((1, 4, 9, 10), 2, [1, 1, 1, 1], [1, 1], [0, 0], [-1, -1], [2, 3], 1),   # 2-D, both spatial dims
])
def test_trailing_slice_folds_into_conv_pads(case, tmp_path):
    xshape, k, pads, strides, starts, ends, axes, group = case
    ops = _run(_model(xshape, k, pads, strides, starts, ends, axes, group=group), xshape, tmp_path)
    assert "Slice" not in ops, ops


def test_all_but_last_folds_with_a_dynamic_length(tmp_path):
    """ends = -1 drops one output whatever the (symbolic) length: folded without a static shape."""
    xshape = (2, 8, 30)
    m = _model(xshape, 16, [8, 8], [1], [0], [-1], [2], group=4, dynamic=True)
    assert "Slice" not in _run(m, xshape, tmp_path)


def test_positive_end_needs_a_static_length(tmp_path):
    xshape = (2, 8, 30)
    m = _model(xshape, 4, [2, 2], [1], [0], [29], [2], dynamic=True)
    assert "Slice" in _run(m, xshape, tmp_path)


@pytest.mark.parametrize("case,extra", [
    (((2, 8, 30), 4, [2, 2], [1], [1], [1000], [2], None), False),     # starts at 1: not a prefix
    (((2, 8, 30), 4, [2, 2], [1], [0], [-1], [1], None), False),       # channel axis
    (((2, 8, 30), 4, [2, 2], [1], [0], [10], [2], [2]), False),        # step 2
    (((2, 8, 30), 4, [0, 0], [1], [0], [-1], [2], None), False),       # no end pad to give back
    (((2, 8, 30), 4, [2, 2], [1], [0], [-1], [2], None), True),        # the conv output has another reader
])
def test_slice_kept_when_not_a_trailing_prefix(case, extra, tmp_path):
    xshape, k, pads, strides, starts, ends, axes, steps = case
    ops = _run(_model(xshape, k, pads, strides, starts, ends, axes, steps=steps, extra_reader=extra), xshape,
               tmp_path)
    assert "Slice" in ops, ops
