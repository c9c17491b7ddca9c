"""Device / Backend / BufferType / Buffer / GraphPlan against seed 002_23061e04fda6a8e4.txt (ggml-backend-impl.h).

Oracle: numpy (byte equality) and the seed's member comments, quoted per test."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep.backends.cpu import CPU_DEVICE
from onnxep.backends.reference import REFERENCE_DEVICE
from onnxep.contracts import Stream, Tensor, cpy_tensor
from onnxep.contracts.compile import CompileContext, compile
from onnxep.contracts.backend import BufferType
from onnxep.errors import InvalidArgument
from onnxep.graph.model import build_graph
from onnxep.graph.partition import partition
from tests._util import fallback_options, make_model


@pytest.fixture
def cpu():
    return CPU_DEVICE.init_backend(Stream("t"))


@pytest.fixture
def ref():
    return REFERENCE_DEVICE.init_backend(Stream("r"))


def test_get_alignment_and_base_alignment(cpu):
    # seed 002: "get buffer alignment" / "get_base ... get base pointer"
    a = cpu.get_alignment()
    assert a >= 64 and a & (a - 1) == 0
    for size in (1, 3, 100, 4096 + 7):
        buf = cpu.alloc_buffer(size)
        assert buf.get_base() % a == 0 and buf.get_size() == size


def test_get_alloc_size_pre_allocation_callback(cpu):
    # seed 002: get_alloc_size "pre-allocation callback": bytes a tensor needs, here rounded up to the alignment
    t = Tensor("t", np.float32, (3, 5))
    buf = cpu.alloc_buffer(1024)
    assert buf.get_alloc_size(t) == 64  # 60 bytes -> one 64-byte unit
    assert buf.get_alloc_size(Tensor("z", np.float32, (0,))) == 0


def test_init_tensor_and_free_tensor(cpu):
    # seed 002: init_tensor "post-allocation callback", free_tensor "pre-free callback"
    buf = cpu.alloc_buffer(256)
    t = buf.init_tensor(Tensor("t", np.float32, (4, 4)), offset=64)
    assert t.buffer is buf and t.offset == 64
    t.array()[...] = 7
    assert (buf.view(np.float32, (16,), 64) == 7).all()
    buf.free_tensor(t)
    assert t.buffer is None
    with pytest.raises(InvalidArgument, match="does not fit"):
        buf.init_tensor(Tensor("big", np.float32, (100,)), 0)
    with pytest.raises(InvalidArgument, match="aligned"):
        buf.init_tensor(Tensor("odd", np.float32, (1,)), 4)


def test_set_get_tensor_with_offset_and_size(cpu):
    # seed 002: "set_tensor_async(backend, tensor, data, offset, size)" / get_tensor_async
    t = cpu.buffer_type.alloc_tensor("t", np.float32, (8,))
    cpu.set_tensor(t, np.arange(8, dtype=np.float32))
    cpu.set_tensor(t, np.array([-1, -2], np.float32), offset=8)
    out = np.zeros(8, np.float32)
    cpu.get_tensor(t, out)
    np.testing.assert_array_equal(out, [0, 1, -1, -2, 4, 5, 6, 7])
    part = np.zeros(3, np.float32)
    cpu.get_tensor(t, part, offset=12, size=12)
    np.testing.assert_array_equal(part, [-2, 4, 5])
    with pytest.raises(InvalidArgument, match="out of range"):
        cpu.set_tensor(t, np.zeros(9, np.float32))


def test_async_copies_complete_at_synchronize(cpu):
    # seed 002: "these functions can be asynchronous, helper functions are provided for synchronous access that
    # automatically call synchronize"
    t = cpu.buffer_type.alloc_tensor("t", np.int32, (4,))
    cpu.set_tensor(t, np.zeros(4, np.int32))
    cpu.set_tensor_async(t, np.full(4, 9, np.int32))
    out = np.full(4, -1, np.int32)
    cpu.get_tensor_async(t, out)
    assert (out == -1).all()  # nothing has run yet: both copies are queued on the stream
    cpu.synchronize()
    np.testing.assert_array_equal(out, [9, 9, 9, 9])


def test_cpy_tensor_between_backends(cpu, ref):
    # seed 002: "(optional) copy tensor between different backends, allow for single-copy tranfers"
    src = cpu.buffer_type.alloc_tensor("s", np.float32, (2, 3))
    cpu.set_tensor(src, np.arange(6, dtype=np.float32))
    dst = ref.buffer_type.alloc_tensor("d", np.float32, (2, 3))
    cpy_tensor(cpu, src, ref, dst)
    np.testing.assert_array_equal(dst.array(), np.arange(6, dtype=np.float32).reshape(2, 3))
    calls = []
    ref.cpy_tensor_from = lambda s, d: calls.append((s.name, d.name))
    cpy_tensor(cpu, src, ref, dst)
    assert calls == [("s", "d")]  # the single-copy hook is preferred when offered
    with pytest.raises(InvalidArgument):
        cpy_tensor(cpu, src, ref, ref.buffer_type.alloc_tensor("x", np.float32, (5,)))


def test_supports_op_lives_on_the_stateless_device(cpu):
    # seed 002: "check if the backend supports an operation"; onnxep puts it on Device (ggml PR #9707) and the backend
    # delegates
    m = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["y"], ["z"])],
                   {"x": np.zeros((2, 2), np.float32)}, ["z"])
    g = build_graph(m)
    g.nodes[1].op_type = "NotAnOnnxOp"  # nothing native claims it
    from onnxep.graph.partition import op_info
    relu, neg = (op_info(n, g.value_types, g.constants) for n in g.nodes)
    assert CPU_DEVICE.supports_op(relu) and cpu.supports_op(relu)
    assert not CPU_DEVICE.supports_op(neg)
    assert REFERENCE_DEVICE.supports_op(neg)
    assert not hasattr(CPU_DEVICE, "stream")


def test_graph_plan_create_compute_free(cpu, ref):
    # seed 002: graph_plan_create / graph_plan_compute / graph_plan_free, and graph_compute without a plan
    m = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["y"], ["z"])],
                   {"x": np.zeros((2, 2), np.float32)}, ["z"])
    parts = partition(build_graph(m), [CPU_DEVICE, REFERENCE_DEVICE], forced={"Neg"})
    assert [p.backend for p in parts] == ["cpu", "reference"]
    ctx = CompileContext(weight_allocator=BufferType("w", Stream()))
    backends = {"cpu": cpu, "reference": ref}
    plans = compile(parts, backends, ctx)
    from onnxep.graph.executor import RunContext
    run = RunContext(Stream(), 1 << 30)
    values = {"x": np.array([[-1, 2], [3, -4]], np.float32)}
    for plan in plans:
        backends[plan.backend_name].graph_plan_compute(plan, values, run)
    np.testing.assert_array_equal(values["z"], [[0, -2], [-3, 0]])
    for plan in plans:
        backends[plan.backend_name].graph_plan_free(plan)
    assert plans[0].steps == [] and plans[1].evaluator is None
    values2 = {"x": np.ones((2, 2), np.float32)}
    cpu.graph_compute(parts[0], ctx, values2, run)
    np.testing.assert_array_equal(values2["y"], np.ones((2, 2)))


def test_session_copies_at_backend_boundaries():
    # DESIGN: partitions per backend "with copies at the boundaries": a value computed by the reference backend and
    # read by the cpu backend is copied into a cpu buffer (so a registered allocator sees it)
    m = make_model([helper.make_node("Neg", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                   {"x": np.zeros((3,), np.float32)}, ["z"])
    sess = onnxep.InferenceSession(m.SerializeToString(), fallback_options("Neg"))
    assert [p.backend_name for p in sess.plans] == ["reference", "cpu"]
    assert sess._executor.copies == [(), (("y", "reference"),)]
    np.testing.assert_array_equal(sess.run(None, {"x": np.array([1, -2, 3], np.float32)})[0], [0, 2, 0])


def test_reference_partition_receives_string_constants():
    # a string initializer read by a reference-backend node must reach that partition
    import onnx
    from onnx import TensorProto
    g = helper.make_graph([helper.make_node("Concat", ["x", "s"], ["y"], axis=0)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.STRING, [1])],
                          [helper.make_tensor_value_info("y", TensorProto.STRING, [2])],
                          [onnx.numpy_helper.from_array(np.array(["b"], dtype=object), "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.fallback_op_types", "Concat")   # whether or not the cpu backend has it
    sess = onnxep.InferenceSession(m.SerializeToString(), so)
    assert sess.node_assignment == {"Concat_0": "reference"}
    assert sess.run(None, {"x": np.array(["a"], dtype=object)})[0].tolist() == ["a", "b"]
