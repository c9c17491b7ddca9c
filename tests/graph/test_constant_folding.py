"""Constant folding and which initializers are constants. Oracles: the same model with
graph_optimization_level=ORT_DISABLE_ALL (no folding), and onnxruntime for the IR-version rule."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import make_model


def _weights_from_constant_of_shape(ir_version=8, shape_is_input=False):
    nodes = [helper.make_node("ConstantOfShape", ["wshape"], ["w"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
             helper.make_node("Gemm", ["x", "w"], ["y"])]
    shape = np.array([4, 3], np.int64)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])]
    if shape_is_input:
        inputs.append(helper.make_tensor_value_info("wshape", TensorProto.INT64, [2]))
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [onnx.numpy_helper.from_array(shape, "wshape")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=ir_version)


def _session(model, level=onnxep.GraphOptimizationLevel.ORT_ENABLE_ALL):
    so = onnxep.SessionOptions()
    so.graph_optimization_level = level
    return onnxep.InferenceSession(model.SerializeToString(), so)


X = np.arange(8, dtype=np.float32).reshape(2, 4)


def test_folded_weights_are_prepacked_and_results_unchanged():
    m = _weights_from_constant_of_shape()
    folded, plain = _session(m), _session(m, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL)
    assert list(folded.node_assignment) == ["Gemm_1"]  # ConstantOfShape ran once, at load
    assert len(plain.node_assignment) == 2
    (step,) = folded.plans[0].steps
    assert step[3] == {1}  # Gemm's B is constant now, so it was pre-packed
    np.testing.assert_array_equal(folded.run(None, {"x": X})[0], plain.run(None, {"x": X})[0])
    np.testing.assert_allclose(folded.run(None, {"x": X})[0], X @ np.full((4, 3), 0.5, np.float32), rtol=1e-6)


def test_overridable_initializers_are_not_folded():
    m = _weights_from_constant_of_shape(ir_version=8, shape_is_input=True)
    s = _session(m)
    assert [i.name for i in s.get_overridable_initializers()] == ["wshape"]
    assert len(s.node_assignment) == 2
    # overriding the shape changes the weight; [4, 5] gives a (2, 5) output
    (y,) = s.run(None, {"x": X, "wshape": np.array([4, 5], np.int64)})
    assert y.shape == (2, 5)


@pytest.mark.parametrize("ir_version", [3, 8])
def test_initializers_listed_as_inputs_follow_onnxruntime(ir_version):
    # onnxruntime: before IR 4 every initializer is listed as an input too and none can be overridden; from IR 4 on an
    # initializer listed as an input is an overridable default.
    ort = pytest.importorskip("onnxruntime")
    m = _weights_from_constant_of_shape(ir_version=ir_version, shape_is_input=True)
    if ir_version < 4:
        m.opset_import[0].version = 8
        m.graph.node[1].op_type = "MatMul"  # ConstantOfShape needs opset 9; keep the model valid for opset 9
        m.opset_import[0].version = 9
    ours = onnxep.InferenceSession(m.SerializeToString())
    theirs = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [i.name for i in ours.get_inputs()] == [i.name for i in theirs.get_inputs()]
    assert [i.name for i in ours.get_overridable_initializers()] == [
        i.name for i in theirs.get_overridable_initializers()]


def test_huge_constants_are_not_materialized_at_load():
    # a tiny model asking for 2**40 floats: folding refuses (size checked before allocating) and leaves the node to
    # run time, where the allocation is refused with a clear error
    nodes = [helper.make_node("ConstantOfShape", ["s"], ["big"]), helper.make_node("Add", ["big", "x"], ["y"])]
    m = make_model(nodes, {"x": np.zeros((1,), np.float32)}, ["y"], initializers={"s": np.array([2 ** 40], np.int64)})
    s = onnxep.InferenceSession(m.SerializeToString())
    assert "ConstantOfShape_0" in s.node_assignment
    with pytest.raises(onnxep.Fail, match="ConstantOfShape.*bytes"):
        s.run(None, {"x": np.zeros((1,), np.float32)})


def test_repeated_constant_computations_fold_once_each_name_its_own_copy():
    """graph/passes/constant_folding.py: a node whose op, attributes and input values match one folded before takes
    its results (copies). Oracle: the same model unfolded (ORT_DISABLE_ALL), and the pass's own results per node."""
    from onnxep.graph.model import build_graph
    from onnxep.graph.passes.constant_folding import fold_constants
    c = np.array([[1, 2], [3, 4]], np.float32)
    nodes = [helper.make_node("Transpose", ["c"], ["t1"], perm=[1, 0]),
             helper.make_node("Transpose", ["c_again"], ["t2"], perm=[1, 0]),      # same values, other name
             helper.make_node("Transpose", ["c"], ["t3"], perm=[0, 1]),            # other attribute
             helper.make_node("Transpose", ["d"], ["t4"], perm=[1, 0]),            # other values
             helper.make_node("Sum", ["x", "t1", "t2", "t3", "t4"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
                          [onnx.numpy_helper.from_array(c, "c"), onnx.numpy_helper.from_array(c.copy(), "c_again"),
                           onnx.numpy_helper.from_array(c + 10, "d")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
    graph = fold_constants(build_graph(m))
    assert [n.op_type for n in graph.nodes] == ["Sum"]
    k = graph.initializers
    np.testing.assert_array_equal(k["t1"], c.T)
    np.testing.assert_array_equal(k["t2"], c.T)
    assert k["t1"] is not k["t2"]            # a later pass may edit one in place
    np.testing.assert_array_equal(k["t3"], c)
    np.testing.assert_array_equal(k["t4"], (c + 10).T)
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    folded, plain = _session(m), _session(m, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL)
    np.testing.assert_array_equal(folded.run(None, {"x": x})[0], plain.run(None, {"x": x})[0])
