"""graph/infer_local.py: the value types build_graph works out itself for plain convnets must be the ones onnx's shape
inference gives. Oracle: onnx.shape_inference.infer_shapes (the same build_graph with infer_local switched off, and
the inferred model's value_info read directly)."""
import os
import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxep.graph import infer_local
from onnxep.graph import model as model_mod

F = TensorProto.FLOAT


def _onnx_types(m):
    """Oracle: value name -> ValueType after onnx's inference (build_graph with infer_local off)."""
    saved = infer_local.candidate
    infer_local.candidate = lambda ops: False
    try:
        return model_mod.build_graph(m).value_types
    finally:
        infer_local.candidate = saved


def _check(m, local_expected=True):
    """build_graph's types equal onnx's; `local_expected`: whether infer_local answered (False: it was asked and left
    it to onnx; None: not asked, the ops are not its)."""
    calls = []
    saved = infer_local.infer_types

    def spy(*a):
        r = saved(*a)
        calls.append(r is not None)
        return r
    infer_local.infer_types = spy
    try:
        got = model_mod.build_graph(m).value_types
    finally:
        infer_local.infer_types = saved
    want = _onnx_types(m)
    assert list(got.items()) == list(want.items())        # (the same order too: what passes and exports walk)
    # (and the oracle itself: every node output onnx typed is typed here)
    inferred = onnx.shape_inference.infer_shapes(m)
    for vi in inferred.graph.value_info:
        assert got[vi.name] == model_mod.ValueType.from_proto(vi.type), vi.name
    assert calls == ([] if local_expected is None else [local_expected])
    return got


def _model(nodes, inputs, outputs, inits=(), opset=20):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _w(name, shape, rng=np.random.default_rng(0)):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


@pytest.mark.parametrize("dims", [(1, 3, 17, 19), ("batch", 3, 16, 16), ("n", 3, "h", 20), (None, 3, 9, 9)])
@pytest.mark.parametrize("conv", [
    dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
    dict(pads=[0, 2, 1, 0], strides=[1, 3], dilations=[2, 1]),
    dict(kernel_shape=[3, 3]),
    dict(group=3),
])
def test_conv_pool_chain(dims, conv):
    group = conv.get("group", 1)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **conv),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], pads=[0, 0, 1, 1],
                              dilations=[1, 1], ceil_mode=0),
             helper.make_node("AveragePool", ["p"], ["q"], kernel_shape=[1, 2]),
             helper.make_node("GlobalAveragePool", ["q"], ["gp"]),
             helper.make_node("Flatten", ["gp"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "fc"], ["y"], transB=1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, list(dims))],
               [helper.make_tensor_value_info("y", F, None)],
               [_w("w", (6, 3 // group, 3, 3)), _w("b", (6,)), _w("fc", (5, 6))])
    _check(m)


@pytest.mark.parametrize("a,b", [((1, 8, 4, 4), (1, 8, 4, 4)), (("n", 8, 4, 4), (1, 8, 1, 1)),
                                 (("n", 8, 4, 4), ("m", 8, 4, 4)), (("n", 8), ("n", 8)), ((None, 8), ("n", 8)),
                                 ((None, 8), (None, 8)), ((8,), ("n", 4, 1)), ((3, 1, 5), (1, 4, 1)),
                                 (("n", 1), (1, "k"))])
@pytest.mark.parametrize("op", ["Add", "Mul", "Sub", "Div"])
def test_broadcast(a, b, op):
    nodes = [helper.make_node(op, ["a", "b"], ["s"]), helper.make_node("Sigmoid", ["s"], ["y"])]
    m = _model(nodes, [helper.make_tensor_value_info("a", F, list(a)), helper.make_tensor_value_info("b", F, list(b))],
               [helper.make_tensor_value_info("y", F, None)])
    _check(m)


@pytest.mark.parametrize("axis", [0, 1, 2, 4, -1, -4])
@pytest.mark.parametrize("dims", [("n", 3, 1, 5), (2, "c", 1, 1), (1, 1, "h", None)])
def test_flatten(axis, dims):
    m = _model([helper.make_node("Flatten", ["x"], ["y"], axis=axis)],
               [helper.make_tensor_value_info("x", F, list(dims))], [helper.make_tensor_value_info("y", F, None)])
    _check(m)


@pytest.mark.parametrize("declared", [None, ["batch", 10], [None, 10], ["n", None], [7, None], ["b", "c"]])
def test_graph_output_merged_into_its_declared_type(declared):
    nodes = [helper.make_node("Gemm", ["x", "w"], ["y"], transA=0, transB=1)]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, [7, 4])],
               [helper.make_tensor_value_info("y", F, declared)], [_w("w", (10, 4))])
    _check(m, None if model_mod._fully_typed(m) else True)      # (typed already: no inference at all)


@pytest.mark.parametrize("case", ["ceil_mode", "auto_pad", "reshape", "dilated_pool", "two_outputs", "value_info",
                                  "int_input", "old_opset", "conflict"])
def test_what_it_leaves_to_onnx(case):
    """Outside what infer_local handles: onnx's inference, the same types as before."""
    x = helper.make_tensor_value_info("x", F, ["n", 4, 9, 9])
    y = helper.make_tensor_value_info("y", F, None)
    opset = 20
    extra, inits = [], [_w("w", (4, 4, 3, 3))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])]
    if case == "ceil_mode":
        nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)]
    elif case == "auto_pad":
        nodes = [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2, 2])]
    elif case == "reshape":
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Reshape", ["c", "s"], ["y"])]
        inits.append(numpy_helper.from_array(np.array([0, -1], np.int64), "s"))
    elif case == "dilated_pool":
        nodes = [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], dilations=[2, 2])]
    elif case == "two_outputs":
        nodes = [helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2])]
    elif case == "value_info":
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
        extra = [helper.make_tensor_value_info("c", F, ["n", 4, None, None])]
    elif case == "int_input":
        x = helper.make_tensor_value_info("x", TensorProto.INT64, ["n", 4])
        y = helper.make_tensor_value_info("y", TensorProto.INT64, None)     # (float: refused at load, as by ORT)
        nodes = [helper.make_node("Add", ["x", "x"], ["y"])]
    elif case == "old_opset":
        opset = 6
        nodes = [helper.make_node("Add", ["x", "x"], ["y"])]
    elif case == "conflict":
        nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
        y = helper.make_tensor_value_info("y", F, ["n", 5, 9, 9])       # the conv writes 4 channels
    m = _model(nodes, [x], [y], inits, opset)
    m.graph.value_info.extend(extra)
    asked = case not in ("reshape", "value_info")      # (candidates by their op types, which infer_local refuses)
    _check(m, local_expected=False if asked else None)


def test_random_convnets():
    """Random chains of the handled ops on random static / symbolic shapes."""
    rng = random.Random(7)
    checked = 0
    for _ in range(40):
        n, c, h, w = rng.choice([1, 2, "batch"]), rng.choice([3, 8]), rng.choice([7, 16, "h"]), rng.choice([9, 16])
        nodes, inits, cur, ch = [], [], "x", c
        for i in range(rng.randint(1, 6)):
            kind = rng.choice(["conv", "pool", "act", "res", "clip"])
            out = f"v{i}"
            if kind == "conv":
                k, s, p, d = rng.choice([1, 3]), rng.choice([1, 2]), rng.choice([0, 1]), rng.choice([1, 2])
                co = rng.choice([4, 8])
                inits.append(_w(f"w{i}", (co, ch, k, k)))
                inits.append(_w(f"b{i}", (co,)))
                # (torch.onnx writes an Identity of a bias that two convs share)
                nodes.append(helper.make_node("Identity", [f"b{i}"], [f"bi{i}"]))
                nodes.append(helper.make_node("Conv", [cur, f"w{i}", f"bi{i}"], [out], strides=[s, s], pads=[p] * 4,
                                              dilations=[d, d]))
                ch = co
            elif kind == "pool":
                nodes.append(helper.make_node(rng.choice(["MaxPool", "AveragePool"]), [cur], [out], kernel_shape=[2, 2],
                                              strides=[rng.choice([1, 2])] * 2, pads=[rng.choice([0, 1])] * 4))
            elif kind == "act":
                nodes.append(helper.make_node(rng.choice(["Relu", "Sigmoid", "HardSwish", "LeakyRelu"]), [cur], [out]))
            elif kind == "clip":
                inits += [numpy_helper.from_array(np.float32(v), f"{k}{i}") for k, v in (("lo", 0), ("hi", 6))]
                nodes.append(helper.make_node("Clip", [cur, f"lo{i}", f"hi{i}"][:rng.randint(1, 3)], [out]))
            else:
                inits.append(_w(f"s{i}", (1, ch, 1, 1)))
                nodes.append(helper.make_node("Mul", [cur, f"s{i}"], [out]))
            cur = out
        nodes.append(helper.make_node("GlobalAveragePool", [cur], ["y"]))
        m = _model(nodes, [helper.make_tensor_value_info("x", F, [n, c, h, w])],
                   [helper.make_tensor_value_info("y", F, None)], inits)
        try:
            onnx.shape_inference.infer_shapes(m, strict_mode=True)
        except Exception:
            continue        # (a kernel larger than its padded input: not a model)
        _check(m)
        checked += 1
    assert checked >= 20


ZOO = os.environ.get("ONNXEP_ZOO", os.path.join(os.path.expanduser("~"), ".cache", "onnxep", "zoo"))


@pytest.mark.parametrize("name", ["resnet.torchscript", "regnet.torchscript", "resnet_torch.torchscript",
                                  "mobilenet_v3.torchscript"])
def test_zoo_convnets(name):
    path = os.path.join(ZOO, f"{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"{path}: not exported (bench/zoo)")
    m = onnx.load(path)
    if not infer_local.candidate(m.graph.node):
        pytest.skip(f"{name}: ops outside infer_local's")
    _check(m)
