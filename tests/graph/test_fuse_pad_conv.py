"""fuse_pad_conv: a zero Pad of the spatial dims before a Conv becomes the Conv's padding (what transformers'
MobileNet / EfficientNet exports write for "same" padding). Oracle: onnxruntime on the unfused model; the fused
graph is read back from the session's optimized_model_filepath."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from tests._util import cpu_only_options, run_ort

F = TensorProto.FLOAT


def _model(pads, opset=17, mode=None, value=None, conv_pads=None, group=1, axes=None, auto_pad=None):
    rng = np.random.default_rng(3)
    c = 4
    w = rng.standard_normal((c, c // group, 3, 3)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "w")]
    attrs = {"mode": mode} if mode else {}
    if opset < 11:
        if value is not None:
            attrs["value"] = value
        pad = helper.make_node("Pad", ["x"], ["p"], pads=pads, **attrs)
    else:
        ins = ["x", "pads"]
        inits.append(numpy_helper.from_array(np.array(pads, np.int64), "pads"))
        if value is not None or axes is not None:
            ins.append("v" if value is not None else "")
            if value is not None:
                inits.append(numpy_helper.from_array(np.array(value, np.float32), "v"))
        if axes is not None:
            ins.append("axes")
            inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        pad = helper.make_node("Pad", ins, ["p"], **attrs)
    conv_attrs = {"group": group}
    if conv_pads is not None:
        conv_attrs["pads"] = conv_pads
    if auto_pad is not None:
        conv_attrs["auto_pad"] = auto_pad
    conv = helper.make_node("Conv", ["p", "w"], ["y"], strides=[2, 2], **conv_attrs)
    g = helper.make_graph([pad, conv], "g", [helper.make_tensor_value_info("x", F, [2, c, 9, 9])],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(m, tmp_path):
    so = cpu_only_options()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    x = np.random.default_rng(0).standard_normal((2, 4, 9, 9)).astype(np.float32)
    got = onnxep.InferenceSession(m.SerializeToString(), so).run(None, {"x": x})
    np.testing.assert_allclose(got[0], run_ort(m, {"x": x})[0], rtol=1e-5, atol=1e-5)
    return [n.op_type for n in onnx.load(str(tmp_path / "opt.onnx")).graph.node]


@pytest.mark.parametrize("opset", [2, 11, 18])
@pytest.mark.parametrize("group", [1, 4])
def test_zero_spatial_pad_folds_into_conv(opset, group, tmp_path):
    ops = _run(_model([0, 0, 0, 1, 0, 0, 1, 2], opset=opset, group=group), tmp_path)
    assert "Pad" not in ops, ops


def test_pads_add_to_the_conv_pads_and_axes_input(tmp_path):
    ops = _run(_model([1, 0, 1, 2], opset=18, conv_pads=[1, 1, 1, 1], axes=[2, -1], value=0.0), tmp_path)
    assert "Pad" not in ops, ops


@pytest.mark.parametrize("kw", [dict(value=1.5), dict(mode="reflect"), dict(pads=[1, 0, 0, 0, 0, 0, 0, 0])])
def test_other_pads_stay(kw, tmp_path):
    """A non-zero value, another mode, or batch padding is not the Conv's padding: the Pad stays."""
    pads = kw.pop("pads", [0, 0, 1, 1, 0, 0, 1, 1])
    ops = _run(_model(pads, **kw), tmp_path)
    assert "Pad" in ops, ops


@pytest.mark.parametrize("group", [1, 4])
def test_valid_conv_takes_an_asymmetric_pad(group, tmp_path):
    """auto_pad VALID (no padding of its own, as torch exports EfficientNet's strided convs): the Pad's asymmetric
    pads become the Conv's."""
    ops = _run(_model([0, 0, 0, 0, 0, 0, 1, 1], auto_pad="VALID", group=group), tmp_path)
    assert "Pad" not in ops, ops


def test_same_auto_pad_keeps_the_pad(tmp_path):
    ops = _run(_model([0, 0, 1, 1, 0, 0, 1, 1], auto_pad="SAME_UPPER"), tmp_path)
    assert "Pad" in ops, ops
