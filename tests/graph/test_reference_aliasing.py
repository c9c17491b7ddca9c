"""Values a reference-backend partition returns must not alias memory the memory planner (graph/planner.py) hands
to a later step of the run, or to the next run while the caller still holds the first run's outputs. onnx.reference
keeps its input objects (SequenceConstruct puts them in the list as they are, Reshape returns a view), and the
reference plan's inputs that come from cpu plans are boundary copies allocated from the run's arena.

Each model runs natively with the op forced onto the reference backend (session config 'onnxep.fallback_op_types'),
cpu nodes writing new values after it; three runs with different inputs (the first recorded, the next ones from the
planned arena), every run's outputs held and compared with onnxruntime (the oracle) after the last run."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import assert_outputs_match as _match_tensors
from tests._util import run_ort

F, I64 = TensorProto.FLOAT, TensorProto.INT64
SEQ = helper.make_tensor_sequence_value_info


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, ins, outs, inits=()):
    g = helper.make_graph(nodes, "g", ins, outs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _forced(op_types):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", op_types)
    return so


def _feeds(seed, shape=(8, 16)):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal(shape).astype(np.float32)}


def assert_outputs_match(got, want):
    """assert_outputs_match of tests._util, a sequence output compared element by element."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w), (type(g), w)
            _match_tensors(g, w)
        else:
            _match_tensors([g], [w])


def _check(model, op_types, expect_reference, runs=3):
    sess = onnxep.InferenceSession(model.SerializeToString(), _forced(op_types))
    assert {n for n, b in sess.node_assignment.items() if b == "reference"} == set(expect_reference)
    held = []
    for k in range(runs):
        feeds = _feeds(k)
        got = sess.run(None, feeds)
        want = run_ort(model, feeds)
        try:
            assert_outputs_match(got, want)    # this run is right ...
        except AssertionError as e:
            raise AssertionError(f"run {k}: {e}") from None
        held.append((got, want))
    for got, want in held:                     # ... and no later run changed what it returned
        assert_outputs_match(got, want)
    return sess


def test_sequence_read_after_later_cpu_steps():
    """seq = SequenceConstruct(Abs(x)) on the reference backend holds the boundary copy of Abs(x); cpu nodes then
    allocate tensors of the same size (Neg, Mul, Sub) before SequenceAt reads the sequence."""
    m = _model([helper.make_node("Abs", ["x"], ["a"]),
                helper.make_node("SequenceConstruct", ["a"], ["seq"], name="construct"),
                helper.make_node("Neg", ["x"], ["b"]),
                helper.make_node("Mul", ["b", "x"], ["c"]),
                helper.make_node("Sub", ["c", "b"], ["d"]),
                helper.make_node("SequenceAt", ["seq", "zero"], ["e"]),
                helper.make_node("Add", ["e", "d"], ["y"])],
               [_vi("x", F, [8, 16])], [_vi("y", F, [8, 16])],
               [helper.make_tensor("zero", I64, [], [0])])
    _check(m, "SequenceConstruct", ["construct"])


def test_sequence_output_held_across_runs():
    """The sequence itself is a graph output (its tensor: the boundary copy of a cpu value), beside a cpu output of
    the same size computed after it."""
    m = _model([helper.make_node("Abs", ["x"], ["a"]),
                helper.make_node("SequenceConstruct", ["a", "a"], ["seq"], name="construct"),
                helper.make_node("Neg", ["x"], ["b"]),
                helper.make_node("Mul", ["b", "b"], ["y"])],
               [_vi("x", F, [8, 16])], [SEQ("seq", F, [8, 16]), _vi("y", F, [8, 16])])
    _check(m, "SequenceConstruct", ["construct"])


def test_sequence_element_read_by_a_later_reference_partition():
    """Two reference partitions separated by cpu nodes: the second (SequenceInsert, forced too) reads the sequence
    the first made, after the cpu nodes allocated."""
    m = _model([helper.make_node("Abs", ["x"], ["a"]),
                helper.make_node("SequenceConstruct", ["a"], ["seq"], name="construct"),
                helper.make_node("Neg", ["x"], ["b"]),
                helper.make_node("Mul", ["b", "x"], ["c"]),
                helper.make_node("SequenceInsert", ["seq", "c"], ["seq2"], name="insert"),
                helper.make_node("ConcatFromSequence", ["seq2"], ["y"], axis=0)],
               [_vi("x", F, [8, 16])], [_vi("y", F, [16, 16])])
    _check(m, "SequenceConstruct,SequenceInsert", ["construct", "insert"])


def test_reference_view_of_its_input_then_cpu_steps():
    """Reshape on the reference backend returns a view of its input (the boundary copy of Abs(x)); cpu nodes allocate
    before a cpu node reads the view, and the view is also a graph output."""
    m = _model([helper.make_node("Abs", ["x"], ["a"]),
                helper.make_node("Reshape", ["a", "shape"], ["r"], name="reshape"),
                helper.make_node("Neg", ["x"], ["b"]),
                helper.make_node("Mul", ["b", "x"], ["c"]),
                helper.make_node("Reshape", ["c", "shape2"], ["c2"], name="reshape2"),
                helper.make_node("Add", ["r", "c2"], ["y"])],
               [_vi("x", F, [8, 16])], [_vi("y", F, [16, 8]), _vi("r", F, [16, 8])],
               [helper.make_tensor("shape", I64, [2], [16, 8]), helper.make_tensor("shape2", I64, [2], [16, 8])])
    _check(m, "Reshape", ["reshape", "reshape2"])


@pytest.mark.parametrize("op", ["Identity", "Squeeze"])
def test_reference_view_output_held_across_runs(op):
    """A reference node whose result may be (a view of) its input, as a graph output next to later cpu outputs."""
    inputs = ["a"] if op == "Identity" else ["a", "axes"]
    m = _model([helper.make_node("Abs", ["x"], ["a"]),
                helper.make_node(op, inputs, ["r"], name="ref"),
                helper.make_node("Neg", ["x"], ["b"]),
                helper.make_node("Mul", ["b", "x"], ["y"])],
               [_vi("x", F, [1, 8, 16])], [_vi("r", F, None), _vi("y", F, [1, 8, 16])],
               [helper.make_tensor("axes", I64, [1], [0])])

    def feeds(seed):
        return {"x": np.random.default_rng(seed).standard_normal((1, 8, 16)).astype(np.float32)}

    sess = onnxep.InferenceSession(m.SerializeToString(), _forced(op))
    assert sess.node_assignment["ref"] == "reference"
    held = [(sess.run(None, feeds(k)), run_ort(m, feeds(k))) for k in range(3)]
    for got, want in held:
        assert_outputs_match(got, want)


def test_split_to_sequence_views_of_an_arena_input():
    """SplitToSequence on the reference backend returns views of its input (the boundary copy of Abs(x)); cpu nodes
    allocate before SequenceAt reads one part, and the sequence is also a graph output."""
    m = _model([helper.make_node("Abs", ["x"], ["a"]),
                helper.make_node("SplitToSequence", ["a"], ["seq"], axis=0, name="split"),
                helper.make_node("Neg", ["x"], ["b"]),
                helper.make_node("Mul", ["b", "x"], ["c"]),
                helper.make_node("Sub", ["c", "b"], ["d"]),
                helper.make_node("SequenceAt", ["seq", "zero"], ["e"]),
                helper.make_node("Add", ["e", "d"], ["y"])],
               [_vi("x", F, [8, 16])], [_vi("y", F, [8, 16]), SEQ("seq", F, [1, 16])],
               [helper.make_tensor("zero", I64, [], [0])])
    _check(m, "SplitToSequence", ["split"])


def test_sequence_of_an_outer_value_in_a_loop_body():
    """A Loop body (run natively) whose SequenceConstruct, forced onto the reference backend, holds the outer value
    `a` (an arena tensor of the enclosing run); the Loop's final sequence is read after later cpu nodes."""
    body = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["a"], ["s2"], name="inner_construct"),
         helper.make_node("Identity", ["c"], ["c2"])],
        "body", [_vi("i", I64, []), _vi("c", TensorProto.BOOL, []), SEQ("s", F, [8, 16])],
        [_vi("c2", TensorProto.BOOL, []), SEQ("s2", F, [8, 16])])
    m = _model([helper.make_node("Abs", ["x"], ["a"]),
                helper.make_node("SplitToSequence", ["x"], ["s0"], axis=0, keepdims=1),
                helper.make_node("Loop", ["two", "", "s0"], ["seq"], body=body, name="loop"),
                helper.make_node("Neg", ["x"], ["b"]),
                helper.make_node("Mul", ["b", "x"], ["c"]),
                helper.make_node("Sub", ["c", "b"], ["d"]),
                helper.make_node("SequenceAt", ["seq", "zero"], ["e"]),
                helper.make_node("Add", ["e", "d"], ["y"])],
               [_vi("x", F, [8, 16])], [_vi("y", F, [8, 16]), SEQ("seq", F, None)],
               [helper.make_tensor("zero", I64, [], [0]), helper.make_tensor("two", I64, [], [2])])
    sess = _check(m, "SequenceConstruct", [])
    assert sess.node_assignment["loop"] == "cpu"
    (kernel,) = [s[0] for p in sess.plans for s in p.steps if s[6] == "Loop"]
    assert "reference" in [p.backend_name for p in kernel.body.plans]
