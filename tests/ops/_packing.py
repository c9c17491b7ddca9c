"""Shared checks for ops with a pre-packed weight: packed vs unpacked vs non-sharing mode give identical outputs."""
import numpy as np

import onnxep
from onnxep.contracts.allocator import Stream
from onnxep.contracts.backend import BufferType
from onnxep.contracts.compile import CompileContext, prepack_kernel
from onnxep.contracts.kernel import KernelContext
from onnxep.ops import _registry
from tests._util import fallback_nodes, make_model, run_onnxep


def _options(disable_prepacking=False):
    """Sessions that run the node's own kernel: the layout passes (which would swap in an NHWC twin) are off."""
    so = onnxep.SessionOptions()
    so.graph_optimization_level = onnxep.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    if disable_prepacking:
        so.add_session_config_entry("session.disable_prepacking", "1")
    return so


def assert_packing_modes_agree(node, feeds, weight_name, weight, opset):
    """Oracle: the unpacked path (weight fed as a graph input). The weight as an initializer (packed, sharing mode),
    with prepacking disabled, and in non-sharing mode (kernel built by hand, cache None) must all give bit-identical
    outputs."""
    unpacked_model = make_model([node], {**feeds, weight_name: weight}, [node.output[0]], opset=opset)
    ref, s0 = run_onnxep(unpacked_model, {**feeds, weight_name: weight}, sess_options=_options())
    assert fallback_nodes(s0) == []
    packed_model = make_model([node], feeds, [node.output[0]], opset=opset, initializers={weight_name: weight})
    got, s1 = run_onnxep(packed_model, feeds, sess_options=_options())
    assert fallback_nodes(s1) == []
    assert [st[6] for p in s1.plans for st in p.steps] == [node.op_type]
    np.testing.assert_array_equal(got[0], ref[0])
    got2, _ = run_onnxep(packed_model, feeds, sess_options=_options(disable_prepacking=True))
    np.testing.assert_array_equal(got2[0], ref[0])
    # non-sharing mode: the kernel keeps its packed buffer and frees it in release()
    from onnxep.backends.cpu.device import KernelInfo
    cls = _registry.lookup("", node.op_type, opset)
    idx = list(node.input).index(weight_name)
    attrs = {a.name: onnxep_attr(a) for a in node.attribute}
    info = KernelInfo(node.name, node.op_type, "", opset, attrs, (), (), {idx: weight})
    kernel = cls(info)
    ctx = CompileContext(weight_allocator=BufferType("w", Stream("w")), container=None)
    packed = prepack_kernel(kernel, {idx: weight}, ctx)
    assert packed == {idx}
    assert kernel.packed(idx) is not None
    values = dict(feeds)
    kctx = KernelContext(values, tuple(node.input), tuple(node.output), lambda shape, dtype: np.empty(shape, dtype),
                         0, frozenset(packed), node.name)
    kernel.compute(kctx)
    np.testing.assert_array_equal(values[node.output[0]], ref[0])
    owned = list(kernel._owned)
    kernel.release()
    assert all(b.is_freed for b in owned) and kernel.packed(idx) is None
    return ref[0]


def onnxep_attr(a):
    from onnx import helper
    v = helper.get_attribute_value(a)
    return v.decode() if isinstance(v, bytes) else v
