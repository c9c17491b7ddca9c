"""EPContext export and load of models whose control-flow nodes (If, Loop, Scan, nested Loop in If) run on the cpu
backend: the blob carries the subgraph attributes, the types of the outer values the bodies read and the outer
constants; the EPContext model, loaded with the fallback off, gives what the exporting session gives and has no node on
the reference backend. Oracle: onnxruntime (run_ort) on the original model."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.graph import epcontext
from tests._util import assert_outputs_match, cpu_only_options, run_ort

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, ins, outs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", ins, outs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _init(name, arr):
    return onnx.numpy_helper.from_array(np.asarray(arr, np.float32), name)


_RNG = np.random.default_rng(7)
_W = _RNG.standard_normal((4, 4)).astype(np.float32)      # an outer constant a body reads (MatMul weight)
_BIAS = _RNG.standard_normal(4).astype(np.float32)


def if_model():
    """If on a condition input: the then branch reads an outer computed value and an outer constant, the else branch
    another outer constant."""
    then = helper.make_graph([helper.make_node("Add", ["sx", "bias"], ["r"])], "then", [], [_vi("r", F, [4])])
    other = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["r2"])], "else", [], [_vi("r2", F, [4])])
    return _model([helper.make_node("Sigmoid", ["x"], ["sx"]),
                   helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="if"),
                   helper.make_node("Relu", ["y"], ["z"])],
                  [_vi("cond", B, []), _vi("x", F, [4])], [_vi("z", F, [4])], [_init("W", _W), _init("bias", _BIAS)])


def _loop_body():
    """acc <- tanh(acc @ W) + h + bias, scan output acc: reads W and bias (outer constants), h (outer, computed)."""
    return helper.make_graph(
        [helper.make_node("MatMul", ["acc", "W"], ["aw"]), helper.make_node("Tanh", ["aw"], ["t"]),
         helper.make_node("Add", ["t", "h"], ["th"]), helper.make_node("Add", ["th", "bias"], ["acc2"]),
         helper.make_node("Identity", ["acc2"], ["out"]), helper.make_node("Identity", ["c"], ["c2"])],
        "body", [_vi("i", I64, []), _vi("c", B, []), _vi("acc", F, [4])],
        [_vi("c2", B, []), _vi("acc2", F, [4]), _vi("out", F, [4])])


def loop_model():
    return _model([helper.make_node("Mul", ["x", "x"], ["h"]),
                   helper.make_node("Loop", ["M", "", "a0"], ["a", "ys"], body=_loop_body(), name="loop"),
                   helper.make_node("Neg", ["a"], ["na"])],
                  [_vi("M", I64, []), _vi("x", F, [4]), _vi("a0", F, [4])],
                  [_vi("na", F, [4]), _vi("ys", F, None)], [_init("W", _W), _init("bias", _BIAS)])


def scan_model():
    """Scan-9 over the rows of xs: s <- s + xs[t] * scale (scale computed outside) + bias (outer constant)."""
    body = helper.make_graph([helper.make_node("Mul", ["xt", "scale"], ["xs"]),
                              helper.make_node("Add", ["s", "xs"], ["s1"]),
                              helper.make_node("Add", ["s1", "bias"], ["s2"]),
                              helper.make_node("Identity", ["s2"], ["y"])], "body",
                             [_vi("s", F, [4]), _vi("xt", F, [4])], [_vi("s2", F, [4]), _vi("y", F, [4])])
    return _model([helper.make_node("Abs", ["k"], ["scale"]),
                   helper.make_node("Scan", ["s0", "xs_in"], ["s", "ys"], body=body, num_scan_inputs=1, name="scan")],
                  [_vi("k", F, [4]), _vi("s0", F, [4]), _vi("xs_in", F, [5, 4])],
                  [_vi("s", F, [4]), _vi("ys", F, [5, 4])], [_init("bias", _BIAS)], opset=16)


def loop_in_if_model():
    """If whose then branch runs the Loop of loop_model (its body reads the outermost W, bias and h), the else branch
    a MatMul with W."""
    then = helper.make_graph([helper.make_node("Loop", ["M", "", "a0"], ["a", "ys"], body=_loop_body(),
                                               name="inner_loop"),
                              helper.make_node("ReduceSum", ["ys"], ["r"], keepdims=0, axes=[0])],
                             "then", [], [_vi("r", F, [4])])
    other = helper.make_graph([helper.make_node("MatMul", ["a0", "W"], ["r2"])], "else", [], [_vi("r2", F, [4])])
    return _model([helper.make_node("Mul", ["x", "x"], ["h"]),
                   helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other, name="outer_if")],
                  [_vi("cond", B, []), _vi("M", I64, []), _vi("x", F, [4]), _vi("a0", F, [4])],
                  [_vi("y", F, [4])], [_init("W", _W), _init("bias", _BIAS)], opset=12)


def _x(seed):
    return np.random.default_rng(seed).standard_normal(4).astype(np.float32)


CASES = {
    "if": (if_model, [{"cond": np.array(True), "x": _x(1)}, {"cond": np.array(False), "x": _x(2)}]),
    "loop": (loop_model, [{"M": np.array(3, np.int64), "x": _x(3), "a0": _x(4)},
                          {"M": np.array(5, np.int64), "x": _x(5), "a0": _x(6)}]),
    "scan": (scan_model, [{"k": _x(7), "s0": _x(8), "xs_in": np.arange(20, dtype=np.float32).reshape(5, 4)},
                          {"k": _x(9), "s0": _x(10), "xs_in": -np.arange(20, dtype=np.float32).reshape(5, 4)}]),
    "loop_in_if": (loop_in_if_model, [{"cond": np.array(True), "M": np.array(4, np.int64), "x": _x(11), "a0": _x(12)},
                                      {"cond": np.array(False), "M": np.array(2, np.int64), "x": _x(13),
                                       "a0": _x(14)}]),
}


def _export(model, tmp_path, embed="0"):
    path = os.path.join(tmp_path, "m.onnx")
    onnx.save(model, path)
    so = cpu_only_options()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", embed)
    sess = onnxep.InferenceSession(path, so)
    return sess, os.path.join(tmp_path, "m_ctx.onnx")


@pytest.mark.parametrize("embed", ["0", "1"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_export_and_reload_matches_onnxruntime(case, embed, tmp_path):
    make, feeds_list = CASES[case]
    model = make()
    exporting, ctx_path = _export(model, tmp_path, embed)
    assert set(exporting.node_assignment.values()) == {"cpu"}
    ctx_model = onnx.load(ctx_path)
    ops = [n.op_type for n in ctx_model.graph.node]
    assert ops == ["EPContext"], ops          # the control-flow node is inside the blob, not a plain node
    loaded = onnxep.InferenceSession(ctx_path, cpu_only_options())
    assert "reference" not in set(loaded.node_assignment.values())
    assert set(loaded.node_assignment.values()) == {"cpu"}
    held = []
    for feeds in feeds_list:       # two runs with different inputs (the second from the planned arena)
        want = run_ort(model, feeds)
        got = loaded.run(None, feeds)
        assert_outputs_match(got, want)
        assert_outputs_match(exporting.run(None, feeds), want)
        held.append((got, want))
    for got, want in held:         # the first run's outputs are still right after the second
        assert_outputs_match(got, want)


def test_blob_records_outer_reads_and_scope(tmp_path):
    """The Loop's blob (format 2) holds the subgraph attribute, a ValueInfo for h (outer, computed), W and bias (outer
    constants) and the model's opsets; h is made inside the partition (not an input of the EPContext node), the
    constants are not inputs either."""
    sess, ctx_path = _export(loop_model(), tmp_path, "1")
    (node,) = onnx.load(ctx_path).graph.node
    assert sorted(node.input) == ["M", "a0", "x"]
    blob = [a for a in node.attribute if a.name == "ep_cache_context"][0].s
    _, version, hlen, *_ , mlen, dlen, digest = epcontext._HEADER.unpack_from(blob, 0)
    assert version == epcontext.FORMAT_VERSION == 2
    import json
    manifest = json.loads(blob[hlen:hlen + mlen])
    assert {c["name"] for c in manifest["constants"]} >= {"W", "bias"}
    off, n = manifest["graph"]
    data = blob[hlen + (mlen + 63) // 64 * 64:]
    g = onnx.GraphProto.FromString(data[off:off + n])
    loop = [x for x in g.node if x.op_type == "Loop"][0]
    assert [a.name for a in loop.attribute if a.type == onnx.AttributeProto.GRAPH] == ["body"]
    assert {"h", "W", "bias"} <= {v.name for v in g.value_info}
    off, n = manifest["scope"]
    scope = onnx.ModelProto.FromString(data[off:off + n])
    assert {o.domain: o.version for o in scope.opset_import}.get("") == 17


def test_blob_without_subgraphs_stays_format_1(tmp_path):
    m = _model([helper.make_node("MatMul", ["x", "W"], ["y"])], [_vi("x", F, [2, 4])], [_vi("y", F, [2, 4])],
               [_init("W", _W)])
    _export(m, tmp_path, "1")
    (node,) = onnx.load(os.path.join(tmp_path, "m_ctx.onnx")).graph.node
    blob = [a for a in node.attribute if a.name == "ep_cache_context"][0].s
    assert epcontext._HEADER.unpack_from(blob, 0)[1] == epcontext.PLAIN_FORMAT_VERSION == 1


def test_format_1_blob_with_subgraphs_is_refused(tmp_path):
    """A blob with a control-flow node but relabelled format 1 (what an older onnxep could not have recorded the
    scope for) is refused, naming the node."""
    _, ctx_path = _export(loop_model(), tmp_path, "0")
    (node,) = onnx.load(ctx_path).graph.node
    side = os.path.join(tmp_path, [a for a in node.attribute if a.name == "ep_cache_context"][0].s.decode())
    with open(side, "rb") as f:
        blob = f.read()
    magic, version, hlen, isa_len, fmt_len, _, mlen, dlen, digest = epcontext._HEADER.unpack_from(blob, 0)
    with open(side, "wb") as f:
        f.write(epcontext._header(mlen, dlen, digest, version=1) + blob[hlen:])
    with pytest.raises(onnxep.InvalidGraph, match="'loop' carries subgraphs.*format version 1"):
        onnxep.InferenceSession(ctx_path, cpu_only_options())


def test_loaded_bodies_follow_the_loading_session_placement(tmp_path):
    """Bodies are partitioned again on load with the loading session's settings: forcing Tanh off the cpu backend
    (fallback on) puts the Loop body's Tanh on the reference backend, with the same results."""
    model = loop_model()
    _, ctx_path = _export(model, tmp_path, "0")
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", "Tanh")
    sess = onnxep.InferenceSession(ctx_path, so)
    (kernel,) = [s[0] for p in sess.plans for s in p.steps if s[6] == "Loop"]
    assert [p.backend_name for p in kernel.body.plans] == ["cpu", "reference", "cpu"]
    feeds = CASES["loop"][1][0]
    assert_outputs_match(sess.run(None, feeds), run_ort(model, feeds))


def test_outer_value_from_a_reference_partition_is_a_node_input(tmp_path):
    """The If's then branch reads `sx`, made by a Sigmoid forced onto the reference backend: `sx` crosses into the
    EPContext node as an input, the Sigmoid stays a plain node, and the loaded model matches onnxruntime."""
    model = if_model()
    path = os.path.join(tmp_path, "m.onnx")
    onnx.save(model, path)
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", "Sigmoid")
    so.add_session_config_entry("ep.context_enable", "1")
    onnxep.InferenceSession(path, so)
    ctx = onnx.load(os.path.join(tmp_path, "m_ctx.onnx"))
    assert [n.op_type for n in ctx.graph.node] == ["Sigmoid", "EPContext"]
    assert "sx" in ctx.graph.node[1].input
    loaded = onnxep.InferenceSession(os.path.join(tmp_path, "m_ctx.onnx"))
    for feeds in CASES["if"][1]:
        assert_outputs_match(loaded.run(None, feeds), run_ort(model, feeds))


def test_body_calling_a_local_function(tmp_path):
    """A Loop body calls a model-local function (run by the reference backend inside the body, fallback on): the blob
    records the functions with the opsets, so the EPContext model loads even with its own functions list removed."""
    fn = helper.make_function("local", "Negate", ["v"], ["w"], [helper.make_node("Neg", ["v"], ["w"])],
                              [helper.make_opsetid("", 17)])
    body = helper.make_graph([helper.make_node("Negate", ["acc"], ["n"], domain="local", name="fnode"),
                              helper.make_node("Add", ["n", "x"], ["acc2"]), helper.make_node("Identity", ["c"], ["c2"])],
                             "body", [_vi("i", I64, []), _vi("c", B, []), _vi("acc", F, [2])],
                             [_vi("c2", B, []), _vi("acc2", F, [2])])
    m = _model([helper.make_node("Loop", ["M", "", "a0"], ["a"], body=body, name="loop")],
               [_vi("M", I64, []), _vi("x", F, [2]), _vi("a0", F, [2])], [_vi("a", F, [2])])
    m.opset_import.append(helper.make_opsetid("local", 1))
    m.functions.append(fn)
    path = os.path.join(tmp_path, "m.onnx")
    onnx.save(m, path)
    so = onnxep.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    onnxep.InferenceSession(path, so)
    ctx = onnx.load(os.path.join(tmp_path, "m_ctx.onnx"))
    ctx.ClearField("functions")
    onnx.save(ctx, os.path.join(tmp_path, "m_ctx.onnx"))
    loaded = onnxep.InferenceSession(os.path.join(tmp_path, "m_ctx.onnx"))
    assert loaded.node_assignment == {"loop": "cpu"}
    feeds = {"M": np.array(3, np.int64), "x": np.array([1, 2], np.float32), "a0": np.array([0.5, -1], np.float32)}
    assert_outputs_match(loaded.run(None, feeds), run_ort(m, feeds))
