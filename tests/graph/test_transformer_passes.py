"""The transformer fusions (graph/passes/fuse_layernorm.py, fuse_gelu.py, fuse_matmul_bias.py) and the BERT-like
encoder end to end.

Oracles: onnxruntime's CPU provider on the original (unfused) model; the same model through onnxep with
graph_optimization_level=ORT_DISABLE_ALL (no pass ran). The plans are inspected to check the pattern was fused (node
types counted)."""
import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from onnxep import _models
from tests._util import make_model, run_ort

RNG = np.random.default_rng(11)


def _session(model, level=onnxep.GraphOptimizationLevel.ORT_ENABLE_ALL, path="", threads=0):
    so = onnxep.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = threads
    if path:
        so.optimized_model_filepath = path
    return onnxep.InferenceSession(model.SerializeToString() if isinstance(model, onnx.ModelProto) else model, so)


def _ops(sess):
    return collections.Counter(st[6] for p in sess.plans for st in getattr(p, "steps", ()))


def _rel_err(got, want):
    """max |got - want| / max |want| (the bench's check)."""
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def _check(model, feeds, rtol=1e-4, cpu_only=True):
    """Fused onnxep vs onnxruntime on the original model and vs unfused onnxep; returns the fused session's ops."""
    fused = _session(model)
    if cpu_only:
        assert set(fused.node_assignment.values()) == {"cpu"}
    got = fused.run(None, feeds)
    plain = _session(model, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)
    for g, o, p in zip(got, run_ort(model, feeds), plain):
        assert g.shape == o.shape and g.dtype == o.dtype
        assert _rel_err(g, o) <= rtol
        assert _rel_err(g, p) <= rtol
    return _ops(fused)


def _c(v):
    return np.array(v, np.float32)


# ------------------------------------------------------------------------------------------------------------ Gelu
def _gelu_nodes(order, x="x", y="y", div="div"):
    """The Erf form of Gelu in one of the orders exporters write."""
    first = (helper.make_node("Div", [x, "sqrt2"], ["d"]) if div == "div" else
             helper.make_node("Mul", ["inv_sqrt2", x], ["d"]))
    nodes = [first, helper.make_node("Erf", ["d"], ["e"]), helper.make_node("Add", ["one", "e"], ["p"])]
    if order == "x_p_half":
        nodes += [helper.make_node("Mul", [x, "p"], ["m"]), helper.make_node("Mul", ["m", "half"], [y])]
    elif order == "p_half_x":
        nodes += [helper.make_node("Mul", ["p", "half"], ["m"]), helper.make_node("Mul", [x, "m"], [y])]
    else:  # x_half_p
        nodes += [helper.make_node("Mul", [x, "half"], ["m"]), helper.make_node("Mul", ["m", "p"], [y])]
    return nodes


GELU_CONSTS = {"sqrt2": _c(np.sqrt(2.0)), "inv_sqrt2": _c(1 / np.sqrt(2.0)), "one": _c(1.0), "half": _c(0.5)}


@pytest.mark.parametrize("order", ["x_p_half", "p_half_x", "x_half_p"])
@pytest.mark.parametrize("div", ["div", "mul"])
def test_gelu_fused(order, div):
    x = (RNG.standard_normal((3, 50, 70)) * 3).astype(np.float32)
    m = make_model(_gelu_nodes(order, div=div), {"x": x}, ["y"], initializers=GELU_CONSTS)
    ops = _check(m, {"x": x}, rtol=1e-6)
    assert ops == {"Gelu": 1}


def test_gelu_not_fused_when_a_constant_differs_or_an_intermediate_is_read():
    """0.4 instead of 0.5: not a Gelu. The Erf output also a graph output: it must stay computed."""
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    m = make_model(_gelu_nodes("x_p_half"), {"x": x}, ["y"], initializers=dict(GELU_CONSTS, half=_c(0.4)))
    assert "Gelu" not in _check(m, {"x": x}, rtol=1e-6)
    m = make_model(_gelu_nodes("x_p_half"), {"x": x}, ["y", "e"], initializers=GELU_CONSTS)
    assert "Gelu" not in _check(m, {"x": x}, rtol=1e-6)


def test_gelu_not_fused_below_extended_level():
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    m = make_model(_gelu_nodes("x_p_half"), {"x": x}, ["y"], initializers=GELU_CONSTS)
    assert _ops(_session(m, onnxep.GraphOptimizationLevel.ORT_ENABLE_BASIC))["Erf"] == 1


# ------------------------------------------------------------------------------------------------ LayerNormalization
def _ln_nodes(sq="pow", affine=True, axes=(-1,), opset=17, bias=True):
    if opset >= 18:
        rm = [helper.make_node("ReduceMean", ["x", "axes"], ["mean"]),
              helper.make_node("ReduceMean", ["sq", "axes"], ["var"])]
    else:
        rm = [helper.make_node("ReduceMean", ["x"], ["mean"], axes=list(axes)),
              helper.make_node("ReduceMean", ["sq"], ["var"], axes=list(axes))]
    nodes = [rm[0], helper.make_node("Sub", ["x", "mean"], ["d"]),
             helper.make_node("Pow", ["d", "two"], ["sq"]) if sq == "pow" else helper.make_node("Mul", ["d", "d"],
                                                                                               ["sq"]),
             rm[1], helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["std"]),
             helper.make_node("Div", ["d", "std"], ["n" if affine else "y"])]
    if affine:
        nodes.append(helper.make_node("Mul", ["gamma", "n"], ["s" if bias else "y"]))
        if bias:
            nodes.append(helper.make_node("Add", ["s", "beta"], ["y"]))
    return nodes


def _ln_consts(c, axes=(-1,)):
    return {"two": _c(2.0), "eps": _c(1e-5), "gamma": RNG.uniform(0.5, 1.5, c).astype(np.float32),
            "beta": RNG.standard_normal(c).astype(np.float32), "axes": np.array(axes, np.int64)}


@pytest.mark.parametrize("sq", ["pow", "mul"])
@pytest.mark.parametrize("affine,bias", [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("opset", [13, 17, 18])
def test_layernorm_fused(sq, affine, bias, opset):
    """Fused into LayerNormalization (com.onnxep's below opset 17, where the standard op does not exist)."""
    x = (RNG.standard_normal((2, 16, 64)) * 2 + 1).astype(np.float32)
    m = make_model(_ln_nodes(sq, affine, opset=opset, bias=bias), {"x": x}, ["y"], opset=opset,
                   initializers=_ln_consts(64))
    ops = _check(m, {"x": x}, rtol=1e-5)
    assert ops == {"LayerNormalization": 1}
    sess = _session(m)
    domains = {st[0].domain for p in sess.plans for st in p.steps}
    assert domains == ({""} if opset >= 17 else {"com.onnxep"})


def test_layernorm_fused_over_two_trailing_axes():
    x = RNG.standard_normal((3, 4, 5, 6)).astype(np.float32)
    consts = dict(_ln_consts(1), gamma=RNG.uniform(0.5, 1.5, (5, 6)).astype(np.float32),
                  beta=RNG.standard_normal((1, 6)).astype(np.float32))
    m = make_model(_ln_nodes(axes=(2, 3)), {"x": x}, ["y"], initializers=consts)
    assert _check(m, {"x": x}, rtol=1e-5) == {"LayerNormalization": 1}


def test_layernorm_not_fused_over_a_leading_axis():
    """ReduceMean over axis 1 of a rank-3 tensor: not the trailing dims, not a LayerNormalization."""
    x = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    m = make_model(_ln_nodes(axes=(1,), affine=False), {"x": x}, ["y"], initializers=_ln_consts(5))
    assert "LayerNormalization" not in _check(m, {"x": x}, rtol=1e-5, cpu_only=False)   # ReduceMean, Pow: reference


# ------------------------------------------------------------------------------------------ MatMul + bias [+ act]
@pytest.mark.parametrize("act", ["", "Relu", "Gelu", "Gelu20"])
@pytest.mark.parametrize("a_shape,bias_shape", [((64, 100), (70,)), ((2, 9, 100), (1, 70)), ((100,), (70,))])
def test_matmul_bias_fused(act, a_shape, bias_shape):
    """MatMul + bias [+ Relu | Gelu] -> one FusedMatMul. "Gelu" is the Erf form torch.onnx writes below opset 20,
    "Gelu20" the ONNX Gelu op (opset 20, approximate "none") it writes from opset 20 on (oracle: onnxruntime)."""
    a = RNG.standard_normal(a_shape).astype(np.float32)
    consts = dict(GELU_CONSTS, w=(RNG.standard_normal((100, 70)) * 0.1).astype(np.float32),
                  b=RNG.standard_normal(bias_shape).astype(np.float32))
    nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]),
             helper.make_node("Add", ["b", "mm"], ["y" if not act else "h"])]
    if act == "Relu":
        nodes.append(helper.make_node("Relu", ["h"], ["y"]))
    elif act == "Gelu":
        nodes += _gelu_nodes("x_p_half", x="h")
    elif act == "Gelu20":
        nodes.append(helper.make_node("Gelu", ["h"], ["y"]))
    m = make_model(nodes, {"a": a}, ["y"], initializers=consts, opset=20 if act == "Gelu20" else 17)
    assert _check(m, {"a": a}, rtol=1e-5) == {"FusedMatMul": 1}


# ------------------------------------------------------------------- layer scale after a FusedMatMul (+ residual)
def _scale_model(scale_shape, residual=True, act="", gemm=False, k=100, n=70, rows=(2, 9)):
    """[Gemm | MatMul + bias] [-> act] -> Mul(scale) [-> Add(residual)], as ConvNeXt's block ends (its Transposes
    taken by the layout pass)."""
    a = RNG.standard_normal(rows + (k,)).astype(np.float32)
    r = RNG.standard_normal(rows + (n,)).astype(np.float32)
    consts = {"w": (RNG.standard_normal((n, k) if gemm else (k, n)) * 0.1).astype(np.float32),
              "b": RNG.standard_normal(n).astype(np.float32),
              "g": RNG.uniform(-2, 2, scale_shape).astype(np.float32)}
    if gemm:
        nodes = [helper.make_node("Gemm", ["a", "w", "b"], ["h"], transB=1)]
    else:
        nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"])]
    if act:
        nodes.append(helper.make_node(act, ["h"], ["h2"]))
    nodes.append(helper.make_node("Mul", ["g", "h2" if act else "h"], ["s" if residual else "y"]))
    feeds = {"a": a}
    if residual:
        nodes.append(helper.make_node("Add", ["r", "s"], ["y"]))
        feeds["r"] = r
    return make_model(nodes, feeds, ["y"], initializers=consts), feeds


@pytest.mark.parametrize("scale_shape", [(70,), (1, 1, 70), (1,)])
@pytest.mark.parametrize("residual", [True, False])
def test_layer_scale_folded_into_matmul(scale_shape, residual):
    """MatMul + bias -> Mul(per-channel or scalar constant) [-> Add(residual)] -> one FusedMatMul by the scaled
    weight and bias (fuse_matmul_scale). Oracle: onnxruntime on the unfused model; the scaled weight rounds once per
    element (the module docstring), so within 1e-5 of the output's magnitude."""
    m, feeds = _scale_model(scale_shape, residual)
    assert _check(m, feeds, rtol=1e-5) == {"FusedMatMul": 1}


def test_layer_scale_folded_into_lone_gemv_gemm():
    """A batch-1 Gemm with B stored (N, K) (a FusedMatMul with trans_b: fuse_matmul_bias.LONE_GEMV) scaled per output
    row of B, then a residual: one FusedMatMul. Oracle: onnxruntime."""
    m, feeds = _scale_model((256,), True, gemm=True, k=4096, n=256, rows=(1,))
    assert _check(m, feeds, rtol=1e-5) == {"FusedMatMul": 1}


@pytest.mark.parametrize("case", ["per_row", "after_relu", "computed"])
def test_layer_scale_not_folded(case):
    """A scale that is not per output channel ((rows, 1)), one after an activation (Relu(x) * s is not Relu of a
    scaled product for s < 0), or a computed one: the Mul stays. Oracle: onnxruntime."""
    if case == "computed":
        m, feeds = _scale_model((70,), False)
        g = m.graph.initializer.pop(next(i for i, t in enumerate(m.graph.initializer) if t.name == "g"))
        m.graph.input.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, [70]))
        feeds["g"] = numpy_helper.to_array(g)
    else:
        m, feeds = _scale_model((9, 1) if case == "per_row" else (70,), False,
                                act="Relu" if case == "after_relu" else "")
    ops = _check(m, feeds, rtol=1e-5)
    assert ops["Mul"] == 1 and ops["FusedMatMul"] == 1, ops


def test_matmul_not_fused_with_tanh_gelu():
    """The ONNX Gelu with approximate "tanh" is another function: the FusedMatMul takes the bias, the Gelu stays."""
    a = RNG.standard_normal((8, 100)).astype(np.float32)
    consts = {"w": (RNG.standard_normal((100, 70)) * 0.1).astype(np.float32),
              "b": RNG.standard_normal(70).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"]),
             helper.make_node("Gelu", ["h"], ["y"], approximate="tanh")]
    m = make_model(nodes, {"a": a}, ["y"], initializers=consts, opset=20)
    assert _check(m, {"a": a}, rtol=1e-5) == {"FusedMatMul": 1, "Gelu": 1}


@pytest.mark.parametrize("act", ["", "Relu"])
@pytest.mark.parametrize("a_shape", [(1, 16, 100), (64, 100)])
def test_matmul_bias_residual_fused(act, a_shape):
    """MatMul -> Add(bias) -> Add(residual) [-> Relu]: the residual goes into the SGEMM epilogue too."""
    a = RNG.standard_normal(a_shape).astype(np.float32)
    r = RNG.standard_normal(a_shape[:-1] + (70,)).astype(np.float32)
    consts = {"w": (RNG.standard_normal((100, 70)) * 0.1).astype(np.float32),
              "b": RNG.standard_normal(70).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"]),
             helper.make_node("Add", ["r", "h"], ["y" if not act else "s"])]
    if act:
        nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    m = make_model(nodes, {"a": a, "r": r}, ["y"], initializers=consts)
    assert _check(m, {"a": a, "r": r}, rtol=1e-5) == {"FusedMatMul": 1}
    so = onnxep.SessionOptions()                     # the same without pre-packing (numpy adds the residual)
    so.add_session_config_entry("session.disable_prepacking", "1")
    got = onnxep.InferenceSession(m.SerializeToString(), so).run(None, {"a": a, "r": r})[0]
    np.testing.assert_allclose(got, _session(m).run(None, {"a": a, "r": r})[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("act", ["", "Relu"])
@pytest.mark.parametrize("a_shape,r_shape", [((2, 5, 40), (2, 5, 24)), ((2, 5, 40), (1, 5, 24)),
                                             ((1, 5, 40), (3, 5, 24)), ((2, 1, 40), (2, 5, 24))])
def test_matmul_residual_with_other_symbolic_dims(act, a_shape, r_shape):
    """The product's dims named apart from the residual's (a TorchScript export's Reshape with run-time shapes):
    the residual still joins the FusedMatMul; equal shapes at run time take the epilogue, others (1 against n either
    way) numpy's broadcasting, as the Add did, with and without pre-packing. Oracle: onnxruntime."""
    a = RNG.standard_normal(a_shape).astype(np.float32)
    r = RNG.standard_normal(r_shape).astype(np.float32)
    consts = {"w": (RNG.standard_normal((40, 24)) * 0.1).astype(np.float32),
              "b": RNG.standard_normal(24).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"]),
             helper.make_node("Add", ["r", "h"], ["y" if not act else "s"])]
    if act:
        nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    m = make_model(nodes, {"a": a, "r": r}, ["y"], initializers=consts,
                   input_shapes={"a": ["p", "q", 40], "r": ["n", "l", 24]})
    feeds = {"a": a, "r": r}
    assert _check(m, feeds, rtol=1e-5) == {"FusedMatMul": 1}
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_prepacking", "1")
    for _ in range(2):        # the second run: the compiled run loop
        got = onnxep.InferenceSession(m.SerializeToString(), so).run(None, feeds)[0]
        want = run_ort(m, feeds)[0]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    sess = _session(m, threads=1)
    for _ in range(3):
        got = sess.run(None, feeds)[0]
        np.testing.assert_allclose(got, run_ort(m, feeds)[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("c_shape,beta", [((70,), 1.0), ((1, 70), 0.5), (None, 1.0), ((1,), 2.0)])
@pytest.mark.parametrize("tail", ["Relu", "residual"])
def test_gemm_fused(trans_b, c_shape, beta, tail):
    """Gemm (+ C as a row bias, beta) followed by Relu or a residual Add -> FusedMatMul (transB packed as Gemm does);
    a lone Gemm stays a Gemm."""
    a = RNG.standard_normal((16, 100)).astype(np.float32)
    w = (RNG.standard_normal((70, 100) if trans_b else (100, 70)) * 0.1).astype(np.float32)
    consts = {"w": w}
    ins = ["a", "w"]
    if c_shape is not None:
        consts["c"] = RNG.standard_normal(c_shape).astype(np.float32)
        ins.append("c")
    feeds = {"a": a}
    nodes = [helper.make_node("Gemm", ins, ["g"], transB=trans_b, beta=beta)]
    if tail == "Relu":
        nodes.append(helper.make_node("Relu", ["g"], ["y"]))
    else:
        feeds["r"] = RNG.standard_normal((16, 70)).astype(np.float32)
        nodes.append(helper.make_node("Add", ["g", "r"], ["y"]))
    m = make_model(nodes, feeds, ["y"], initializers=consts)
    assert _check(m, feeds, rtol=1e-5) == {"FusedMatMul": 1}
    so = onnxep.SessionOptions()                     # the same without pre-packing
    so.add_session_config_entry("session.disable_prepacking", "1")
    got = onnxep.InferenceSession(m.SerializeToString(), so).run(None, feeds)[0]
    np.testing.assert_allclose(got, _session(m).run(None, feeds)[0], rtol=1e-6, atol=1e-6)
    lone = make_model(nodes[:1], {"a": a}, ["g"], initializers=consts)
    assert _ops(_session(lone)) == {"Gemm": 1}



@pytest.mark.parametrize("c_shape,beta", [((70,), 1.0), ((1, 70), 0.5), (None, 1.0), ((1,), 2.0)])
@pytest.mark.parametrize("threads", [1, 2])
def test_lone_gemm_one_row_gemv(c_shape, beta, threads, monkeypatch):
    """A lone Gemm with A of one row by its static shape, transB 1 and a weight of LONE_GEMV_BYTES or more (a batch-1
    classifier head) -> FusedMatMul, which runs gemv_f32 on B as stored (fuse_matmul_bias.LONE_GEMV); with the switch
    off, a smaller weight, transB 0, or rows not known to be one, it stays a Gemm. Oracle: onnxruntime on the original
    model and onnxep with no pass (_check)."""
    import importlib
    pass_mod = importlib.import_module("onnxep.graph.passes.fuse_matmul_bias")
    w = (RNG.standard_normal((70, 1000)) * 0.1).astype(np.float32)   # 1000: the GEMV's 16 lanes and a tail
    monkeypatch.setattr(pass_mod, "LONE_GEMV_BYTES", w.nbytes)      # the threshold, reached
    consts = {"w": w}
    ins = ["a", "w"]
    if c_shape is not None:
        consts["c"] = RNG.standard_normal(c_shape).astype(np.float32)
        ins.append("c")
    feeds = {"a": RNG.standard_normal((1, 1000)).astype(np.float32)}
    m = make_model([helper.make_node("Gemm", ins, ["y"], transB=1, beta=beta)], feeds, ["y"], initializers=consts)
    assert _check(m, feeds, rtol=1e-5) == {"FusedMatMul": 1}
    sess = _session(m, threads=threads)
    assert _ops(sess) == {"FusedMatMul": 1}
    plain = _session(m, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL, threads=threads).run(None, feeds)[0]
    np.testing.assert_allclose(sess.run(None, feeds)[0], plain, rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(pass_mod, "LONE_GEMV", False)
    assert _ops(_session(m, threads=threads)) == {"Gemm": 1}
    monkeypatch.setattr(pass_mod, "LONE_GEMV", True)
    monkeypatch.setattr(pass_mod, "LONE_GEMV_BYTES", w.nbytes + 1)
    assert _ops(_session(m, threads=threads)) == {"Gemm": 1}
    monkeypatch.setattr(pass_mod, "LONE_GEMV_BYTES", w.nbytes)
    m0 = make_model([helper.make_node("Gemm", ins, ["y"], transB=0, beta=beta)], feeds, ["y"],
                    initializers=dict(consts, w=np.ascontiguousarray(w.T)))
    assert _ops(_session(m0)) == {"Gemm": 1}
    g = helper.make_graph([helper.make_node("Gemm", ins, ["y"], transB=1, beta=beta)], "g",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 1000])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, n) for n, v in consts.items()])
    dyn = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    assert _ops(_session(dyn)) == {"Gemm": 1}

def test_matmul_bias_not_fused():
    """A bias that would broadcast the product to a bigger shape, a weight that is a graph input, and a product that
    is also a graph output: the nodes stay as they are."""
    a = RNG.standard_normal((8, 10)).astype(np.float32)
    w = RNG.standard_normal((10, 6)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["y"])]
    m = make_model(nodes, {"a": a}, ["y"], initializers={"w": w, "b": RNG.standard_normal((3, 1, 6)).astype(
        np.float32)})
    assert "FusedMatMul" not in _check(m, {"a": a})
    m = make_model(nodes, {"a": a, "w": w}, ["y"], initializers={"b": RNG.standard_normal(6).astype(np.float32)})
    assert "FusedMatMul" not in _check(m, {"a": a, "w": w})
    m = make_model(nodes, {"a": a}, ["y", "mm"], initializers={"w": w, "b": RNG.standard_normal(6).astype(np.float32)})
    assert "FusedMatMul" not in _check(m, {"a": a})


def test_fused_matmul_packing_disabled():
    """FusedMatMul with prepacking disabled (B packed per call) gives the packed result."""
    a = RNG.standard_normal((5, 40)).astype(np.float32)
    consts = {"w": RNG.standard_normal((40, 33)).astype(np.float32), "b": RNG.standard_normal(33).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["a", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["h"]),
             helper.make_node("Relu", ["h"], ["y"])]
    m = make_model(nodes, {"a": a}, ["y"], initializers=consts)
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_prepacking", "1")
    got = onnxep.InferenceSession(m.SerializeToString(), so).run(None, {"a": a})[0]
    np.testing.assert_array_equal(got, _session(m).run(None, {"a": a})[0])


# ------------------------------------------------------------------------------------------------- StridedMatMul
def _attention_nodes(div=False, merge=True):
    """Q / K / V heads split by Reshape + Transpose, scores scaled, softmax, context merged back -- as exported."""
    return [helper.make_node("Reshape", ["q", "split"], ["q4"]),
            helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", ["k", "split"], ["k4"]),
            helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
            helper.make_node("Reshape", ["v", "split"], ["v4"]),
            helper.make_node("Transpose", ["v4"], ["vt"], perm=[0, 2, 1, 3]),
            helper.make_node("MatMul", ["qt", "kt"], ["s"]),
            helper.make_node("Div" if div else "Mul", ["s", "scale"], ["ss"]),
            helper.make_node("Softmax", ["ss"], ["p"], axis=-1),
            helper.make_node("MatMul", ["p", "vt"], ["c"])] + (
        [helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 2, 1, 3]),
         helper.make_node("Reshape", ["ct", "merge"], ["y"])] if merge else
        [helper.make_node("Identity", ["c"], ["y"])])


@pytest.mark.parametrize("div", [False, True])
@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("b,s,h,d", [(1, 128, 12, 64), (2, 7, 3, 5)])
def test_attention_transposes_fused(div, merge, b, s, h, d):
    """Every Transpose, the scale, the softmax and both products fold into one FusedAttention (no copy of a
    transposed operand, no scores tensor)."""
    feeds = {x: RNG.standard_normal((b, s, h * d)).astype(np.float32) for x in ("q", "k", "v")}
    consts = {"split": np.array([b, s, h, d], np.int64), "merge": np.array([b, s, h * d], np.int64),
              "scale": _c(np.sqrt(d) if div else 1 / np.sqrt(d))}
    m = make_model(_attention_nodes(div, merge), feeds, ["y"], initializers=consts)
    ops = _check(m, feeds, rtol=1e-5)
    assert ops["FusedAttention"] == 1 and not {"StridedMatMul", "Softmax", "Transpose", "MatMul"} & set(ops)
    assert not {"Mul", "Div"} & set(ops)


@pytest.mark.parametrize("pa,pb,py,a_shape,b_shape", [
    ((0, 2, 1), (0, 1, 2), (0, 2, 1), (3, 5, 4), (3, 5, 6)),
    ((1, 0, 2), (2, 0, 1), (1, 2, 0), (5, 2, 4), (4, 6, 2)),
    ((0, 1, 3, 2), (0, 1, 2, 3), (0, 1, 2, 3), (2, 1, 6, 5), (1, 3, 6, 7)),   # broadcast batch dims on both sides
])
def test_strided_matmul_arbitrary_perms(pa, pb, py, a_shape, b_shape):
    """Oracle: onnxruntime on the original Transpose / MatMul / Transpose graph."""
    feeds = {"a": RNG.standard_normal(a_shape).astype(np.float32), "b": RNG.standard_normal(b_shape).astype(
        np.float32)}
    nodes = [helper.make_node("Transpose", ["a"], ["at"], perm=list(pa)),
             helper.make_node("Transpose", ["b"], ["bt"], perm=list(pb)),
             helper.make_node("MatMul", ["at", "bt"], ["p"]), helper.make_node("Transpose", ["p"], ["y"], perm=list(py))]
    m = make_model(nodes, feeds, ["y"])
    assert _check(m, feeds, rtol=1e-5) == {"StridedMatMul": 1}


def test_strided_matmul_not_fused_when_a_transpose_is_shared():
    """The transposed K is also a graph output: its Transpose stays, the MatMul takes the other one."""
    feeds = {"a": RNG.standard_normal((2, 4, 3)).astype(np.float32),
             "b": RNG.standard_normal((2, 5, 4)).astype(np.float32)}
    nodes = [helper.make_node("Transpose", ["a"], ["at"], perm=[0, 2, 1]),
             helper.make_node("Transpose", ["b"], ["bt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["at", "bt"], ["y"])]
    m = make_model(nodes, feeds, ["y", "bt"])
    ops = _check(m, feeds, rtol=1e-5)
    assert ops == {"StridedMatMul": 1, "Transpose": 1}


# ------------------------------------------------------------------------------------------------- MaskedSoftmax
@pytest.mark.parametrize("x_shape,m_shape,mask_first", [
    ((1, 12, 128, 128), (1, 1, 1, 128), False),     # BERT's additive mask
    ((2, 3, 5, 7), (2, 1, 5, 7), True),
    ((2, 3, 5, 7), (7,), False),
    ((4, 9), (4, 1), False),                        # one mask value per row
    ((2, 3, 5, 7), (2, 3, 5, 7), False),
])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_mask_fused(x_shape, m_shape, mask_first, opset):
    x = (RNG.standard_normal(x_shape) * 4).astype(np.float32)
    mask = np.where(RNG.uniform(size=m_shape) < 0.3, -10000.0, 0.0).astype(np.float32)
    feeds = {"x": x, "m": mask}
    axis = len(x_shape) - 1 if opset < 13 else -1
    nodes = [helper.make_node("Add", ["m", "x"] if mask_first else ["x", "m"], ["s"]),
             helper.make_node("Softmax", ["s"], ["y"], axis=axis)]
    m = make_model(nodes, feeds, ["y"], opset=opset)
    assert _check(m, feeds, rtol=1e-5) == {"MaskedSoftmax": 1}


def test_softmax_mask_not_fused():
    """Softmax over another axis than the last; the masked scores also a graph output."""
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    feeds = {"x": x, "m": RNG.standard_normal((1, 1, 4)).astype(np.float32)}
    nodes = [helper.make_node("Add", ["x", "m"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=1)]
    assert "MaskedSoftmax" not in _check(make_model(nodes, feeds, ["y"]), feeds)
    nodes[1] = helper.make_node("Softmax", ["s"], ["y"], axis=-1)
    assert "MaskedSoftmax" not in _check(make_model(nodes, feeds, ["y", "s"]), feeds)


# ------------------------------------------------------------------------------------------------ FusedAttention
@pytest.mark.parametrize("masked", [True, False])
@pytest.mark.parametrize("b,s,h,d", [(1, 150, 2, 8), (2, 7, 3, 5)])
def test_attention_fused_with_mask(masked, b, s, h, d):
    """Oracle: onnxruntime on the exported pattern (head split, scale, additive mask + Softmax or Softmax alone,
    context merge): one FusedAttention; 150 query rows span two of the kernel's row blocks."""
    feeds = {x: RNG.standard_normal((b, s, h * d)).astype(np.float32) for x in ("q", "k", "v")}
    consts = {"split": np.array([b, s, h, d], np.int64), "merge": np.array([b, s, h * d], np.int64),
              "scale": _c(1 / np.sqrt(d))}
    nodes = _attention_nodes()
    if masked:
        feeds["m"] = np.where(RNG.uniform(size=(b, 1, 1, s)) < 0.3, -10000.0, 0.0).astype(np.float32)
        i = next(i for i, n in enumerate(nodes) if n.op_type == "Softmax")
        nodes[i:i + 1] = [helper.make_node("Add", ["ss", "m"], ["sm"]),
                          helper.make_node("Softmax", ["sm"], ["p"], axis=-1)]
    m = make_model(nodes, feeds, ["y"], initializers=consts)
    assert _check(m, feeds, rtol=1e-5) == {"FusedAttention": 1, "Reshape": 4}


def test_attention_not_fused_when_probabilities_are_read():
    """The probabilities are also a graph output: the products and the softmax stay apart."""
    b, s, h, d = 1, 9, 2, 4
    feeds = {x: RNG.standard_normal((b, s, h * d)).astype(np.float32) for x in ("q", "k", "v")}
    consts = {"split": np.array([b, s, h, d], np.int64), "merge": np.array([b, s, h * d], np.int64),
              "scale": _c(0.5)}
    m = make_model(_attention_nodes(), feeds, ["y", "p"], initializers=consts)
    ops = _check(m, feeds, rtol=1e-5)
    assert "FusedAttention" not in ops and ops["StridedMatMul"] == 2 and ops["Softmax"] == 1


def _softmax_attention_nodes(v_perm):
    """y = Softmax(q @ Transpose(k, (0, 1, 3, 2))) @ Transpose(v, v_perm): no scale, no mask."""
    return [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
            helper.make_node("MatMul", ["q", "kt"], ["sc"]),
            helper.make_node("Softmax", ["sc"], ["p"], axis=-1),
            helper.make_node("Transpose", ["v"], ["vt"], perm=list(v_perm)),
            helper.make_node("MatMul", ["p", "vt"], ["y"])]


def test_attention_fused_values_broadcast_over_more_heads():
    """One query / key head against four value heads (the second product broadcasts batch dims the scores do not
    have): the op computes the scores once and broadcasts them, its unfused order. Oracle: onnxruntime."""
    s, h, d = 6, 4, 5
    feeds = {"q": RNG.standard_normal((1, 1, s, d)).astype(np.float32),
             "k": RNG.standard_normal((1, 1, s, d)).astype(np.float32),
             "v": RNG.standard_normal((1, s, h, d)).astype(np.float32)}
    m = make_model(_softmax_attention_nodes([0, 2, 1, 3]), feeds, ["y"])
    assert _check(m, feeds, rtol=1e-5) == {"FusedAttention": 1}


def test_attention_fused_with_no_keys():
    """Zero keys: the softmax rows are empty and the context is zeros (numpy.matmul over an empty inner dim), as
    the unfused ops give. Oracle: numpy."""
    feeds = {"q": RNG.standard_normal((1, 2, 3, 4)).astype(np.float32),
             "k": np.zeros((1, 2, 0, 4), np.float32), "v": np.zeros((1, 2, 0, 4), np.float32)}
    m = make_model(_softmax_attention_nodes([0, 1, 2, 3]), feeds, ["y"])
    sess = _session(m)
    assert _ops(sess) == {"FusedAttention": 1}
    got = sess.run(None, feeds)[0]
    np.testing.assert_array_equal(got, np.zeros((1, 2, 3, 4), np.float32))
    np.testing.assert_array_equal(_session(m, onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL).run(None, feeds)[0], got)


# ---------------------------------------------------------------------------------------------------- the encoder
def test_bert_encoder_end_to_end():
    """The 4-layer BERT-like encoder of the bench suite: no reference fallback, every pattern fused (per layer: 6
    FusedMatMul, one with Gelu, two with the residual; 1 FusedAttention; 2 LayerNormalization; no Erf / Div /
    Transpose left), output within 1e-4 (max diff / max |ort|) of onnxruntime, at 1 and 2 threads."""
    model, feeds = _models.bert_encoder(), _models.bert_feeds()
    want = run_ort(model, feeds)[0]
    for threads in (1, 2):
        sess = _session(model, threads=threads)
        assert set(sess.node_assignment.values()) == {"cpu"}
        ops = _ops(sess)
        assert ops["FusedMatMul"] == 24 and ops["LayerNormalization"] == 8 and ops["FusedAttention"] == 4
        assert not {"Erf", "Div", "Gelu", "Transpose", "MatMul", "Mul", "Add", "Softmax"} & set(ops)
        assert not {"StridedMatMul", "MaskedSoftmax"} & set(ops)
        got = sess.run(None, feeds)[0]
        assert got.shape == want.shape and _rel_err(got, want) <= 1e-4


def test_bert_encoder_decomposed_layernorm_and_saved_model(tmp_path):
    """The encoder with decomposed LayerNormalization: fused like the LayerNormalization-17 one, the same output as
    onnxruntime on the original and as onnxep without passes; the optimized model written by
    optimized_model_filepath passes onnx.checker, loads, and gives the same output."""
    model = _models.bert_encoder(layers=2, hidden=256, heads=4, seq=32, layernorm="decomposed")
    feeds = _models.bert_feeds((1, 32, 256), masked=5)
    ops = _check(model, feeds)
    assert ops["LayerNormalization"] == 4 and "ReduceMean" not in ops and ops["FusedMatMul"] == 12
    assert ops["FusedAttention"] == 2 and not {"StridedMatMul", "MaskedSoftmax"} & set(ops)
    path = str(tmp_path / "opt.onnx")
    got = _session(model, path=path).run(None, feeds)[0]
    onnx.checker.check_model(onnx.load(path))
    again = onnxep.InferenceSession(path)
    np.testing.assert_array_equal(again.run(None, feeds)[0], got)
    assert _ops(again) == _ops(_session(model))


def test_bert_encoder_symbolic_shapes():
    """The encoder exported with dynamic axes (batch and seq symbolic, Reshape targets [0, 0, heads, d] and
    [0, 0, hidden]): every pattern still fuses (residuals and masks compared by their symbolic dims), and two
    different sequence lengths through one session match onnxruntime."""
    from onnx import numpy_helper
    model = _models.bert_encoder(layers=2, hidden=128, heads=4, seq=16)
    for init in model.graph.initializer:
        if init.name.startswith("heads_shape"):
            init.CopyFrom(numpy_helper.from_array(np.array([0, 0, 4, 32], np.int64), init.name))
        if init.name.startswith("merge_shape"):
            init.CopyFrom(numpy_helper.from_array(np.array([0, 0, 128], np.int64), init.name))
    for vi in list(model.graph.input) + list(model.graph.output):
        dims = vi.type.tensor_type.shape.dim
        dims[0].dim_param = "batch"
        dims[3 if vi.name == "attention_mask" else 1].dim_param = "seq"
    onnx.checker.check_model(model)
    sess = _session(model)
    ops = _ops(sess)
    assert set(sess.node_assignment.values()) == {"cpu"}
    assert ops["FusedMatMul"] == 12 and ops["FusedAttention"] == 2
    assert not {"Add", "Softmax", "Transpose", "MatMul", "StridedMatMul", "MaskedSoftmax"} & set(ops)
    for batch, seq in ((2, 16), (1, 37)):
        feeds = _models.bert_feeds((batch, seq, 128), masked=3)
        got = sess.run(None, feeds)[0]
        want = run_ort(model, feeds)[0]
        assert got.shape == want.shape and _rel_err(got, want) <= 1e-4


def test_fusions_leave_ops_forced_to_the_reference_backend():
    """onnxep.fallback_op_types names op types that must run on the reference backend: the fusions touching them
    stay off (Softmax: no MaskedSoftmax; Erf: no Gelu), the rest still fuse, and the output still matches."""
    model = _models.bert_encoder(layers=1, hidden=64, heads=4, seq=8)
    feeds = _models.bert_feeds((1, 8, 64), masked=2)
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", "Softmax,Erf")
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    ops = _ops(sess)
    assert "MaskedSoftmax" not in ops and "Gelu" not in ops and ops["StridedMatMul"] == 2
    assert {n for n, b in sess.node_assignment.items() if b != "cpu"}   # Softmax / Erf on the reference backend
    assert _rel_err(sess.run(None, feeds)[0], run_ort(model, feeds)[0]) <= 1e-4


def test_fuse_matmul_bias_add_of_two_gemms():
    """Add(Gemm_a(x), Gemm_b(x)) (DeiT's two classifier heads, Phi's parallel attention + MLP): Gemm_a takes the Add
    with Gemm_b's output as its residual and Gemm_b stays whole -- never both claiming the Add, which left a node
    reading a value nothing computes (oracle: onnxruntime)."""
    rng = np.random.default_rng(7)
    wa, wb = (rng.standard_normal((8, 5)).astype(np.float32) for _ in range(2))
    ba, bb = (rng.standard_normal(5).astype(np.float32) for _ in range(2))
    nodes = [helper.make_node("Gemm", ["x", "wa", "ba"], ["ga"], name="gemm_a"),
             helper.make_node("Gemm", ["x", "wb", "bb"], ["gb"], name="gemm_b"),
             helper.make_node("Add", ["ga", "gb"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, n) for n, v in (("wa", wa), ("wb", wb), ("ba", ba), ("bb", bb))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = rng.standard_normal((3, 8)).astype(np.float32)
    sess = onnxep.InferenceSession(m.SerializeToString())
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], run_ort(m, {"x": x})[0], rtol=1e-5, atol=1e-5)
