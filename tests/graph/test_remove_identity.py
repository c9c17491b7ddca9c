"""Identity / inference Dropout removal (graph/passes/remove_identity.py). Oracles: onnx.reference on the same model,
and which nodes the session kept (node_assignment)."""
import numpy as np
import onnxep
from onnx import TensorProto, helper

from tests._util import make_model, run_reference

X = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)


def _ops(sess):
    return sorted(n.split("_")[0] for n in sess.node_assignment)


def _check(model, feeds, kept):
    sess = onnxep.InferenceSession(model.SerializeToString())
    got = sess.run(None, feeds)
    for g, r in zip(got, run_reference(model, feeds)):
        np.testing.assert_array_equal(g, r)
    assert _ops(sess) == sorted(kept)
    return sess


def test_identity_and_dropout_chain_removed():
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Identity", ["a"], ["b"]),
             helper.make_node("Dropout", ["b"], ["c", "unused_mask"], ratio=0.5),
             helper.make_node("Identity", ["c"], ["d"]),
             helper.make_node("Neg", ["d"], ["y"])]
    _check(make_model(nodes, {"x": X}, ["y"], opset=11), {"x": X}, ["Relu", "Neg"])


def test_concat_of_one_input_removed():
    # the torchscript exporter's copy of a decoder's past key: Concat with a single input passes it through
    nodes = [helper.make_node("Concat", ["x"], ["a"], axis=2), helper.make_node("Concat", ["a", "x"], ["y"], axis=2)]
    _check(make_model(nodes, {"x": X}, ["y"]), {"x": X}, ["Concat"])
    # one whose output is a graph output stays
    _check(make_model(nodes[:1], {"x": X}, ["a"]), {"x": X}, ["Concat"])


def test_dropout_training_mode_false_constant_removed_opset13():
    nodes = [helper.make_node("Dropout", ["x", "r", "t"], ["a"]), helper.make_node("Abs", ["a"], ["y"])]
    m = make_model(nodes, {"x": X}, ["y"], opset=13,
                   initializers={"r": np.array(0.3, np.float32), "t": np.array(False)})
    _check(m, {"x": X}, ["Abs"])


def test_kept_when_mask_used_training_fed_or_output():
    # the mask is read: the Dropout stays
    nodes = [helper.make_node("Dropout", ["x"], ["a", "m"]), helper.make_node("Cast", ["m"], ["mf"], to=1),
             helper.make_node("Add", ["a", "mf"], ["y"])]
    _check(make_model(nodes, {"x": X}, ["y"], opset=11), {"x": X}, ["Dropout", "Cast", "Add"])
    # training_mode is a graph input: the Dropout stays (fed false here, so the reference passes x through)
    nodes = [helper.make_node("Dropout", ["x", "", "t"], ["a"]), helper.make_node("Abs", ["a"], ["y"])]
    m = make_model(nodes, {"x": X, "t": np.array(False)}, ["y"], opset=13)
    _check(m, {"x": X, "t": np.array(False)}, ["Dropout", "Abs"])
    # an Identity whose output is a graph output keeps its node (and the output its name); the one before goes
    nodes = [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["y"])]
    sess = _check(make_model(nodes, {"x": X}, ["y"]), {"x": X}, ["Identity"])
    assert [o.name for o in sess.get_outputs()] == ["y"]


def test_light_squeezenet_loses_its_dropout_and_the_transposes_around_it():
    import glob
    import os

    import onnx
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "light_squeezenet.onnx")
    assert glob.glob(path), path
    sess = onnxep.InferenceSession(path)
    ops = [s[6] for p in sess.plans for s in p.steps]
    assert "Dropout" not in ops
    # only the model's input changes layout by a copy; the pooled (N, C, 1, 1) output goes back by a Reshape view
    assert ops.count("Transpose") == 1


def test_node_in_subgraph_reading_output_keeps_it():
    # an If branch reads 'a' (an Identity's output) by its outer name: the Identity stays
    then_g = helper.make_graph([helper.make_node("Neg", ["a"], ["o"])], "then", [],
                               [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    else_g = helper.make_graph([helper.make_node("Abs", ["a"], ["o2"])], "else", [],
                               [helper.make_tensor_value_info("o2", TensorProto.FLOAT, None)])
    nodes = [helper.make_node("Identity", ["x"], ["a"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)]
    m = make_model(nodes, {"x": X, "c": np.array(True)}, ["y"])
    _check(m, {"x": X, "c": np.array(True)}, ["Identity", "If"])
