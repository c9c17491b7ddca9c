"""onnxep's sequence and optional kernels (ops/sequence): SequenceEmpty / Construct / Insert / At / Erase / Length,
SplitToSequence, ConcatFromSequence, SequenceMap, Optional, OptionalHasElement, OptionalGetElement -- positions
(negative, default, end), split forms, axes, opsets 15 and 18 of the optional ops, several dtypes, bad positions.
Every session runs with the fallback off (nothing reaches onnx.reference). Oracle: onnxruntime (run_ort)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import assert_outputs_match, cpu_only_options, run_ort

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
_ELEM = {np.dtype(np.float32): F, np.dtype(np.int64): I64, np.dtype(np.int8): TensorProto.INT8,
         np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.bool_): B, np.dtype(np.float64): TensorProto.DOUBLE,
         np.dtype(np.int32): TensorProto.INT32, np.dtype(np.uint8): TensorProto.UINT8}


def _model(nodes, feeds, outs, opset=17):
    ins = [helper.make_tensor_value_info(n, _ELEM[np.asarray(v).dtype], np.shape(v)) for n, v in feeds.items()]
    g = helper.make_graph(nodes, "g", ins, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _seq_out(name, elem=F):
    return helper.make_tensor_sequence_value_info(name, elem, None)


def _out(name, elem=F):
    return helper.make_tensor_value_info(name, elem, None)


def _same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w), (g, w)
            if w:
                assert_outputs_match(g, w)
        elif w is None:
            assert g is None
        else:
            assert_outputs_match([g], [w])


def _check(model, feeds):
    sess = onnxep.InferenceSession(model.SerializeToString(), cpu_only_options())
    got = sess.run(None, feeds)
    _same(got, run_ort(model, feeds))
    assert set(sess.node_assignment.values()) == {"cpu"}
    return sess, got


DTYPES = [np.float32, np.float16, np.int8, np.int64, np.bool_, np.float64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("pos", [None, 0, 1, -1, 3, -3])
def test_construct_insert_at_erase_length(dtype, pos):
    rng = np.random.default_rng(0)
    feeds = {k: (rng.standard_normal((2, i + 1)) * 4).astype(dtype) for i, k in enumerate("abc")}
    elem = _ELEM[np.dtype(dtype)]
    ins = ["s", "a"] + (["p"] if pos is not None else [])
    nodes = [helper.make_node("SequenceConstruct", ["a", "b", "c"], ["s"]),
             helper.make_node("SequenceInsert", ins, ["s2"]),
             helper.make_node("SequenceLength", ["s2"], ["n"])]
    if pos is not None:
        feeds["p"] = np.array(pos, np.int64)
        nodes += [helper.make_node("SequenceAt", ["s2", "p"], ["at"]),
                  helper.make_node("SequenceErase", ["s2", "p"], ["s3"])]
        outs = [_seq_out("s2", elem), _out("n", I64), _out("at", elem), _seq_out("s3", elem)]
    else:
        nodes.append(helper.make_node("SequenceErase", ["s2"], ["s3"]))
        outs = [_seq_out("s2", elem), _out("n", I64), _seq_out("s3", elem)]
    _check(_model(nodes, feeds, outs, opset=12), feeds)


def test_sequence_empty_then_insert():
    feeds = {"x": np.arange(6, dtype=np.int32).reshape(2, 3)}
    nodes = [helper.make_node("SequenceEmpty", [], ["e"], dtype=TensorProto.INT32),
             helper.make_node("SequenceLength", ["e"], ["n0"]),
             helper.make_node("SequenceInsert", ["e", "x"], ["s"]),
             helper.make_node("SequenceInsert", ["s", "x"], ["s2"]),
             helper.make_node("ConcatFromSequence", ["s2"], ["y"], axis=1)]
    _check(_model(nodes, feeds, [_out("n0", I64), _out("y", TensorProto.INT32)]), feeds)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.float64, np.int32])
@pytest.mark.parametrize("split,axis,keepdims", [
    (None, 0, 1), (None, 1, 0), (None, -1, 0), (2, 1, 1), (4, 1, 1), ([1, 4], 1, 1), ([0, 2, 1], 0, 1)])
def test_split_to_sequence(dtype, split, axis, keepdims):
    x = np.arange(3 * 5 * 2).astype(dtype).reshape(3, 5, 2)
    feeds = {"x": x}
    ins = ["x"]
    if split is not None:
        feeds["split"] = np.array(split, np.int64)
        ins.append("split")
    nodes = [helper.make_node("SplitToSequence", ins, ["s"], axis=axis, keepdims=keepdims),
             helper.make_node("SequenceLength", ["s"], ["n"])]
    _check(_model(nodes, feeds, [_seq_out("s", _ELEM[np.dtype(dtype)]), _out("n", I64)]), feeds)


@pytest.mark.parametrize("new_axis,axis", [(0, 0), (0, -1), (1, 0), (1, 2), (1, -1), (1, -3)])
def test_concat_from_sequence(new_axis, axis):
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    feeds = {"x": x}
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0 if new_axis else 1),
             helper.make_node("ConcatFromSequence", ["s"], ["y"], axis=axis, new_axis=new_axis)]
    _check(_model(nodes, feeds, [_out("y")]), feeds)


def test_sequence_map_two_sequences_and_a_tensor():
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["ab"]), helper.make_node("Mul", ["ab", "k"], ["y"]),
                              helper.make_node("Shape", ["a"], ["sh"])], "body",
                             [helper.make_tensor_value_info(n, F, None) for n in ("a", "b", "k")],
                             [_out("y"), _out("sh", I64)])
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(4, 3), "k": np.array([2, 3, 4], np.float32)}
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
             helper.make_node("SequenceMap", ["s", "s", "k"], ["ys", "shapes"], body=body, name="map")]
    sess, _ = _check(_model(nodes, feeds, [_seq_out("ys"), _seq_out("shapes", I64)]), feeds)


def test_optional_15():
    feeds = {"x": np.array([1, 2, 3], np.float32)}
    opt_f = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, None))
    nodes = [helper.make_node("Optional", ["x"], ["o"]),
             helper.make_node("OptionalHasElement", ["o"], ["h"]),
             helper.make_node("OptionalGetElement", ["o"], ["v"]),
             helper.make_node("Optional", [], ["e"], type=helper.make_tensor_type_proto(F, None)),
             helper.make_node("OptionalHasElement", ["e"], ["he"])]
    _check(_model(nodes, feeds, [_out("h", B), _out("v"), helper.make_value_info("e", opt_f), _out("he", B)],
                  opset=15), feeds)


def test_optional_18_tensor_and_sequence_inputs():
    feeds = {"x": np.array([[1, 2]], np.int64)}
    nodes = [helper.make_node("OptionalHasElement", ["x"], ["h"]),
             helper.make_node("OptionalGetElement", ["x"], ["v"]),
             helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
             helper.make_node("OptionalGetElement", ["s"], ["sv"]),
             helper.make_node("OptionalHasElement", [], ["none"])]
    _check(_model(nodes, feeds, [_out("h", B), _out("v", I64), _seq_out("sv", I64), _out("none", B)], opset=18),
           feeds)


def test_bad_position_and_empty_optional_name_the_node():
    feeds = {"x": np.ones((2, 2), np.float32), "p": np.array(5, np.int64)}
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]),
             helper.make_node("SequenceAt", ["s", "p"], ["y"], name="the_at")]
    m = _model(nodes, feeds, [_out("y")])
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.InvalidArgument, match="the_at.*position 5 is out of range.*2 tensors"):
        sess.run(None, feeds)
    feeds["p"] = np.array(-2, np.int64)
    _same(sess.run(None, feeds), run_ort(m, feeds))
    # an empty optional read
    opt_f = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, None))
    g = helper.make_graph([helper.make_node("Optional", [], ["e"], type=helper.make_tensor_type_proto(F, None)),
                           helper.make_node("OptionalGetElement", ["e"], ["v"], name="get")], "g", [], [_out("v")],
                          value_info=[helper.make_value_info("e", opt_f)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    with pytest.raises(onnxep.InvalidArgument, match="'get'.*empty"):
        onnxep.InferenceSession(m.SerializeToString(), cpu_only_options()).run(None, {})


def test_sequence_map_length_mismatch():
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "body",
                             [helper.make_tensor_value_info(n, F, None) for n in ("a", "b")], [_out("y")])
    feeds = {"x": np.ones((4, 3), np.float32), "z": np.ones((2, 3), np.float32)}
    nodes = [helper.make_node("SplitToSequence", ["x"], ["s"], axis=0),
             helper.make_node("SplitToSequence", ["z"], ["t"], axis=0),
             helper.make_node("SequenceMap", ["s", "t"], ["ys"], body=body, name="map")]
    sess = onnxep.InferenceSession(_model(nodes, feeds, [_seq_out("ys")]).SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.InvalidArgument, match="'map'.*2 tensors.*4"):
        sess.run(None, feeds)


def test_sequence_values_survive_memory_planned_runs():
    """Tensors computed in the arena and put into a sequence: later runs (from the planned arena) still read what was
    put in, while the graph computes on."""
    feeds = {"x": np.linspace(-1, 1, 256, dtype=np.float32).reshape(16, 16)}
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("SequenceConstruct", ["r", "n"], ["s"]),
             helper.make_node("Exp", ["x"], ["e1"]), helper.make_node("Sigmoid", ["e1"], ["e2"]),
             helper.make_node("Tanh", ["e2"], ["e3"]),
             helper.make_node("ConcatFromSequence", ["s"], ["c"], axis=0),
             helper.make_node("Add", ["c", "c"], ["y"]), helper.make_node("Add", ["e3", "e3"], ["z"])]
    m = _model(nodes, feeds, [_out("y"), _out("z")])
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    want = run_ort(m, feeds)
    for _ in range(3):
        _same(sess.run(None, feeds), want)
