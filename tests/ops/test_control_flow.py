"""If with optional outputs, Optional, Loop scan outputs and Scan (opset 8 and 9+), each run two ways: by onnxep's
own kernels (ops/control, ops/sequence; the fallback off, so nothing reaches onnx.reference) and on the reference
backend (session config 'onnxep.fallback_op_types' sends the control-flow and optional ops there), where onnxep
corrects onnx.reference's implementations (onnxep/backends/reference.py). Oracle: onnxruntime (the cases
onnx.reference itself gets wrong)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import assert_outputs_match, run_ort

#: the op types the "reference" path forces onto the reference backend
REFERENCE_OPS = "If,Loop,Scan,Optional,OptionalHasElement,OptionalGetElement,SequenceConstruct"
PATHS = ("native", "reference")

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
SEQ_F = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))
OPT_SEQ_F = helper.make_optional_type_proto(SEQ_F)
OPT_F = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, None))


def _model(nodes, ins, outs, opset):
    g = helper.make_graph(nodes, "g", ins, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _options(path):
    so = onnxep.SessionOptions()
    if path == "native":
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    else:
        so.add_session_config_entry("onnxep.fallback_op_types", REFERENCE_OPS)
    return so


def _session(model, path):
    return onnxep.InferenceSession(model.SerializeToString(), _options(path))


def _run_both(model, feeds, path, node=None):
    """onnxep's outputs (on `path`), onnxruntime's, the session; `node` (a node name) must have run on that path."""
    sess = _session(model, path)
    got = sess.run(None, feeds)
    assert set(sess.node_assignment.values()) <= {"cpu", "reference"}
    if node is not None:
        assert sess.node_assignment[node] == ("cpu" if path == "native" else "reference")
    return got, run_ort(model, feeds), sess


def _assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if w is None or g is None:
            assert g is None and w is None, (g, w)
        elif isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w)
            assert_outputs_match(g, w)
        else:
            assert_outputs_match([g], [w])


def _vi(name, t):
    return helper.make_value_info(name, t)


# --------------------------------------------------------------------------- If / Optional
def _if_optional_model(opt_type, else_nodes, else_out):
    then = helper.make_graph([helper.make_node("Optional", [], ["e"], type=opt_type.optional_type.elem_type)],
                             "then", [], [_vi("e", opt_type)])
    other = helper.make_graph(else_nodes, "else", [], [_vi(else_out, opt_type)])
    n = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if_0")
    has = helper.make_node("OptionalHasElement", ["y"], ["has"])
    return _model([n, has], [helper.make_tensor_value_info("c", B, [])],
                  [_vi("y", opt_type), helper.make_tensor_value_info("has", B, [])], 16)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cond", [True, False])
def test_if_optional_sequence(cond, path):
    """An If returning optional(seq): the empty optional (None) or a one-element sequence (not wrapped in a list)."""
    x = helper.make_tensor("x", F, [5], [1, 2, 3, 4, 5])
    nodes = [helper.make_node("Constant", [], ["x"], value=x), helper.make_node("SequenceConstruct", ["x"], ["s"]),
             helper.make_node("Optional", ["s"], ["o"])]
    got, want, sess = _run_both(_if_optional_model(OPT_SEQ_F, nodes, "o"), {"c": np.array(cond)}, path, "if_0")
    _assert_same(got, want)
    assert bool(got[1]) is (not cond)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("cond", [True, False])
def test_if_optional_tensor_get_element(cond, path):
    """Optional(x) -> OptionalGetElement is x again; an empty optional tensor comes out as None."""
    x = helper.make_tensor("x", F, [2, 2], [1, 2, 3, 4])
    nodes = [helper.make_node("Constant", [], ["x"], value=x), helper.make_node("Optional", ["x"], ["o"])]
    m = _if_optional_model(OPT_F, nodes, "o")
    if not cond:  # read the element back through OptionalGetElement
        m.graph.node.append(helper.make_node("OptionalGetElement", ["y"], ["v"]))
        m.graph.output.append(helper.make_tensor_value_info("v", F, None))
    got, want, _ = _run_both(m, {"c": np.array(cond)}, path, "if_0")
    _assert_same(got, want)


# --------------------------------------------------------------------------- Loop
def _loop_model(elem_shape):
    """Loop(M, cond, a): a += i each iteration; scan output i * ones(elem_shape)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cin"], ["cout"]),
         helper.make_node("Cast", ["i"], ["fi"], to=F),
         helper.make_node("Add", ["a", "fi"], ["a2"]),
         helper.make_node("Constant", [], ["ones"], value=helper.make_tensor("ones", F, elem_shape,
                                                                           [1.0] * int(np.prod(elem_shape)))),
         helper.make_node("Mul", ["ones", "fi"], ["sc"])],
        "body", [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cin", B, []),
                 helper.make_tensor_value_info("a", F, [])],
        [helper.make_tensor_value_info("cout", B, []), helper.make_tensor_value_info("a2", F, []),
         helper.make_tensor_value_info("sc", F, elem_shape)])
    n = helper.make_node("Loop", ["M", "c", "a0"], ["a", "scan"], body=body, name="loop_0")
    return _model([n], [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("c", B, []),
                        helper.make_tensor_value_info("a0", F, [])],
                  [helper.make_tensor_value_info("a", F, None), helper.make_tensor_value_info("scan", F, None)], 16)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("elem_shape", [[], [1], [3], [2, 2]])
@pytest.mark.parametrize("trips", [1, 4])
def test_loop_scan_output_shape(elem_shape, trips, path):
    """Scan outputs stack on a new axis 0: a scalar per iteration gives (trips,), not (trips, 1)."""
    got, want, sess = _run_both(_loop_model(elem_shape), {"M": np.array(trips, np.int64), "c": np.array(True),
                                                           "a0": np.array(0.5, np.float32)}, path, "loop_0")
    assert got[1].shape == (trips, *elem_shape)
    _assert_same(got, want)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("elem_shape", [[], [2, 3]])
def test_loop_zero_trips(elem_shape, path):
    """No iteration: the carried value is the initial one, the scan output is empty (natively: of shape
    (0, *the body's declared output shape), as onnxruntime gives it)."""
    got, want, _ = _run_both(_loop_model(elem_shape), {"M": np.array(0, np.int64), "c": np.array(True),
                                                       "a0": np.array(0.5, np.float32)}, path, "loop_0")
    _assert_same(got[:1], want[:1])
    assert got[1].size == 0 and want[1].size == 0
    if path == "native":
        assert got[1].shape == want[1].shape == (0, *elem_shape)


# --------------------------------------------------------------------------- Scan
def _sum_body(elem):
    """state += x; scan output: the running state."""
    return helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])], "body",
        [helper.make_tensor_value_info("s", F, elem), helper.make_tensor_value_info("x", F, elem)],
        [helper.make_tensor_value_info("s2", F, elem), helper.make_tensor_value_info("y", F, elem)])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("seq_lens", [None, [3, 1], [2, 3], [0, 2]])
@pytest.mark.parametrize("direction", [0, 1])
def test_scan_8(seq_lens, direction, path):
    """Scan-8: batch axis 0 on states and scan inputs, sequence_lens (outputs past a sequence's end are zero),
    `directions` of the scan inputs."""
    batch, seq, elem = 2, 3, [2]
    ins = ["L" if seq_lens is not None else "", "s0", "x"]
    n = helper.make_node("Scan", ins, ["s", "y"], body=_sum_body(elem), num_scan_inputs=1, directions=[direction],
                         name="scan_0")
    graph_ins = [helper.make_tensor_value_info("s0", F, [batch] + elem),
                 helper.make_tensor_value_info("x", F, [batch, seq] + elem)]
    feeds = {"s0": np.array([[1, 2], [3, 4]], np.float32),
             "x": np.arange(batch * seq * 2, dtype=np.float32).reshape(batch, seq, 2)}
    if seq_lens is not None:
        graph_ins.insert(0, helper.make_tensor_value_info("L", I64, [batch]))
        feeds["L"] = np.array(seq_lens, np.int64)
    m = _model([n], graph_ins, [helper.make_tensor_value_info("s", F, None),
                                helper.make_tensor_value_info("y", F, None)], 8)
    if seq_lens is not None and 0 in seq_lens:  # both runtimes refuse an empty sequence
        with pytest.raises(Exception, match="sequence_lens"):
            run_ort(m, feeds)
        sess = _session(m, path)
        error = onnxep.InvalidArgument if path == "native" else onnxep.RuntimeException
        with pytest.raises(error, match="sequence_lens"):
            sess.run(None, feeds)
        feeds["L"] = np.array([1, 3], np.int64)       # the session still runs
        _assert_same(sess.run(None, feeds), run_ort(m, feeds))
        return
    got, want, sess = _run_both(m, feeds, path, "scan_0")
    _assert_same(got, want)


@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir", [
    (0, 0, 0, 0), (1, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 0), (0, 1, 1, 1), (-1, 0, -1, 1), (1, 1, -2, 0)])
@pytest.mark.parametrize("path", PATHS)
def test_scan_9(in_axis, in_dir, out_axis, out_dir, path):
    """Scan-9+: scan_input_axes / _directions and scan_output_axes / _directions, negative axes included."""
    x = np.arange(24, dtype=np.float32).reshape(4, 3, 2)
    length = x.shape[in_axis]
    elem = [int(d) for d in np.delete(np.array(x.shape), in_axis % 3)]
    n = helper.make_node("Scan", ["s0", "x"], ["s", "y"], body=_sum_body(elem), num_scan_inputs=1,
                         scan_input_axes=[in_axis], scan_input_directions=[in_dir], scan_output_axes=[out_axis],
                         scan_output_directions=[out_dir], name="scan_0")
    m = _model([n], [helper.make_tensor_value_info("s0", F, elem), helper.make_tensor_value_info("x", F, x.shape)],
               [helper.make_tensor_value_info("s", F, None), helper.make_tensor_value_info("y", F, None)], 16)
    got, want, _ = _run_both(m, {"s0": np.ones(elem, np.float32), "x": x}, path, "scan_0")
    assert length > 1
    _assert_same(got, want)
