"""onnxep's own If / Loop / Scan / SequenceMap kernels (ops/control, bodies compiled and run by onnxep's executor):
nested control flow reading the outermost graph's values, optional trip count and condition, loop-carried values
that change shape, branches of different shapes, body errors naming the outer and the inner node, the reference
fallback inside a body, memory-planned runs, pruned runs, body plans released with the session, EPContext
export and reload. Oracle: onnxruntime (run_ort)."""
import gc
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import assert_outputs_match, cpu_only_options, run_ort

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, ins, outs, opset=17, inits=()):
    g = helper.make_graph(nodes, "g", ins, outs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _check(model, feeds, so=None, runs=2):
    """Runs `model` natively (the fallback off unless `so` says otherwise) `runs` times -- the second one from the
    planned arena -- against onnxruntime; returns the session."""
    sess = onnxep.InferenceSession(model.SerializeToString(), so or cpu_only_options())
    want = run_ort(model, feeds)
    for _ in range(runs):
        assert_outputs_match(sess.run(None, feeds), want)
    return sess


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name + "_t", F, np.shape(value),
                                                                           np.ravel(value).tolist()))


# --------------------------------------------------------------------------- nested control flow
def _if_in_loop_model():
    """Loop over M: the body's If adds the outermost graph's `w` (then) or subtracts `v` (else) depending on the
    iteration's parity; scan output: the carried value each iteration."""
    then = helper.make_graph([helper.make_node("Add", ["acc", "w"], ["r"])], "then", [], [_vi("r", F, [2])])
    other = helper.make_graph([helper.make_node("Sub", ["acc", "v"], ["r2"])], "else", [], [_vi("r2", F, [2])])
    body = helper.make_graph(
        [_const("two", 2.0),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Mod", ["fi", "two"], ["m"], fmod=1),
         helper.make_node("Equal", ["m", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["acc2"], then_branch=then, else_branch=other, name="inner_if"),
         helper.make_node("Identity", ["acc2"], ["y"]),
         helper.make_node("Identity", ["c"], ["c2"])],
        "body", [_vi("i", I64, []), _vi("c", B, []), _vi("acc", F, [2])],
        [_vi("c2", B, []), _vi("acc2", F, [2]), _vi("y", F, [2])])
    loop = helper.make_node("Loop", ["M", "", "a0"], ["a", "ys"], body=body, name="loop")
    zero = helper.make_tensor("zero", F, [], [0.0])
    return _model([helper.make_node("Mul", ["x", "x"], ["w"]), helper.make_node("Neg", ["x"], ["v"]), loop],
                  [_vi("M", I64, []), _vi("x", F, [2]), _vi("a0", F, [2])],
                  [_vi("a", F, [2]), _vi("ys", F, None)], inits=[zero])


def test_if_in_loop_reads_outermost_values():
    """An If inside a Loop body reads `w` and `v`, computed in the outermost graph, and an outer initializer."""
    m = _if_in_loop_model()
    feeds = {"M": np.array(5, np.int64), "x": np.array([1.5, -2.0], np.float32), "a0": np.zeros(2, np.float32)}
    sess = _check(m, feeds)
    assert set(sess.node_assignment.values()) == {"cpu"}


def test_loop_in_scan():
    """A Scan body (opset 16) runs a Loop summing a row k times, k read from the outermost graph."""
    loop_body = helper.make_graph(
        [helper.make_node("Add", ["s", "row"], ["s2"]), helper.make_node("Identity", ["c"], ["c2"])],
        "loop_body", [_vi("i", I64, []), _vi("c", B, []), _vi("s", F, [3])], [_vi("c2", B, []), _vi("s2", F, [3])])
    scan_body = helper.make_graph(
        [helper.make_node("Loop", ["k", "", "st"], ["st2"], body=loop_body, name="inner_loop"),
         helper.make_node("ReduceSum", ["st2"], ["tot"], keepdims=1)],
        "scan_body", [_vi("st", F, [3]), _vi("row", F, [3])], [_vi("st2", F, [3]), _vi("tot", F, [1])])
    scan = helper.make_node("Scan", ["s0", "x"], ["s", "tots"], body=scan_body, num_scan_inputs=1, name="scan")
    m = _model([scan], [_vi("k", I64, []), _vi("s0", F, [3]), _vi("x", F, [4, 3])],
               [_vi("s", F, [3]), _vi("tots", F, [4, 1])], opset=16)
    _check(m, {"k": np.array(3, np.int64), "s0": np.ones(3, np.float32),
               "x": np.arange(12, dtype=np.float32).reshape(4, 3)})


def test_sequence_map_body_with_if():
    """A SequenceMap body holds an If choosing by the element's sum; the else branch reads the outer `b`."""
    then = helper.make_graph([helper.make_node("Neg", ["e"], ["r"])], "then", [], [_vi("r", F, None)])
    other = helper.make_graph([helper.make_node("Add", ["e", "b"], ["r2"])], "else", [], [_vi("r2", F, None)])
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["e"], ["s"], keepdims=0),
         helper.make_node("Greater", ["s", "zero"], ["pos"]),
         helper.make_node("If", ["pos"], ["out"], then_branch=then, else_branch=other, name="inner_if")],
        "body", [_vi("e", F, None)], [_vi("out", F, None)])
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0, keepdims=0),
             helper.make_node("SequenceMap", ["seq"], ["mapped"], body=body, name="map"),
             helper.make_node("ConcatFromSequence", ["mapped"], ["y"], axis=0, new_axis=1)]
    m = _model(nodes, [_vi("x", F, [4, 3]), _vi("b", F, [3])], [_vi("y", F, None)], opset=17,
               inits=[helper.make_tensor("zero", F, [], [0.0])])
    _check(m, {"x": np.array([[1, 2, 3], [-1, -2, 0], [4, -9, 1], [0, 0, 1]], np.float32),
               "b": np.array([10, 20, 30], np.float32)})


# --------------------------------------------------------------------------- Loop
def _counter_body(carried_shape=None, grow=False):
    """cond_out = i < 3 (M may be absent); acc += 1, or acc = Concat(acc, acc) when `grow` (shape changes)."""
    nodes = [_const("three", 3.0), helper.make_node("Cast", ["i"], ["fi"], to=F),
             helper.make_node("Less", ["fi", "three"], ["c2"])]
    if grow:
        nodes.append(helper.make_node("Concat", ["acc", "acc"], ["acc2"], axis=0))
    else:
        nodes += [_const("one", 1.0), helper.make_node("Add", ["acc", "one"], ["acc2"])]
    nodes.append(helper.make_node("Identity", ["fi"], ["iy"]))
    return helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("c", B, []), _vi("acc", F, carried_shape)],
                             [_vi("c2", B, []), _vi("acc2", F, carried_shape), _vi("iy", F, [])])


@pytest.mark.parametrize("inputs", [("M", ""), ("", "cond"), ("M", "cond")])
def test_loop_optional_trip_count_and_condition(inputs):
    """M alone, the condition alone (the body's condition output ends the loop), or both."""
    m_name, c_name = inputs
    loop = helper.make_node("Loop", [m_name, c_name, "a0"], ["a", "iters"], body=_counter_body([2]), name="loop")
    ins = [_vi("a0", F, [2])]
    feeds = {"a0": np.zeros(2, np.float32)}
    if m_name:
        ins.append(_vi("M", I64, []))
        feeds["M"] = np.array(7, np.int64)
    if c_name:
        ins.append(_vi("cond", B, []))
        feeds["cond"] = np.array(True)
    m = _model([loop], ins, [_vi("a", F, [2]), _vi("iters", F, None)], opset=13)
    _check(m, feeds)


def test_loop_carried_value_changes_shape():
    """The carried value doubles its length every iteration."""
    loop = helper.make_node("Loop", ["M", "", "a0"], ["a", "iters"], body=_counter_body([None], grow=True),
                            name="loop")
    m = _model([loop], [_vi("M", I64, []), _vi("a0", F, [None])], [_vi("a", F, [None]), _vi("iters", F, None)])
    sess = _check(m, {"M": np.array(3, np.int64), "a0": np.array([1, 2], np.float32)})
    assert sess.run(None, {"M": np.array(3, np.int64), "a0": np.array([1, 2], np.float32)})[0].shape == (16,)


def test_loop_body_error_names_both_nodes_and_session_survives():
    """A Reshape in the body that fails at iteration 2 (its target shape depends on the iteration): the error names
    the Loop node, the iteration and the body's node; the session runs again afterwards."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]),
         helper.make_node("Add", ["i", "one"], ["i1"]),
         helper.make_node("Mul", ["i1", "lim"], ["lim2"]),
         helper.make_node("Add", ["lim2", "minus1"], ["shp"]),
         helper.make_node("Reshape", ["acc", "shp"], ["r"], name="body_reshape"),
         helper.make_node("Reshape", ["r", "back"], ["acc2"])],
        "body", [_vi("i", I64, [1]), _vi("c", B, []), _vi("acc", F, [6])], [_vi("c2", B, []), _vi("acc2", F, [6])])
    inits = [helper.make_tensor("one", I64, [1], [1]), helper.make_tensor("lim", I64, [2], [1, 0]),
             helper.make_tensor("minus1", I64, [2], [0, -1]), helper.make_tensor("back", I64, [1], [6])]
    loop = helper.make_node("Loop", ["M", "", "a0"], ["a"], body=body, name="the_loop")
    m = _model([loop], [_vi("M", I64, []), _vi("a0", F, [6])], [_vi("a", F, [6])], inits=inits)
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    a0 = np.arange(6, dtype=np.float32)
    with pytest.raises(onnxep.OnnxepError) as err:
        sess.run(None, {"M": np.array(6, np.int64), "a0": a0})      # 6 elements cannot be (4, -1) at i = 3
    msg = str(err.value)
    assert "the_loop" in msg and "body_reshape" in msg and "iteration 3" in msg, msg
    got = sess.run(None, {"M": np.array(3, np.int64), "a0": a0})
    assert_outputs_match(got, run_ort(m, {"M": np.array(3, np.int64), "a0": a0}))


def test_loop_body_size_check():
    """An Expand in the body whose target size comes from the carried value: a terabyte request is refused by name
    (the Loop and the Expand) before anything is allocated; the session stays usable."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Identity", ["n"], ["n2"]),
         helper.make_node("Expand", ["one"], ["big"], name="body_expand"),
         helper.make_node("ReduceSum", ["big"], ["s"], keepdims=0)],
        "body", [_vi("i", I64, []), _vi("c", B, []), _vi("n", I64, [2])], [_vi("c2", B, []), _vi("n2", I64, [2]),
                                                                           _vi("s", F, [])])
    body.node[2].input.append("n")
    loop = helper.make_node("Loop", ["M", "", "n0"], ["n", "sums"], body=body, name="the_loop")
    m = _model([loop], [_vi("M", I64, []), _vi("n0", I64, [2])], [_vi("n", I64, [2]), _vi("sums", F, None)],
               inits=[helper.make_tensor("one", F, [], [1.0])])
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.OnnxepError, match="the_loop") as err:
        sess.run(None, {"M": np.array(2, np.int64), "n0": np.array([1 << 20, 1 << 20], np.int64)})
    assert "body_expand" in str(err.value)
    feeds = {"M": np.array(2, np.int64), "n0": np.array([2, 3], np.int64)}
    assert_outputs_match(sess.run(None, feeds), run_ort(m, feeds))


# --------------------------------------------------------------------------- If
def test_if_branches_of_different_shapes():
    then = helper.make_graph([helper.make_node("Concat", ["x", "x"], ["t"], axis=0)], "then", [],
                             [_vi("t", F, None)])
    other = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["e"], keepdims=1)], "else", [],
                              [_vi("e", F, None)])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")],
               [_vi("c", B, []), _vi("x", F, [3])], [_vi("y", F, None)])
    x = np.array([1, 2, 3], np.float32)
    sess = _check(m, {"c": np.array(True), "x": x})
    assert_outputs_match(sess.run(None, {"c": np.array(False), "x": x}), run_ort(m, {"c": np.array(False), "x": x}))
    bad = _model(m.graph.node, [_vi("c", B, [None]), _vi("x", F, [3])], [_vi("y", F, None)])
    sess = onnxep.InferenceSession(bad.SerializeToString(), cpu_only_options())
    with pytest.raises(onnxep.InvalidArgument, match="'if'.*one element"):
        sess.run(None, {"c": np.array([True, False]), "x": x})
    assert_outputs_match(sess.run(None, {"c": np.array([False]), "x": x}), run_ort(bad, {"c": np.array([False]),
                                                                                         "x": x}))


def test_if_returns_outer_value_memory_planned():
    """A branch returns an outer value (through an Identity: a view of it) while the graph goes on computing: with
    the memory plan of the second run, the If's output must keep that value's memory alive."""
    then = helper.make_graph([helper.make_node("Identity", ["h"], ["hh"])], "then", [], [_vi("hh", F, [64])])
    other = helper.make_graph([helper.make_node("Neg", ["h"], ["nh"])], "else", [], [_vi("nh", F, [64])])
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if"),
             helper.make_node("Sigmoid", ["x"], ["t1"]), helper.make_node("Exp", ["t1"], ["t2"]),
             helper.make_node("Add", ["t2", "y"], ["z"])]
    m = _model(nodes, [_vi("c", B, []), _vi("x", F, [64])], [_vi("z", F, [64]), _vi("y", F, [64])])
    x = np.linspace(-3, 3, 64, dtype=np.float32)
    _check(m, {"c": np.array(True), "x": x}, runs=3)


# --------------------------------------------------------------------------- placement and lifetime
def _fallback_body_model():
    """An If whose then branch holds a node of a model-local function (no cpu kernel claims it)."""
    fn = helper.make_function("local", "Negate", ["v"], ["w"], [helper.make_node("Neg", ["v"], ["w"])],
                              [helper.make_opsetid("", 17)])
    then = helper.make_graph([helper.make_node("Negate", ["x"], ["t"], name="fn_node", domain="local")], "then", [],
                             [_vi("t", F, [2])])
    other = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [], [_vi("e", F, [2])])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="the_if")],
               [_vi("c", B, []), _vi("x", F, [2])], [_vi("y", F, [2])])
    m.opset_import.append(helper.make_opsetid("local", 1))
    m.functions.append(fn)
    return m


def test_body_node_falls_back_only_when_the_fallback_is_on():
    m = _fallback_body_model()
    x = np.array([1.0, -2.0], np.float32)
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert sess.node_assignment["the_if"] == "cpu"
    np.testing.assert_array_equal(sess.run(None, {"c": np.array(True), "x": x})[0], -x)
    np.testing.assert_array_equal(sess.run(None, {"c": np.array(False), "x": x})[0], np.maximum(x, 0))
    with pytest.raises(onnxep.NotImplemented, match="the_if.*fn_node"):
        onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())


@pytest.mark.parametrize("forced", ["Loop", "If", "Add"])
def test_reference_path_kept_through_fallback_op_types(forced):
    """'onnxep.fallback_op_types' sends the whole Loop to the reference backend, or (If, Add) nodes inside the
    native Loop's body: a body partition on the reference backend reads the outermost values and initializers."""
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", forced)
    m = _if_in_loop_model()
    m.graph.initializer.append(helper.make_tensor("bias", F, [2], [0.25, -0.5]))
    inner_if = [n for n in m.graph.node[2].attribute[0].g.node if n.op_type == "If"][0]
    then = [a.g for a in inner_if.attribute if a.name == "then_branch"][0]
    then.node[0].output[0] = "r0"
    then.node.append(helper.make_node("Add", ["r0", "bias"], ["r"]))
    feeds = {"M": np.array(4, np.int64), "x": np.array([1.5, -2.0], np.float32), "a0": np.zeros(2, np.float32)}
    sess = _check(m, feeds, so)
    assert sess.node_assignment["loop"] == ("reference" if forced == "Loop" else "cpu")
    if forced == "If":
        (loop,) = [s[0] for p in sess.plans for s in p.steps if s[6] == "Loop"]
        assert [p.backend_name for p in loop.body.plans] == ["cpu", "reference", "cpu"]


def test_only_execute_path_to_fetches():
    """A pruned run keeps the producers of the values a Loop body reads by outer name."""
    m = _if_in_loop_model()
    m.graph.node.append(helper.make_node("Abs", ["x"], ["ax"]))
    m.graph.output.append(_vi("ax", F, [2]))
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    feeds = {"M": np.array(3, np.int64), "x": np.array([1.5, -2.0], np.float32), "a0": np.zeros(2, np.float32)}
    ro = onnxep.RunOptions()
    ro.only_execute_path_to_fetches = True
    want = run_ort(m, feeds)
    assert_outputs_match(sess.run(["a"], feeds, ro), want[:1])
    assert_outputs_match(sess.run(["ax"], feeds, ro), want[2:])


def test_body_plans_released_with_the_session():
    m = _if_in_loop_model()
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    (kernel,) = [s[0] for p in sess.plans for s in p.steps if s[6] == "Loop"]
    body = kernel.body
    (inner_if,) = [s[0] for p in body.plans for s in p.steps if s[6] == "If"]
    branch = inner_if.then_body
    assert body.executor is not None and branch.executor is not None
    del sess, kernel, inner_if
    gc.collect()
    assert body.executor is None and branch.executor is None


def test_epcontext_export_of_control_flow(tmp_path):
    """A Loop (If inside, reading the outermost `w`, `v` and the initializer `zero`) on the cpu backend is exported
    inside an EPContext blob; the EPContext model, loaded with the fallback off, runs it natively and matches
    onnxruntime. With the Loop forced onto the reference backend the export still works (a plain node)."""
    m = _if_in_loop_model()
    path = os.path.join(tmp_path, "m.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    so = cpu_only_options()
    so.add_session_config_entry("ep.context_enable", "1")
    onnxep.InferenceSession(path, so)
    ctx_path = os.path.join(tmp_path, "m_ctx.onnx")
    ctx = onnx.load(ctx_path)
    assert [n.op_type for n in ctx.graph.node] == ["EPContext"]
    sess = onnxep.InferenceSession(ctx_path, cpu_only_options())
    assert set(sess.node_assignment.values()) == {"cpu"}
    for n in (3, 4):
        feeds = {"M": np.array(n, np.int64), "x": np.array([1.5, -2.0], np.float32), "a0": np.zeros(2, np.float32)}
        assert_outputs_match(sess.run(None, feeds), run_ort(m, feeds))
    # with the Loop on the reference backend the export works too (the Loop stays a plain node)
    os.remove(ctx_path)
    so = onnxep.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("onnxep.fallback_op_types", "Loop")
    onnxep.InferenceSession(path, so)
    sess = onnxep.InferenceSession(ctx_path)
    feeds = {"M": np.array(3, np.int64), "x": np.array([1.5, -2.0], np.float32), "a0": np.zeros(2, np.float32)}
    assert_outputs_match(sess.run(None, feeds), run_ort(m, feeds))


def test_scan_reads_outer_value_and_profiles():
    """Scan-9 body reads an outer value; a profiled run (traced steps) gives the same results."""
    body = helper.make_graph([helper.make_node("Mul", ["x", "scale"], ["xs"]),
                              helper.make_node("Add", ["s", "xs"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])],
                             "body",
                             [_vi("s", F, [2]), _vi("x", F, [2])], [_vi("s2", F, [2]), _vi("y", F, [2])])
    scan = helper.make_node("Scan", ["s0", "xs_in"], ["s", "ys"], body=body, num_scan_inputs=1,
                            scan_output_directions=[1], name="scan")
    m = _model([helper.make_node("Abs", ["k"], ["scale"]), scan],
               [_vi("k", F, [2]), _vi("s0", F, [2]), _vi("xs_in", F, [5, 2])], [_vi("s", F, [2]), _vi("ys", F, None)],
               opset=16)
    feeds = {"k": np.array([-2, 3], np.float32), "s0": np.zeros(2, np.float32),
             "xs_in": np.arange(10, dtype=np.float32).reshape(5, 2)}
    _check(m, feeds)
    so = cpu_only_options()
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(os.environ.get("TMPDIR", "/tmp"), "onnxep_cf_profile")
    sess = onnxep.InferenceSession(m.SerializeToString(), so)
    assert_outputs_match(sess.run(None, feeds), run_ort(m, feeds))
    os.remove(sess.end_profiling())


@pytest.mark.parametrize("source", ["bytes", "path", "proto"])
def test_untyped_body_inputs_typed_by_the_enclosing_inference(source, tmp_path):
    """Body inputs and values declared without a type (as onnx's own expanded functions write them): only the enclosing
    model's shape inference types them, from the Loop node. The body must be built from that inferred subgraph, however
    the model was given, or its nodes are refused with the fallback off (oracle: numpy; onnxruntime refuses a body
    input of unknown shape)."""
    untyped = [helper.make_value_info(n, onnx.TypeProto()) for n in ("i", "c", "acc")]
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["i_f"], to=F), helper.make_node("Add", ["acc", "i_f"], ["acc_out"]),
         helper.make_node("Identity", ["c"], ["c_out"])],
        "body", untyped, [helper.make_value_info(n, onnx.TypeProto()) for n in ("c_out", "acc_out")])
    loop = helper.make_node("Loop", ["m", "cond", "x"], ["y"], body=body)
    m = _model([loop], [_vi("m", TensorProto.INT64, []), _vi("cond", TensorProto.BOOL, []), _vi("x", F, [3])],
               [_vi("y", F, [3])])
    feeds = {"m": np.array(4, np.int64), "cond": np.array(True), "x": np.arange(3, dtype=np.float32)}
    if source == "path":
        arg = os.path.join(tmp_path, "loop.onnx")
        onnx.save(m, arg)
    else:
        arg = m.SerializeToString() if source == "bytes" else m
    sess = onnxep.InferenceSession(arg, cpu_only_options())
    assert_outputs_match(sess.run(None, feeds), [feeds["x"] + np.float32(0 + 1 + 2 + 3)])
