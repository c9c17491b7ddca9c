"""Graph building (graph/model.py build_graph): node order, cycles, and how tensors are decoded. Oracles: the
reference order of Kahn's algorithm written out plainly here, onnx.reference on the same model, and
onnx.numpy_helper.to_array for tensor values."""
import random

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from onnxep.errors import InvalidGraph
from onnxep.graph import model as model_mod
from tests._util import make_model, run_reference

X = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def _kahn(nodes):
    """Oracle: Kahn's algorithm over sets and lists, ready nodes taken last-in first-out (lowest index first)."""
    produced_by = {o: i for i, n in enumerate(nodes) for o in n.outputs if o}
    deps = [{produced_by[x] for x in n.inputs if x in produced_by} - {i} for i, n in enumerate(nodes)]
    users = {i: [] for i in range(len(nodes))}
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    indeg = [len(d) for d in deps]
    ready = [i for i in range(len(nodes)) if indeg[i] == 0][::-1]
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    return order


def _random_dag(rng, n):
    """n Add/Neg/Relu nodes over x: node k reads one or two of x and the outputs of nodes before it."""
    nodes = []
    for k in range(n):
        pool = ["x"] + [f"v{j}" for j in range(k)]
        if rng.random() < 0.5 and k > 0:
            a, b = rng.choice(pool), rng.choice(pool)
            nodes.append(helper.make_node("Add", [a, b], [f"v{k}"], name=f"n{k}"))
        else:
            nodes.append(helper.make_node(rng.choice(["Neg", "Relu"]), [rng.choice(pool)], [f"v{k}"], name=f"n{k}"))
    return nodes


@pytest.mark.parametrize("seed", range(6))
def test_shuffled_graph_sorted_like_kahn_and_runs_like_reference(seed):
    rng = random.Random(seed)
    nodes = _random_dag(rng, 40)
    outs = [f"v{k}" for k in range(30, 40)]
    sorted_model = make_model(list(nodes), {"x": X}, outs)      # (onnx.reference reads nodes in file order)
    rng.shuffle(nodes)
    m = make_model(nodes, {"x": X}, outs)
    g = model_mod.build_graph(m)
    raw = model_mod.build_graph(m, infer_shapes=False)
    # the same order as the plain algorithm, and a valid one: every input made before it is read
    expected = [nodes[i].name for i in _kahn([model_mod.Node(n.name, n.op_type, "", list(n.input), list(n.output),
                                                              {}, 17) for n in nodes])]
    assert [n.name for n in g.nodes] == expected == [n.name for n in raw.nodes]
    made = {"x"}
    for n in g.nodes:
        assert all(x in made for x in n.inputs)
        made.update(n.outputs)
    got = onnxep.InferenceSession(m.SerializeToString()).run(outs, {"x": X})
    for a, b in zip(got, run_reference(sorted_model, {"x": X})):
        np.testing.assert_array_equal(a, b)


def test_cycle_raises_invalid_graph_naming_nodes():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="first"),
             helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Neg", ["x"], ["y"], name="fine")]
    m = make_model(nodes, {"x": X}, ["y"])
    with pytest.raises(InvalidGraph, match="cycle.*first.*second"):
        model_mod.build_graph(m, infer_shapes=False)


def test_small_tensors_are_standalone_arrays_large_ones_not_copied():
    """Small initializers and tensor attributes come back as one array each (no view of the bytes onnx read), equal
    to numpy_helper.to_array; a large raw-data initializer stays a view (not copied a second time)."""
    small = np.arange(6, dtype=np.int64).reshape(2, 3)
    large = np.linspace(0, 1, 8192, dtype=np.float32)
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.25])),
             helper.make_node("Add", ["x", "big"], ["y"])]
    m = make_model(nodes, {"x": large}, ["y", "w"], initializers={"shape": small[0], "s2": small, "big": large})
    g = model_mod.build_graph(m)
    inits = {t.name: t for t in m.graph.initializer}
    for name in ("shape", "s2"):
        a = g.initializers[name]
        assert a.base is None
        np.testing.assert_array_equal(a, numpy_helper.to_array(inits[name]))
        assert a.dtype == numpy_helper.to_array(inits[name]).dtype
    assert g.initializers["big"].base is not None
    np.testing.assert_array_equal(g.initializers["big"], large)
    value = g.nodes[0].attrs["value"] if g.nodes[0].op_type == "ConstantOfShape" else g.nodes[1].attrs["value"]
    assert value.base is None and value.dtype == np.float32 and value.shape == (1,) and value[0] == 0.25


def test_string_tensor_attribute_kept_as_onnx_gives_it():
    t = helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b"c"])
    m = make_model([helper.make_node("Constant", [], ["y"], value=t)], {}, ["y"])
    g = model_mod.build_graph(m, infer_shapes=False)
    np.testing.assert_array_equal(g.nodes[0].attrs["value"], onnx.numpy_helper.to_array(t))
