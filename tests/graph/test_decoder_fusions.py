"""The decoder fusions (graph/passes/fuse_rms_norm.py, fuse_silu.py, fuse_rotary.py): hand-built patterns in the
forms torch.onnx writes (both exporters), symbolic dims, and the real 1-layer LLaMA fixtures of tests/models/zoo.

Oracles: onnxruntime's CPU provider on the original (unfused) model; the same model through onnxep with the three
passes disabled (disabled_optimizers). The plans are inspected to check the pattern was fused (node types counted);
for the zoo fixtures, onnxruntime's outputs stored beside them."""
import collections
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import run_ort

RNG = np.random.default_rng(23)
MINE = ["fuse_rms_norm", "fuse_silu", "fuse_rotary"]
ZOO = Path(__file__).parent.parent / "models" / "zoo"


def _session(model, disabled=None, threads=0):
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = threads
    kw = {"disabled_optimizers": disabled} if disabled else {}
    src = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return onnxep.InferenceSession(src, so, **kw)


def _ops(sess):
    return collections.Counter(st[6] for p in sess.plans for st in getattr(p, "steps", ()))


def _rel_err(got, want):
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def _check(model, feeds, rtol=1e-5):
    """Fused onnxep vs onnxruntime and vs onnxep without the passes; returns the fused session's op counts."""
    fused = _session(model)
    got = fused.run(None, feeds)
    plain = _session(model, MINE).run(None, feeds)
    for g, o, p in zip(got, run_ort(model, feeds), plain):
        assert g.shape == o.shape and g.dtype == o.dtype
        assert _rel_err(g, o) <= rtol
        assert _rel_err(g, p) <= rtol
    return _ops(fused)


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _c(name, v, dtype=np.float32):
    return onnx.numpy_helper.from_array(np.asarray(v, dtype), name)


# --------------------------------------------------------------------------------------------------------- RMSNorm
def _rms_nodes(form, weight=True, cast=True, square="pow"):
    """The RMSNorm chain: torchscript (Casts, Div(1, Sqrt)), dynamo (Reciprocal), or Div(x, Sqrt)."""
    x = "xc" if cast else "x"
    nodes = [helper.make_node("Cast", ["x"], ["xc"], to=1)] if cast else []
    nodes.append(helper.make_node("Pow", [x, "two"], ["sq"]) if square == "pow" else
                 helper.make_node("Mul", [x, x], ["sq"]))
    nodes += [helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
              helper.make_node("Add", ["ms", "eps"], ["v"]),
              helper.make_node("Sqrt", ["v"], ["r"])]
    if form == "div1":
        nodes += [helper.make_node("Div", ["one", "r"], ["inv"]), helper.make_node("Mul", [x, "inv"], ["n"])]
    elif form == "reciprocal":
        nodes += [helper.make_node("Reciprocal", ["r"], ["inv"]), helper.make_node("Mul", ["inv", x], ["n"])]
    else:
        nodes += [helper.make_node("Div", [x, "r"], ["n"])]
    out = "n"
    if cast:
        nodes.append(helper.make_node("Cast", ["n"], ["nc"], to=1))
        out = "nc"
    if weight:
        nodes.append(helper.make_node("Mul", ["w", out], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", [out], ["y"]))
    return nodes


@pytest.mark.parametrize("form", ["div1", "reciprocal", "divx"])
@pytest.mark.parametrize("cast", [True, False])
@pytest.mark.parametrize("square", ["pow", "mul"])
def test_rms_norm_forms(form, cast, square):
    inits = [_c("two", 2.0), _c("axes", [-1], np.int64), _c("eps", 1e-6), _c("one", 1.0),
             _c("w", RNG.standard_normal(16))]
    m = _model(_rms_nodes(form, cast=cast, square=square), [_f("x", ["b", "s", 16])], [_f("y", ["b", "s", 16])], inits)
    ops = _check(m, {"x": RNG.standard_normal((2, 5, 16)).astype(np.float32)})
    assert ops["RMSNormalization"] == 1
    assert not {"Pow", "ReduceMean", "Sqrt", "Div", "Reciprocal", "Cast"} & set(ops)


def test_rms_norm_no_weight_two_axes():
    inits = [_c("two", 2.0), _c("axes", [-2, -1], np.int64), _c("eps", 1e-5), _c("one", 1.0)]
    m = _model(_rms_nodes("div1", weight=False, cast=False), [_f("x", ["b", 3, 8])], [_f("y", ["b", 3, 8])], inits)
    ops = _check(m, {"x": RNG.standard_normal((4, 3, 8)).astype(np.float32)})
    assert ops["RMSNormalization"] == 1


def test_rms_norm_opset_23_standard_node():
    inits = [_c("two", 2.0), _c("axes", [-1], np.int64), _c("eps", 1e-6), _c("one", 1.0),
             _c("w", RNG.standard_normal(16))]
    m = _model(_rms_nodes("reciprocal"), [_f("x", ["b", 16])], [_f("y", ["b", 16])], inits, opset=23)
    sess = _session(m)
    x = RNG.standard_normal((3, 16)).astype(np.float32)
    assert _rel_err(sess.run(None, {"x": x})[0], _session(m, MINE).run(None, {"x": x})[0]) <= 1e-5
    assert _ops(sess)["RMSNormalization"] == 1


def test_rms_norm_not_fused_when_intermediate_is_read():
    """The mean square is also a graph output: the chain stays (and computes the same)."""
    inits = [_c("two", 2.0), _c("axes", [-1], np.int64), _c("eps", 1e-6), _c("one", 1.0),
             _c("w", RNG.standard_normal(16))]
    m = _model(_rms_nodes("div1"), [_f("x", ["b", 16])], [_f("y", ["b", 16]), _f("ms", ["b", 1])], inits)
    ops = _check(m, {"x": RNG.standard_normal((3, 16)).astype(np.float32)})
    assert "RMSNormalization" not in ops and ops["ReduceMean"] == 1


def test_rms_norm_non_trailing_axis_not_fused():
    inits = [_c("two", 2.0), _c("axes", [1], np.int64), _c("eps", 1e-6), _c("one", 1.0),
             _c("w", RNG.standard_normal((4, 1)))]
    m = _model(_rms_nodes("div1"), [_f("x", ["b", 4, 6])], [_f("y", ["b", 4, 6])], inits)
    ops = _check(m, {"x": RNG.standard_normal((2, 4, 6)).astype(np.float32)})
    assert "RMSNormalization" not in ops


# ------------------------------------------------------------------------------------------------------------ Silu
@pytest.mark.parametrize("alpha", [None, 1.702])
@pytest.mark.parametrize("gated", [False, True])
def test_silu(alpha, gated):
    nodes, inits = [], []
    if alpha is None:
        nodes.append(helper.make_node("Sigmoid", ["x"], ["s"]))
    else:
        nodes += [helper.make_node("Mul", ["x", "a"], ["xa"]), helper.make_node("Sigmoid", ["xa"], ["s"])]
        inits.append(_c("a", alpha))
    nodes.append(helper.make_node("Mul", ["x", "s"], ["act"] if gated else ["y"]))
    ins = [_f("x", ["b", "s", 24])]
    if gated:
        nodes.append(helper.make_node("Mul", ["act", "u"], ["y"]))
        ins.append(_f("u", ["b", "s", 24]))
    m = _model(nodes, ins, [_f("y", ["b", "s", 24])], inits)
    feeds = {"x": RNG.standard_normal((2, 3, 24)).astype(np.float32) * 4}
    if gated:
        feeds["u"] = RNG.standard_normal((2, 3, 24)).astype(np.float32)
    ops = _check(m, feeds)
    assert ops["Silu"] == 1 and "Sigmoid" not in ops and "Mul" not in ops


def test_silu_sigmoid_read_elsewhere_not_fused():
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    m = _model(nodes, [_f("x", ["b", 8])], [_f("y", ["b", 8]), _f("s", ["b", 8])])
    ops = _check(m, {"x": RNG.standard_normal((3, 8)).astype(np.float32)})
    assert "Silu" not in ops


# ---------------------------------------------------------------------------------------------------------- Rotary
def _rotary_model(a_src="const", a=4, b=4, order="torchscript"):
    """q (b, h, s, 8) rotated with cos / sin (b, 1, s, 8); the split points constants or computed from q's shape."""
    nodes, inits = [], [_c("zero", [0], np.int64), _c("big", [2 ** 63 - 1], np.int64), _c("ax", [-1], np.int64),
                        _c("step", [1], np.int64)]
    if a_src == "const":
        inits += [_c("A", [a], np.int64), _c("B", [b], np.int64)]
    else:   # torchscript: shape[-1] // 2, computed twice
        inits += [_c("i3", 3, np.int64), _c("two", 2, np.int64), _c("u0", [0], np.int64)]
        for name in ("A", "B"):
            nodes += [helper.make_node("Shape", ["q"], [f"{name}_sh"]),
                      helper.make_node("Gather", [f"{name}_sh", "i3"], [f"{name}_d"], axis=0),
                      helper.make_node("Div", [f"{name}_d", "two"], [f"{name}_h"]),
                      helper.make_node("Unsqueeze", [f"{name}_h", "u0"], [name])]
    slices = [helper.make_node("Slice", ["q", "zero", "A", "ax", "step"], ["x1"]),
              helper.make_node("Slice", ["q", "B", "big", "ax", "step"], ["x2"])]
    nodes += slices if order == "torchscript" else slices[::-1]
    nodes += [helper.make_node("Neg", ["x2"], ["nx2"]),
              helper.make_node("Concat", ["nx2", "x1"], ["rot"], axis=-1),
              helper.make_node("Mul", ["rot", "sin"], ["rs"]) if order == "torchscript" else
              helper.make_node("Mul", ["sin", "rot"], ["rs"]),
              helper.make_node("Mul", ["q", "cos"], ["qc"]),
              helper.make_node("Add", ["qc", "rs"], ["y"])]
    ins = [_f("q", ["b", 2, "s", 8]), _f("cos", ["b", 1, "s", 8]), _f("sin", ["b", 1, "s", 8])]
    return _model(nodes, ins, [_f("y", ["b", 2, "s", 8])], inits)


def _rotary_feeds(b=2, s=5):
    ang = RNG.uniform(0, 6, (b, 1, s, 4)).astype(np.float32)
    ang = np.concatenate([ang, ang], -1)
    return {"q": RNG.standard_normal((b, 2, s, 8)).astype(np.float32), "cos": np.cos(ang), "sin": np.sin(ang)}


@pytest.mark.parametrize("a_src", ["const", "shape"])
@pytest.mark.parametrize("order", ["torchscript", "dynamo"])
def test_rotary_rotate_half(a_src, order):
    ops = _check(_rotary_model(a_src, order=order), _rotary_feeds())
    assert ops["RotaryHalf"] == 1
    assert not {"Slice", "Neg", "Concat", "Mul", "Add"} & set(ops)


def test_rotary_uneven_split_points():
    """Split points other than the half: the kernel's general path slices as Slice does."""
    ops = _check(_rotary_model("const", a=5, b=5), _rotary_feeds())
    assert ops["RotaryHalf"] == 1


def test_rotary_bad_split_point_is_a_named_error():
    """Split points that make the halves not add up to the head size: a named error, as onnxruntime's Add fails;
    the session stays usable."""
    m = _rotary_model("const", a=3, b=4)
    sess = _session(m)
    with pytest.raises(Exception) as e:
        sess.run(None, _rotary_feeds())
    assert "RotaryHalf" in str(e.value) or "Add" in str(e.value)
    with pytest.raises(Exception):
        run_ort(m, _rotary_feeds())


def _interleaved_model(shape_src="const"):
    """GPT-J's rotate_every_two on q (b, s, h, 8), as the dynamo exporter writes it; the Reshape's target a constant
    (0 copying dims) or computed from q's shape."""
    inits = [_c("zero", [0], np.int64), _c("one", [1], np.int64), _c("big", [2 ** 63 - 1], np.int64),
             _c("ax", [-1], np.int64), _c("two", [2], np.int64), _c("m1", [-1], np.int64)]
    nodes = [helper.make_node("Slice", ["q", "zero", "big", "ax", "two"], ["x1"]),
             helper.make_node("Slice", ["q", "one", "big", "ax", "two"], ["x2"]),
             helper.make_node("Neg", ["x2"], ["nx2"]),
             helper.make_node("Unsqueeze", ["nx2", "m1"], ["a"]),
             helper.make_node("Unsqueeze", ["x1", "m1"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["st"], axis=-1)]
    if shape_src == "const":
        inits.append(_c("shape", [0, 0, 0, -1], np.int64))
    else:
        nodes.append(helper.make_node("Shape", ["q"], ["shape"]))
    nodes += [helper.make_node("Reshape", ["st", "shape"], ["rot"]),
              helper.make_node("Mul", ["rot", "sin"], ["rs"]),
              helper.make_node("Mul", ["q", "cos"], ["qc"]),
              helper.make_node("Add", ["qc", "rs"], ["y"])]
    ins = [_f("q", ["b", "s", 2, 8]), _f("cos", ["b", "s", 1, 8]), _f("sin", ["b", "s", 1, 8])]
    return _model(nodes, ins, [_f("y", ["b", "s", 2, 8])], inits)


@pytest.mark.parametrize("shape_src", ["const", "shape"])
def test_rotary_interleaved(shape_src):
    ang = np.repeat(RNG.uniform(0, 6, (2, 5, 1, 4)).astype(np.float32), 2, axis=-1)
    feeds = {"q": RNG.standard_normal((2, 5, 2, 8)).astype(np.float32), "cos": np.cos(ang), "sin": np.sin(ang)}
    ops = _check(_interleaved_model(shape_src), feeds)
    assert ops["RotaryInterleaved"] == 1
    assert not {"Slice", "Neg", "Concat", "Unsqueeze", "Reshape", "Mul", "Add"} & set(ops)


# --------------------------------------------------------------------------------------------------- zoo fixtures
@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_llama_1layer_fixture_fused(exporter):
    index = {e["name"]: e for e in json.loads((ZOO / "index.json").read_text())["models"]}
    entry = index[f"llama_1layer_past.{exporter}"]
    data = np.load(ZOO / entry["data"])
    feeds = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}
    want = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("output:")}
    fused, plain = _session(ZOO / entry["file"]), _session(ZOO / entry["file"], MINE)
    ops, before = _ops(fused), _ops(plain)
    # one layer: input / post-attention / final RMSNorm, rotary on q and k, one gated SiLU MLP
    assert ops["RMSNormalization"] == 3
    assert ops["RotaryHalf"] == 2 and ops["Silu"] == 1
    assert "Pow" not in ops and "Sigmoid" not in ops and "Neg" not in ops
    assert sum(ops.values()) < sum(before.values())
    names = [o.name for o in fused.get_outputs()]
    for name, got in zip(names, fused.run(None, feeds)):
        assert _rel_err(got, want[name]) <= entry.get("tolerance", 1e-4)
