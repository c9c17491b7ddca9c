"""graph/passes/fuse_gelu_tanh.py: the tanh-form Gelu (gelu_new / gelu_pytorch_tanh, as torch.onnx writes it in
GPT-2, GPT-Neo, Phi) becomes one com.onnxep FastGelu node; and the eltwise kernels' C steps in the compiled run loop
(Silu plain and gated, FastGelu, Gelu approximate "tanh", HardSigmoid, HardSwish); fuse_silu's Silu in a conv net
kept channel-last by the layout pass.

Oracles: onnxruntime's CPU provider on the original (unfused) model; the same model through onnxep with
graph_optimization_level=ORT_DISABLE_ALL; for the C steps, the Python loop (equal bits). Fusion is checked by
counting the plan's node types."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import make_model
from tests.graph.test_runloop_ops import _check as _check_runloop, _feeds
from tests.graph.test_transformer_passes import _c, _check, _ops, _session

RNG = np.random.default_rng(24)
CONSTS = {"c3": _c(3.0), "k": _c(0.044715), "s": _c(0.7978845608028654), "one": _c(1.0), "half": _c(0.5)}


def _nodes(cube="pow", order="x_half_p", swap=False, x="x", y="y"):
    """The tanh-form Gelu in the exporters' order (torch.onnx: Mul(x, 0.5) ... Mul(that, 1 + tanh)); `swap` puts
    the constants first."""
    def mul(a, b, o):
        return helper.make_node("Mul", [b, a] if swap else [a, b], [o])
    if cube == "pow":
        nodes = [helper.make_node("Pow", [x, "c3"], ["cube"])]
    elif cube == "mul_left":
        nodes = [helper.make_node("Mul", [x, x], ["sq"]), helper.make_node("Mul", ["sq", x], ["cube"])]
    else:
        nodes = [helper.make_node("Mul", [x, x], ["sq"]), helper.make_node("Mul", [x, "sq"], ["cube"])]
    nodes += [mul("cube", "k", "kc"), helper.make_node("Add", ["kc", x] if swap else [x, "kc"], ["inner"]),
              mul("inner", "s", "u"), helper.make_node("Tanh", ["u"], ["t"]),
              helper.make_node("Add", ["t", "one"], ["p"])]
    if order == "x_p_half":
        nodes += [helper.make_node("Mul", [x, "p"], ["m"]), mul("m", "half", y)]
    elif order == "p_half_x":
        nodes += [mul("p", "half", "m"), helper.make_node("Mul", [x, "m"], [y])]
    else:
        nodes += [mul(x, "half", "m"), helper.make_node("Mul", ["m", "p"], [y])]
    return nodes


@pytest.mark.parametrize("cube", ["pow", "mul_left", "mul_right"])
@pytest.mark.parametrize("order", ["x_half_p", "x_p_half", "p_half_x"])
@pytest.mark.parametrize("swap", [False, True])
def test_gelu_tanh_fused(cube, order, swap):
    x = (RNG.standard_normal((2, 33, 70)) * 3).astype(np.float32)
    m = make_model(_nodes(cube, order, swap), {"x": x}, ["y"], initializers=CONSTS)
    ops = _check(m, {"x": x}, rtol=1e-6)
    assert ops == {"FastGelu": 1}


def test_gelu_tanh_exporter_constants():
    """The float32 constants torch.onnx writes (sqrt(2/pi) and 0.044715 rounded to float32) and an int Pow exponent."""
    x = (RNG.standard_normal((3, 64)) * 3).astype(np.float32)
    consts = dict(CONSTS, s=np.array(0.7978845834732056, np.float32), k=np.array(0.044714998453855515, np.float32),
                  c3=np.array(3, np.int64))
    m = make_model(_nodes(), {"x": x}, ["y"], initializers=consts)
    assert _check(m, {"x": x}, rtol=1e-6) == {"FastGelu": 1}


@pytest.mark.parametrize("change", ["k", "s", "half", "one", "c3"])
def test_gelu_tanh_not_fused_when_a_constant_differs(change):
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    consts = dict(CONSTS, **{change: _c(2.0 if change == "c3" else float(CONSTS[change]) * 1.01)})
    m = make_model(_nodes(), {"x": x}, ["y"], initializers=consts)
    assert "FastGelu" not in _check(m, {"x": x}, rtol=1e-5)


@pytest.mark.parametrize("read", ["t", "u", "inner", "cube", "p"])
def test_gelu_tanh_not_fused_when_an_intermediate_is_read(read):
    x = RNG.standard_normal((4, 9)).astype(np.float32)
    m = make_model(_nodes(), {"x": x}, ["y", read], initializers=CONSTS)
    assert "FastGelu" not in _check(m, {"x": x}, rtol=1e-5)


def test_gelu_tanh_not_fused_on_another_tensor_or_level():
    """The cube of x but Add(z, .): two different tensors, no Gelu. Below ORT_ENABLE_EXTENDED nothing is fused."""
    x, z = RNG.standard_normal((4, 9)).astype(np.float32), RNG.standard_normal((4, 9)).astype(np.float32)
    nodes = _nodes()
    nodes[2] = helper.make_node("Add", ["z", "kc"], ["inner"])
    m = make_model(nodes, {"x": x, "z": z}, ["y"], initializers=CONSTS)
    assert "FastGelu" not in _check(m, {"x": x, "z": z}, rtol=1e-5)
    m = make_model(_nodes(), {"x": x}, ["y"], initializers=CONSTS)
    assert _ops(_session(m, onnxep.GraphOptimizationLevel.ORT_ENABLE_BASIC))["Tanh"] == 1
    so = onnxep.SessionOptions()
    sess = onnxep.InferenceSession(m.SerializeToString(), so, disabled_optimizers=["FastGeluFusion"])
    assert "FastGelu" not in _ops(sess)


# ---------------------------------------------------------------------------------------------- compiled run loop
def _runloop(nodes, x, inits=None, opset=17):
    """The model's steps all C steps (the fused node and a Neg after it)."""
    model = make_model(nodes, {"x": x}, ["y"], opset=opset, initializers=inits)
    progs = _check_runloop(model, _feeds(x), 2, rtol=2e-6, atol=1e-6)
    assert max(p.n_py for p in progs) == 0


def test_runloop_fast_gelu():
    x = (RNG.standard_normal((3, 5, 70)) * 3).astype(np.float32)
    _runloop(_nodes(y="g") + [helper.make_node("Neg", ["g"], ["y"])], x, CONSTS)


def test_runloop_gelu_opset20_tanh():
    x = (RNG.standard_normal((3, 7, 8)) * 3).astype(np.float32)
    _runloop([helper.make_node("Gelu", ["x"], ["g"], approximate="tanh"), helper.make_node("Neg", ["g"], ["y"])], x,
             opset=20)


@pytest.mark.parametrize("gated", [False, True])
@pytest.mark.parametrize("alpha", [None, 1.702])
def test_runloop_silu(gated, alpha):
    x = (RNG.standard_normal((2, 9, 40)) * 4).astype(np.float32)
    nodes, inits = [], {}
    if alpha is None:
        nodes.append(helper.make_node("Sigmoid", ["x"], ["s"]))
    else:
        nodes += [helper.make_node("Mul", ["x", "a"], ["xa"]), helper.make_node("Sigmoid", ["xa"], ["s"])]
        inits["a"] = _c(alpha)
    nodes.append(helper.make_node("Mul", ["x", "s"], ["act"]))
    extra = None
    if gated:
        nodes.append(helper.make_node("Mul", ["act", "u"], ["g"]))
        extra = {"u": RNG.standard_normal(x.shape).astype(np.float32)}
    nodes.append(helper.make_node("Neg", ["g" if gated else "act"], ["y"]))
    feeds = _feeds(x)
    if extra:
        for f in feeds[1:]:
            f["u"] = RNG.standard_normal(x.shape).astype(np.float32)
        feeds[0].update(extra)
    model = make_model(nodes, {"x": x, **(extra or {})}, ["y"], initializers=inits or None)
    progs = _check_runloop(model, feeds, 2, rtol=2e-6, atol=3e-6)    # |y| up to ~30: onnxruntime's own sigmoid
    assert max(p.n_py for p in progs) == 0
    ops = _ops(_session(model))
    assert ops["Silu"] == 1 and "Sigmoid" not in ops


@pytest.mark.parametrize("op,attrs", [("HardSigmoid", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
                                      ("HardSwish", {})])
def test_runloop_hard_activations(op, attrs):
    x = (RNG.standard_normal((3, 5, 7)) * 5).astype(np.float32)
    nodes = [helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node(op, ["a"], ["h"], **attrs),
             helper.make_node("Mul", ["h", "h"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y", "h"], opset=17)
    progs = _check_runloop(model, _feeds(x), 3)
    assert max(p.n_py for p in progs) == 0


# ------------------------------------------------------------------------------------------------- Silu in a conv net
@pytest.mark.parametrize("gated", [False, True])
def test_silu_in_a_conv_net_runs_channel_last(gated):
    """Conv -> Sigmoid -> Mul(conv, .) (EfficientNet's swish) [-> Mul(., other conv)]: one Silu on the NHWC twins, no
    transposes beyond the graph's input and output."""
    x = RNG.standard_normal((2, 3, 12, 12)).astype(np.float32)
    w = (RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["a"])]
    if gated:
        nodes += [helper.make_node("Conv", ["x", "w"], ["c2"], pads=[1, 1, 1, 1]),
                  helper.make_node("Mul", ["a", "c2"], ["a2"])]
    nodes += [helper.make_node("Conv", ["a2" if gated else "a", "w2"], ["y"])]
    w2 = (RNG.standard_normal((4, 8, 1, 1)) * 0.3).astype(np.float32)
    m = make_model(nodes, {"x": x}, ["y"], initializers={"w": w, "w2": w2})
    ops = _check(m, {"x": x}, rtol=2e-6)
    assert ops["Silu"] == 1 and "Sigmoid" not in ops and "Mul" not in ops
    assert ops["Transpose"] <= 2
