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
    expected = [nodes[i].name for i in _kahn([model_mod.Node(n.name, n.op_type, "", tuple(n.input), tuple(n.output),
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
    """Small initializers and tensor attributes come back as one array each, standalone (their own memory, or a view
    of a bytes object of exactly their bytes: never of the bytes onnx read for the model), equal to
    numpy_helper.to_array; a large raw-data initializer stays a view (not copied a second time)."""
    small = np.arange(6, dtype=np.int64).reshape(2, 3)
    large = np.linspace(0, 1, 8192, dtype=np.float32)
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.25])),
             helper.make_node("Add", ["x", "big"], ["y"])]
    m = make_model(nodes, {"x": large}, ["y", "w"], initializers={"shape": small[0], "s2": small, "big": large})
    g = model_mod.build_graph(m)
    inits = {t.name: t for t in m.graph.initializer}
    def standalone(a):
        base = a.base
        while isinstance(base, np.ndarray) and base.base is not None:     # (numpy 2 keeps a reshape's own base)
            base = base.base
        return base is None or (type(base) is bytes and len(base) == a.nbytes)

    for name in ("shape", "s2"):
        a = g.initializers[name]
        assert standalone(a)
        np.testing.assert_array_equal(a, numpy_helper.to_array(inits[name]))
        assert a.dtype == numpy_helper.to_array(inits[name]).dtype
    assert g.initializers["big"].base is not None
    np.testing.assert_array_equal(g.initializers["big"], large)
    value = g.nodes[0].attrs["value"] if g.nodes[0].op_type == "ConstantOfShape" else g.nodes[1].attrs["value"]
    assert standalone(value) and value.dtype == np.float32 and value.shape == (1,) and value[0] == 0.25


def test_equal_small_tensors_are_one_read_only_array():
    """Small tensors of equal dtype, shape and bytes (the fill values and shapes of ConstantOfShape-made weights)
    come back as one shared array, which is read-only; a different dtype or shape, or a -0.0 for a 0.0, is another
    array. Oracle: numpy_helper.to_array."""
    def cos(i, value):
        return helper.make_node("ConstantOfShape", [f"s{i}"], [f"w{i}"], value=value)

    f = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])
    nodes = [cos(0, f), cos(1, helper.make_tensor("u", TensorProto.FLOAT, [1], [0.5])),
             cos(2, helper.make_tensor("v", TensorProto.DOUBLE, [1], [0.5])),
             cos(3, helper.make_tensor("v", TensorProto.FLOAT, [1], [-0.0])),
             cos(4, helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0]))]
    shapes = {"s0": np.array([2, 3], np.int64), "s1": np.array([2, 3], np.int64), "s2": np.array([2, 3], np.int32),
              "s3": np.array([[2, 3]], np.int64), "s4": np.array([2, 3], np.int64)}
    m = make_model(nodes, {}, [f"w{i}" for i in range(5)], initializers=shapes)
    g = model_mod.build_graph(m, infer_shapes=False)
    value = {n.outputs[0]: n.attrs["value"] for n in g.nodes}
    assert value["w0"] is value["w1"]
    assert len({id(value[k]) for k in ("w0", "w2", "w3", "w4")}) == 4
    assert g.initializers["s0"] is g.initializers["s1"] is g.initializers["s4"]
    assert len({id(g.initializers[k]) for k in ("s0", "s2", "s3")}) == 3
    for k, t in {**{t.name: t for t in m.graph.initializer}}.items():
        want = numpy_helper.to_array(t)
        assert g.initializers[k].dtype == want.dtype and g.initializers[k].shape == want.shape
        np.testing.assert_array_equal(g.initializers[k], want)
    for a in list(value.values()) + list(g.initializers.values()):
        assert not a.flags.writeable
    assert np.signbit(value["w3"][0]) and not np.signbit(value["w4"][0])


def test_node_proto_is_the_models_node_again():
    """Node.proto is built from the decoded fields: every attribute kind comes back with the type and value the
    model's NodeProto had, an empty list with the type the op schema declares. Oracle: the model's own NodeProto
    read with onnx.helper.get_attribute_value."""
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "body",
                             [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                             [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    sparse = helper.make_sparse_tensor(helper.make_tensor("v", TensorProto.FLOAT, [2], [1.0, 2.0]),
                                       helper.make_tensor("i", TensorProto.INT64, [2], [0, 3]), [5])
    attrs = dict(f=0.1, i=-7, s=b"\xff\xferaw", t=helper.make_tensor("t", TensorProto.FLOAT16, [2], [1.5, -2.0]),
                 g=body, fs=[0.1, 2.5], ints=[1, -2, 3], ss=[b"a", b"\xc3\xa9"], sp=sparse,
                 ts=[helper.make_tensor("a", TensorProto.INT8, [1], [3])], gs=[body, body],
                 tp=helper.make_tensor_type_proto(TensorProto.FLOAT, [2, "n"]))
    custom = helper.make_node("Custom", ["x"], ["y"], name="c", domain="my.domain", **attrs)
    resize = helper.make_node("Resize", ["x", "", "sc"], ["z"], name="r", axes=[1], mode="linear")
    del resize.attribute[0].ints[:]                     # an empty INTS the schema declares
    const = helper.make_node("Constant", [], ["k"], name="k")
    const.attribute.append(onnx.AttributeProto(name="value_floats", type=onnx.AttributeProto.FLOATS))  # empty
    m = make_model([custom, resize, const], {"x": X}, ["y", "z", "k"], opset=19,
                   initializers={"sc": np.ones(2, np.float32)})
    m.opset_import.append(helper.make_opsetid("my.domain", 1))
    g = model_mod.build_graph(m, infer_shapes=False)
    for orig in (custom, resize, const):
        node = next(n for n in g.nodes if n.name == orig.name)
        back = node.proto
        assert (back.name, back.op_type, back.domain) == (orig.name, orig.op_type, orig.domain)
        assert list(back.input) == list(orig.input) and list(back.output) == list(orig.output)
        got = {a.name: a for a in back.attribute}
        for a in orig.attribute:
            b = got.pop(a.name)
            assert b.type == a.type, a.name
            va, vb = helper.get_attribute_value(a), helper.get_attribute_value(b)
            if a.type == onnx.AttributeProto.TENSOR:
                assert va.data_type == vb.data_type
                np.testing.assert_array_equal(numpy_helper.to_array(va), numpy_helper.to_array(vb))
            elif a.type == onnx.AttributeProto.FLOAT:
                assert np.float32(va) == np.float32(vb)
            elif a.type == onnx.AttributeProto.FLOATS:
                np.testing.assert_array_equal(np.float32(va), np.float32(vb))
            else:
                assert va == vb, a.name
        assert not got


def test_string_tensor_attribute_kept_as_onnx_gives_it():
    t = helper.make_tensor("s", TensorProto.STRING, [2], [b"ab", b"c"])
    m = make_model([helper.make_node("Constant", [], ["y"], value=t)], {}, ["y"])
    g = model_mod.build_graph(m, infer_shapes=False)
    np.testing.assert_array_equal(g.nodes[0].attrs["value"], onnx.numpy_helper.to_array(t))


def test_constant_tensor_nodes_become_initializers():
    """A Constant node holding a tensor becomes an initializer when the graph is built (as onnxruntime's graph does
    at load): no Constant node is left, its value is numpy_helper.to_array's, and a model whose output is a
    Constant's, or which feeds one into a node, runs as onnx.reference runs it. Other Constant forms (value_floats)
    stay nodes."""
    c = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = np.array([3, 2], np.int64)
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(c)),
             helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(s)),
             helper.make_node("Constant", [], ["f"], value_floats=[1.5, 2.5]),
             helper.make_node("Reshape", ["c", "s"], ["r"]),
             helper.make_node("Add", ["x", "r"], ["y"])]
    x = np.ones((3, 2), np.float32)
    m = make_model(nodes, {"x": x}, ["y", "c", "f"])
    g = model_mod.build_graph(m)
    assert [n.op_type for n in g.nodes] == ["Constant", "Reshape", "Add"]
    np.testing.assert_array_equal(g.initializers["c"], c)
    np.testing.assert_array_equal(g.initializers["s"], s)
    assert "f" not in g.initializers
    so = onnxep.SessionOptions()
    so.graph_optimization_level = onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL
    for opts in (None, so):
        got = onnxep.InferenceSession(m.SerializeToString(), opts).run(None, {"x": x})
        for a, b in zip(got, run_reference(m, {"x": x})):
            np.testing.assert_array_equal(a, b)


def test_fully_typed_model_skips_inference_with_the_same_types():
    """A model whose value_info already types every node output (as torch's dynamo exporter writes) is built without
    onnx's shape inference, and gets the types inference gives (oracle: onnx.shape_inference on the same model
    stripped of its value_info); one untyped or rank-less output sends it through inference."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("Add", ["t", "t"], ["y"])]
    m = make_model(nodes, {"x": X}, ["y"])
    del m.graph.value_info[:]
    inferred = onnx.shape_inference.infer_shapes(m)
    assert not model_mod._fully_typed(m)
    full = onnx.ModelProto()
    full.CopyFrom(inferred)
    assert model_mod._fully_typed(full)
    want = model_mod.build_graph(m).value_types
    got = model_mod.build_graph(full).value_types
    for name in ("x", "r", "t", "y"):
        assert got[name] == want[name], name
    partial = onnx.ModelProto()
    partial.CopyFrom(full)
    del partial.graph.value_info[0]
    assert not model_mod._fully_typed(partial)
    rankless = onnx.ModelProto()
    rankless.CopyFrom(full)
    rankless.graph.value_info[0].type.tensor_type.ClearField("shape")
    assert not model_mod._fully_typed(rankless)
    # build_graph asks it with the types it read from the model (one walk over value_info): the same answers
    elemless = onnx.ModelProto()
    elemless.CopyFrom(full)
    elemless.graph.value_info[0].type.tensor_type.ClearField("elem_type")
    for model, want in ((m, False), (full, True), (partial, False), (rankless, False), (elemless, False)):
        assert model_mod._fully_typed(model) is want
        assert model_mod._fully_typed(model, model_mod._value_types(model.graph)) is want
    np.testing.assert_array_equal(onnxep.InferenceSession(full.SerializeToString()).run(None, {"x": X})[0],
                                  run_reference(m, {"x": X})[0])


def _add_model(w):
    return helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(w, "w")]), opset_imports=[helper.make_opsetid("", 17)])


def test_external_data_looked_for_only_when_the_bytes_name_it(tmp_path, monkeypatch):
    # load_model reads a small .onnx file whole and walks its tensors for external data only when the bytes hold the
    # encoding of data_location = EXTERNAL. Oracle: the sum computed by numpy, with the data inside and outside
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    inside = str(tmp_path / "inside.onnx")
    onnx.save(_add_model(w), inside)
    outside = str(tmp_path / "outside.onnx")
    onnx.save(_add_model(w), outside, save_as_external_data=True, all_tensors_to_one_file=True,
              location="outside.data", size_threshold=0)
    assert model_mod._EXTERNAL_MARK in open(outside, "rb").read()
    for path in (inside, outside):
        y = onnxep.InferenceSession(path).run(None, {"x": X})[0]
        np.testing.assert_array_equal(y, X + w)

    def refuse(*a, **k):
        raise AssertionError("walked the tensors of a model whose bytes keep no data outside")

    monkeypatch.setattr(model_mod, "_load_external_data", refuse)
    np.testing.assert_array_equal(onnxep.InferenceSession(inside).run(None, {"x": X})[0], X + w)
    with open(inside, "rb") as f:
        np.testing.assert_array_equal(onnxep.InferenceSession(f.read()).run(None, {"x": X})[0], X + w)
    with pytest.raises(AssertionError, match="walked"):
        onnxep.InferenceSession(outside)


def _with_chance_mark(n):
    """n float32 weights whose bytes hold the two bytes of data_location = EXTERNAL (as most real weights do)."""
    w = np.linspace(-1, 1, n, dtype=np.float32)
    w.view(np.uint8)[101:103] = np.frombuffer(model_mod._EXTERNAL_MARK, np.uint8)
    return w


@pytest.mark.parametrize("search", [True, False], ids=["searched", "walk-cheaper"])
@pytest.mark.parametrize("big", [False, True], ids=["read-whole", "split"])
def test_external_data_walk_needs_a_location_key(tmp_path, monkeypatch, big, search):
    # A model whose weights hold the bytes of data_location = EXTERNAL by chance, but whose encoding names no
    # external_data "location" key, is not walked for external tensors -- whether load_model reads it whole (small)
    # or splits its large weights out (model_mod.SPLIT_MODEL_BYTES and up) -- when its bytes are few enough per node
    # (model_mod._SEARCH_BYTES_PER_NODE: looking costs less than walking), else walked; one with an external tensor
    # beside such weights is walked, and reads it. Oracle: numpy's sums of the same arrays
    monkeypatch.setattr(model_mod, "_SEARCH_BYTES_PER_NODE", 1 << 30 if search else 0)
    n = (model_mod.SPLIT_MODEL_BYTES // 4 + 1000) if big else 1000
    w = _with_chance_mark(n)
    v = np.arange(n, dtype=np.float32)

    def model(outside_v):
        m = helper.make_model(helper.make_graph(
            [helper.make_node("Add", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "v"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])],
            [numpy_helper.from_array(w, "w"), numpy_helper.from_array(v, "v")]),
            opset_imports=[helper.make_opsetid("", 17)])
        if outside_v:
            from onnx.external_data_helper import set_external_data
            t = m.graph.initializer[1]
            with open(tmp_path / "v.bin", "wb") as f:
                f.write(t.raw_data)
            set_external_data(t, "v.bin")
            t.ClearField("raw_data")
            t.data_location = TensorProto.EXTERNAL
        return m

    inside, outside = str(tmp_path / "inside.onnx"), str(tmp_path / "outside.onnx")
    onnx.save(model(False), inside)
    onnx.save(model(True), outside)
    data = open(inside, "rb").read()
    assert model_mod._EXTERNAL_MARK in data and model_mod._LOCATION_KEY not in data
    assert (len(data) >= model_mod.SPLIT_MODEL_BYTES) == big
    x = np.ones(n, np.float32)
    walked = []
    real = model_mod._load_external_data
    monkeypatch.setattr(model_mod, "_load_external_data", lambda *a: walked.append(1) or real(*a))
    np.testing.assert_array_equal(onnxep.InferenceSession(inside).run(None, {"x": x})[0], x + w + v)
    np.testing.assert_array_equal(onnxep.InferenceSession(data).run(None, {"x": x})[0], x + w + v)
    assert bool(walked) != search
    walked.clear()
    np.testing.assert_array_equal(onnxep.InferenceSession(outside).run(None, {"x": x})[0], x + w + v)
    assert walked


def test_a_tensor_marked_external_without_location_is_refused():
    # data_location = EXTERNAL but no external_data entry: nothing says where the data is. Refused (onnxruntime too)
    # with the initializer or Constant node named
    w = helper.make_tensor("W", TensorProto.FLOAT, [3], [0, 0, 0])
    w.data_location = TensorProto.EXTERNAL
    del w.float_data[:]
    out = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [3])]
    ins = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])]
    add = helper.make_node("Add", ["X", "W"], ["Y"], name="a")
    as_init = helper.make_model(helper.make_graph([add], "g", ins, out, [w]),
                                opset_imports=[helper.make_opsetid("", 17)])
    as_const = helper.make_model(helper.make_graph([helper.make_node("Constant", [], ["W"], value=w, name="c"), add],
                                                   "g", ins, out), opset_imports=[helper.make_opsetid("", 17)])
    import onnxruntime
    for m, where in ((as_init, "initializer 'W'"), (as_const, "Constant node 'c'")):
        with pytest.raises(Exception):
            onnxruntime.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        with pytest.raises(InvalidGraph, match=f"{where}.*cannot be read"):
            onnxep.InferenceSession(m.SerializeToString())


def test_node_checks_remembered_by_signature_refuse_what_differs():
    # check_graph remembers the node signatures it found valid (op, opset, counts, attribute names and types): a node
    # of another signature is still checked. Oracle: onnxruntime's refusals, as test_refusals spells them
    from onnxep.errors import InvalidGraph as Refused

    def model(**attrs):
        node = helper.make_node("LeakyRelu", ["x"], ["y"], **attrs)
        m = helper.make_model(helper.make_graph(
            [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]), opset_imports=[helper.make_opsetid("", 17)])
        return m

    for _ in range(2):
        model_mod.check_graph(model(alpha=0.2))
    bad = model(alpha=0.2)
    bad.graph.node[0].attribute[0].type = onnx.AttributeProto.INT
    with pytest.raises(Refused, match="Mismatched attribute type"):
        model_mod.check_graph(bad)
    with pytest.raises(Refused, match="Unrecognized attribute"):
        model_mod.check_graph(model(alpha=0.2, beta=1.0))
    extra = model(alpha=0.2)
    extra.graph.node[0].input.append("x")
    with pytest.raises(Refused, match="input size"):
        model_mod.check_graph(extra)


@pytest.mark.parametrize("how", ["path", "bytes", "external"])
def test_large_weights_load_cache_line_aligned(tmp_path, how):
    """load_model reads each large weight into an array of its own that starts on a 64-byte boundary
    (allocator.HOST_ALIGNMENT): the batch-1 GEMV reads a weight as stored, and whole cache lines are what it streams
    best.
    Several odd sizes, so that no allocator's own alignment passes by chance. Oracle: the weights written, and their
    addresses."""
    rng = np.random.default_rng(3)
    ws = {f"w{i}": rng.standard_normal(n).astype(np.float32) for i, n in
          enumerate([model_mod.STRIPPED_BYTES // 4 + 3, 40_001, 70_007, 300_000])}
    outs = [helper.make_tensor_value_info(f"y{k}", TensorProto.FLOAT, [w.size]) for k, w in ws.items()]
    graph = helper.make_graph([helper.make_node("Identity", [k], [f"y{k}"]) for k in ws], "g", [], outs,
                              [numpy_helper.from_array(w, k) for k, w in ws.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path, **(dict(save_as_external_data=True, location="m.bin", size_threshold=0)
                              if how == "external" else {}))
    weights = {}
    model_mod.load_model(open(path, "rb").read() if how == "bytes" else path, weights)
    assert set(weights) == set(ws)
    for k, w in ws.items():
        assert weights[k].ctypes.data % 64 == 0, k
        np.testing.assert_array_equal(weights[k], w)
        assert not weights[k].flags.writeable


def test_type_parameter_bound_to_two_types_refused_at_load():
    """A schema's type parameter bound to two types (a float64 weight into a float32 Gemm: T for A, B and C) is refused
    when the session is made, naming the parameter, both values and the node, with the class onnxruntime raises
    (Fail); it had run, the fallback upcasting or a kernel failing on the buffer's type. Oracle: onnxruntime's verdict
    on the same bytes when it is installed, and numpy for the float32 model that still runs afterwards."""
    def gemm_model(wdtype):
        w = np.arange(12, dtype=wdtype).reshape(4, 3)
        g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, name="fc")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(4, np.float32), "b")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    bad = gemm_model(np.float64)
    with pytest.raises(onnxep.errors.Fail, match=r"Type parameter \(T\) of Optype \(Gemm\) bound to different types "
                                                 r"\(tensor\(float\) of 'x' and tensor\(double\) of 'w'\) in node \(fc\)"):
        onnxep.InferenceSession(bad)
    ort = pytest.importorskip("onnxruntime")
    with pytest.raises(Exception, match="bound to different types"):
        ort.InferenceSession(bad, providers=["CPUExecutionProvider"])
    x = np.ones((1, 3), np.float32)
    y = onnxep.InferenceSession(gemm_model(np.float32)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(y, x @ np.arange(12, dtype=np.float32).reshape(4, 3).T)
