"""Sessions given one PrePackedWeightsContainer share their packed weights, and no session keeps the unpacked original
of a weight it packed (the kernel contract: once packed, the runtime drops the original). Deterministic accounting
only -- object identity, buffer addresses, the container's held bytes, the arrays reachable from a session -- never
RSS or timing."""
import gc
import types

import numpy as np
import pytest
from onnx import helper

import onnxep
from tests._util import make_model

RNG = np.random.default_rng(7)
W_CONV = RNG.standard_normal((16, 8, 3, 3)).astype(np.float32)
W_GEMM = RNG.standard_normal((16 * 6 * 6, 10)).astype(np.float32)
X = RNG.standard_normal((1, 8, 8, 8)).astype(np.float32)


def _model():
    nodes = [helper.make_node("Conv", ["X", "W"], ["c"], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "B"], ["Y"], name="gemm")]
    return make_model(nodes, {"X": X}, ["Y"], initializers={"W": W_CONV, "B": W_GEMM}).SerializeToString()


def _packed_arrays(sess):
    """(node name, input index) -> the packed array the kernel computes with."""
    out = {}
    for plan in sess.plans:
        for kernel, _ins, _outs, packed, _frees, name, _op in getattr(plan, "steps", ()):
            for j in packed:
                out[(name, j)] = kernel.packed(j)
    return out


def _addr(a):
    return a.__array_interface__["data"][0]


def _reachable_arrays(root, skip=()):
    """Every numpy array reachable from `root` through object references (and array bases), not entering `skip`,
    modules, classes or functions."""
    seen, todo, arrays = {id(s) for s in skip}, [root], []
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)):
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            arrays.append(o)
            if o.base is not None:
                todo.append(o.base)
        todo.extend(gc.get_referents(o))
    return arrays


def _holds_copy_of(arrays, w):
    wb = w.reshape(-1).view(np.uint8)
    return [a for a in arrays if isinstance(a, np.ndarray) and a.nbytes == w.nbytes and a.dtype != object
            and np.array_equal(np.ascontiguousarray(a).reshape(-1).view(np.uint8), wb)]


def test_sessions_given_one_container_compute_with_the_same_packed_buffers():
    c = onnxep.PrePackedWeightsContainer()
    s1 = onnxep.InferenceSession(_model(), prepacked_weights_container=c)
    y1 = s1.run(None, {"X": X})[0]
    held, entries, misses = c.nbytes, len(c), c.misses
    p1 = _packed_arrays(s1)
    assert len(p1) >= 2 and held > 0            # the conv and the gemm weights are packed
    s2 = onnxep.InferenceSession(_model(), prepacked_weights_container=c)
    y2 = s2.run(None, {"X": X})[0]
    p2 = _packed_arrays(s2)
    assert p2.keys() == p1.keys()
    for k in p1:                                 # the same memory, not equal copies
        assert _addr(p2[k]) == _addr(p1[k]) and p2[k].nbytes == p1[k].nbytes
    # the second session added nothing to the container: its packings were hits, their buffers freed
    assert (c.nbytes, len(c), c.misses) == (held, entries, misses)
    assert c.hits >= len(p1)
    np.testing.assert_array_equal(y1, y2)


def test_own_containers_do_not_share():
    s1 = onnxep.InferenceSession(_model())
    s2 = onnxep.InferenceSession(_model())
    p1, p2 = _packed_arrays(s1), _packed_arrays(s2)
    assert p1.keys() == p2.keys() and all(_addr(p1[k]) != _addr(p2[k]) for k in p1)


def test_session_keeps_no_unpacked_copy_of_a_packed_weight():
    # neither the sessions nor the container they share keep the original of a packed weight (the container verifies
    # a hash hit on the packings), with a shared container and with each session's own
    shared = onnxep.PrePackedWeightsContainer()
    sessions = [onnxep.InferenceSession(_model(), prepacked_weights_container=shared) for _ in range(2)]
    sessions.append(onnxep.InferenceSession(_model()))
    for s in sessions:
        s.run(None, {"X": X})
        arrays = _reachable_arrays(s)                           # the session's container included
        assert any(a.nbytes >= W_GEMM.nbytes for a in arrays)    # the walk does reach the packed buffers
        for w in (W_CONV, W_GEMM):
            assert _holds_copy_of(arrays, w) == []


def test_session_keeps_no_protobuf_message():
    # a session of a model the cpu backend runs whole holds no onnx protobuf message: with protobuf's upb backend any
    # sub-message (a value_info's TypeProto) keeps its whole parsed model alive, and a standalone one costs ~1.5 KB of
    # arena -- per value type, per session, whatever the container shares. Oracle: isinstance over the object graph.
    from google.protobuf.message import Message
    sess = onnxep.InferenceSession(_model())
    assert set(sess.node_assignment.values()) == {"cpu"}
    sess.run(None, {"X": X})
    seen, todo, messages = set(), [sess], []
    while todo:
        o = todo.pop()
        if id(o) in seen or isinstance(o, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType)):
            continue
        seen.add(id(o))
        if isinstance(o, Message):
            messages.append(type(o).__name__)
            continue
        todo.extend(gc.get_referents(o))
    assert messages == []
    # ... while the types it reports still come from the model (NodeArg reads them from the kept ValueTypes)
    assert [(i.name, i.type, i.shape) for i in sess.get_inputs()] == [("X", "tensor(float)", [1, 8, 8, 8])]


def _affine_model():
    # Conv + BatchNormalization: the fold leaves a per-session bias, and a second Conv reads an unpacked bias
    rng = np.random.default_rng(3)
    inits = {"W": rng.standard_normal((8, 8, 3, 3)).astype(np.float32),
             "W2": rng.standard_normal((8, 8, 1, 1)).astype(np.float32),
             "B2": rng.standard_normal(8).astype(np.float32),
             "s": rng.uniform(0.5, 2, 8).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32),
             "m": rng.standard_normal(8).astype(np.float32), "v": rng.uniform(0.5, 2, 8).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["X", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], name="bn"),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("Conv", ["r", "W2", "B2"], ["Y"], name="conv2")]
    return make_model(nodes, {"X": X}, ["Y"], initializers=inits, opset=13).SerializeToString()


def _plan_constants(sess):
    return {name: a for plan in sess.plans for name, a in getattr(plan, "constants", {}).items()}


def test_sessions_given_one_container_share_unpacked_constants():
    # the constants kernels read unpacked (the folded bias, B2) are weights too: one container holds them once, so a
    # second session computes with the first one's arrays. Oracle: object identity, and onnxruntime for values
    # (onnx.reference's BatchNormalization is off here, see DESIGN.md).
    ort = pytest.importorskip("onnxruntime")
    model = _affine_model()
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"X": X})[0]
    c = onnxep.PrePackedWeightsContainer()
    s1 = onnxep.InferenceSession(model, prepacked_weights_container=c)
    s2 = onnxep.InferenceSession(model, prepacked_weights_container=c)
    k1, k2 = _plan_constants(s1), _plan_constants(s2)
    assert len(k1) >= 2 and k1.keys() == k2.keys()
    for name in k1:
        assert k2[name] is k1[name] and not k1[name].flags.writeable
    assert c.constant_hits >= len(k1) and c.constant_nbytes == sum(a.nbytes for a in k1.values())
    for s in (s1, s2):
        np.testing.assert_allclose(s.run(None, {"X": X})[0], want, rtol=1e-4, atol=1e-4)
    # each session's own container: nothing in common
    s3 = onnxep.InferenceSession(model)
    assert all(_plan_constants(s3)[n] is not k1[n] for n in k1)
    np.testing.assert_allclose(s3.run(None, {"X": X})[0], want, rtol=1e-4, atol=1e-4)


def test_second_session_reuses_the_first_ones_names():
    # value and node names a plan keeps are interned: a second session of a model refers to the first one's strings
    s1, s2 = onnxep.InferenceSession(_model()), onnxep.InferenceSession(_model())
    for p1, p2 in zip(s1.plans, s2.plans):
        for a, b in zip(p1.steps, p2.steps):
            assert all(x is y for x, y in zip(a[1] + a[2], b[1] + b[2])) and a[5] is b[5]
            assert a[3] is b[3]                                        # one frozenset per distinct set of indices


def test_sessions_given_one_container_share_their_kernels_name_and_type_tuples():
    # the tuples a plan keeps per node -- its input, output and freed value names, its KernelInfo's input and output
    # ValueTypes -- are held once per container: a second session on the container holds the first one's, a session
    # with its own container equal ones of its own. Oracle: object identity, and the first session's outputs
    c = onnxep.PrePackedWeightsContainer()
    s1 = onnxep.InferenceSession(_model(), prepacked_weights_container=c)
    s2 = onnxep.InferenceSession(_model(), prepacked_weights_container=c)
    own = onnxep.InferenceSession(_model())

    def held(sess):
        return [(st[1], st[2], st[4], st[0].info.input_types, st[0].info.output_types)
                for p in sess.plans for st in p.steps]

    h1, h2, h3 = held(s1), held(s2), held(own)
    assert len(h1) >= 4 and any(frees for _, _, frees, _, _ in h1)
    for a, b, o in zip(h1, h2, h3):
        assert all(x is y for x, y in zip(a, b))
        assert a == o and not any(x is y for x, y in zip(a[:2], o[:2]))
    for ins in (st[0].info.input_types for p in s2.plans for st in p.steps):
        assert all(vt is c.share_immutable(vt) for vt in ins)
    np.testing.assert_array_equal(s2.run(None, {"X": X})[0], s1.run(None, {"X": X})[0])


def test_share_immutable_holds_one_of_each_equal_object():
    # Oracle: equality and identity
    c = onnxep.PrePackedWeightsContainer()
    a, b = ("x", "y"), tuple(["x", "y"])
    assert a == b and a is not b
    assert c.share_immutable(a) is a and c.share_immutable(b) is a and c.share_immutable(("y",)) == ("y",)
    c.clear()
    assert c.share_immutable(b) is b


def test_outputs_that_are_constants_or_their_views_are_the_callers():
    # a graph output that is a view of a (shared, read-only) constant, or an initializer itself, comes back as a
    # writable array of its own, as onnxruntime's do: writing to it changes neither the session nor the other
    # session sharing the container. Oracle: numpy (the initializer's values).
    K = np.arange(6, dtype=np.float32).reshape(2, 3)
    nodes = [helper.make_node("Reshape", ["K", "s"], ["view"]), helper.make_node("Relu", ["X"], ["r"])]
    model = make_model(nodes, {"X": np.zeros((2,), np.float32)}, ["view", "K", "r"],
                       initializers={"K": K, "s": np.array([3, 2], np.int64)}).SerializeToString()
    c = onnxep.PrePackedWeightsContainer()
    s1 = onnxep.InferenceSession(model, prepacked_weights_container=c)
    s2 = onnxep.InferenceSession(model, prepacked_weights_container=c)
    for _ in range(2):
        view, k, _ = s1.run(None, {"X": np.zeros((2,), np.float32)})
        assert view.flags.writeable and k.flags.writeable
        np.testing.assert_array_equal(view, K.reshape(3, 2))
        np.testing.assert_array_equal(k, K)
        view[...] = -1
        k[...] = -1
    np.testing.assert_array_equal(s2.run(None, {"X": np.zeros((2,), np.float32)})[0], K.reshape(3, 2))
