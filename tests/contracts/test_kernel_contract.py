"""The Kernel contract and its three pre-packing modes, against seed 001_a7cfc285f4a38a75.txt (OrtKernelImpl).

A test kernel in a private domain (registered through the public registry, as a user of the contracts would) computes
Y = X @ W; it packs W as W.T. Oracle: numpy."""
import gc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.contracts import API_VERSION
from onnxep.contracts.backend import BufferType
from onnxep.contracts.allocator import Stream
from onnxep.contracts.compile import CompileContext, prepack_kernel
from onnxep.errors import InvalidArgument, RuntimeException
from onnxep.ops import _registry
from onnxep.ops._base import OpKernel

DOMAIN = "test.onnxep"
EVENTS = []


class PackedMatMul(OpKernel):
    domain, op_type, since = DOMAIN, "PackedMatMul", 1
    mode = "share"      # share | own | none
    compute_reads_original = False

    def __init__(self, info):
        super().__init__(info)
        self.packed = None
        self.own = None

    def prepack_weight(self, tensor, input_index, allocator, cache):
        EVENTS.append(("prepack", self.name, input_index, cache is not None))
        if input_index != 1 or self.mode == "none":
            return False
        buf = allocator.alloc_buffer(tensor.nbytes)
        buf.view(np.float32, tensor.T.shape)[...] = tensor.T
        self.k, self.n = tensor.shape
        if self.mode == "share" and cache is not None:
            cache.store_weight_data([buf])  # ownership moved to the cache
        else:
            self.own = buf
            self.packed = buf.view(np.float32, (self.n, self.k))
        return True

    def prepack_format(self, input_index):
        return "test:W.T"

    def set_shared_prepacked_weight(self, buffers, input_index):
        EVENTS.append(("set_shared", self.name, input_index, tuple(id(b) for b in buffers)))
        self.shared = buffers
        self.packed = buffers[0].view(np.float32, (self.n, self.k))

    def compute(self, ctx):
        x = ctx.input(0)
        w_t = ctx.input(1).T if self.packed is None or self.compute_reads_original else self.packed
        y = ctx.output(0, (x.shape[0], w_t.shape[0]))
        np.matmul(x, w_t.T, out=y)

    def release(self):
        EVENTS.append(("release", self.name))
        if self.own is not None:
            self.own.free_buffer()


@pytest.fixture(autouse=True)
def registered():
    EVENTS.clear()
    PackedMatMul.mode = "share"
    PackedMatMul.compute_reads_original = False
    _registry.register(PackedMatMul)
    yield
    _registry.unregister(PackedMatMul)


def _model(weight_as_input=False):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    nodes = [helper.make_node("PackedMatMul", ["x", "w"], ["h"], domain=DOMAIN, name="first"),
             helper.make_node("PackedMatMul", ["x", "w2"], ["y"], domain=DOMAIN, name="second")]
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(w.copy(), "w2")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])]
    if weight_as_input:
        inputs += [helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3]),
                   helper.make_tensor_value_info("w2", TensorProto.FLOAT, [4, 3])]
    g = helper.make_graph(nodes, "g", inputs,
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in ("h", "y")], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)], ir_version=8)
    return m, w


def _run(model, x, **kw):
    sess = onnxep.InferenceSession(model.SerializeToString(), **kw)
    return sess, sess.run(None, {"x": x})


X = np.arange(8, dtype=np.float32).reshape(2, 4)


def test_sharing_mode_two_kernels_get_the_same_buffers():
    # seed 001: "the kernel can optionally choose to share the packed weight with other kernels that use the same
    # weight (compared by content hash) ... ORT will subsequently call OrtKernelImpl::SetSharedPrePackedWeight() to
    # provide this kernel with the actual shared weight data, whose memory location could differ (i.e., if shared
    # data was allocated by a previously processed kernel)."
    m, w = _model()
    sess, (h, y) = _run(m, X)
    np.testing.assert_allclose(h, X @ w, rtol=1e-6)
    np.testing.assert_array_equal(h, y)
    shared = [e for e in EVENTS if e[0] == "set_shared"]
    assert [(e[1], e[2]) for e in shared] == [("first", 1), ("second", 1)]
    assert shared[0][3] == shared[1][3]  # the very same buffers
    assert sess._container.hits == 1 and len(sess._container) == 1


def test_set_shared_called_only_for_inputs_packed_in_sharing_mode():
    # seed 001: "ORT will not call this function for an input_index that a previous call to
    # OrtKernelImpl::PrePackWeight() did not elect to pre-pack and share."
    m, _ = _model()
    _run(m, X)
    prepacked = [(e[1], e[2]) for e in EVENTS if e[0] == "prepack"]
    assert ("first", 1) in prepacked
    assert all(e[2] == 1 for e in EVENTS if e[0] == "set_shared")


def test_no_prepacking_mode():
    # seed 001: "No pre-packing mode: The kernel can forgo any weight pre-packing for the given input_index by setting
    # is_packed to false ... In this mode, the kernel's OrtKernelImpl::SetSharedPrePackedWeight() function is not
    # called for that specific input_index."
    PackedMatMul.mode = "none"
    m, w = _model()
    _, (h, _) = _run(m, X)
    np.testing.assert_allclose(h, X @ w, rtol=1e-6)
    assert not [e for e in EVENTS if e[0] == "set_shared"]


def test_non_sharing_mode_kernel_owns_and_releases():
    # seed 001: "Non-sharing mode: In non-sharing mode, the prepacked_weight_cache argument is ignored. ... The kernel is
    # ultimately responsible for releasing the packed data for the weight with allocator. ... the kernel's
    # OrtKernelImpl::SetSharedPrePackedWeight() function is not called by ORT for that specific input_index."
    PackedMatMul.mode = "own"
    m, w = _model()
    sess, (h, y) = _run(m, X)
    np.testing.assert_allclose(h, X @ w, rtol=1e-6)
    assert not [e for e in EVENTS if e[0] == "set_shared"]
    kernels = [s[0] for p in sess.plans for s in p.steps]
    assert kernels[0].own is not kernels[1].own
    del sess
    gc.collect()
    assert ("release", "first") in EVENTS and ("release", "second") in EVENTS
    assert all(k.own.is_freed for k in kernels)


def test_non_sharing_mode_when_no_cache_is_given():
    # seed 001: "Sharing is allowed if the prepacked_weight_cache argument is not NULL"; prepack_kernel passes None
    # when the compile context has no container, so a sharing-capable kernel keeps its own copy.
    kernel = PackedMatMul.__new__(PackedMatMul)
    kernel.name, kernel.own, kernel.packed = "k", None, None
    ctx = CompileContext(weight_allocator=BufferType("w", Stream()), container=None)
    w = np.ones((4, 3), np.float32)
    assert prepack_kernel(kernel, {1: w}, ctx) == {1}
    assert EVENTS[-1] == ("prepack", "k", 1, False)
    assert kernel.own is not None and not [e for e in EVENTS if e[0] == "set_shared"]


def test_unpacked_weight_is_not_readable_in_compute_after_packing():
    # seed 001: "ORT may release the original (unpacked) weight, which must not be accessed in OrtKernelImpl::Compute()."
    PackedMatMul.compute_reads_original = True
    m, _ = _model()
    sess = onnxep.InferenceSession(m.SerializeToString())
    with pytest.raises(InvalidArgument, match="pre-packed"):
        sess.run(None, {"x": X})
    # the original weight is not kept by the plan either
    assert all("w" not in p.constants and "w2" not in p.constants for p in sess.plans)


def test_packed_and_unpacked_paths_agree_bit_for_bit():
    m, _ = _model()
    _, packed = _run(m, X)
    m2, w = _model(weight_as_input=True)
    sess = onnxep.InferenceSession(m2.SerializeToString())
    unpacked = sess.run(None, {"x": X, "w": w, "w2": w})
    for a, b in zip(packed, unpacked):
        assert a.tobytes() == b.tobytes()


def test_prepacking_disabled_by_session_config():
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_prepacking", "1")
    m, w = _model()
    _, (h, _) = _run(m, X, sess_options=so)
    assert not [e for e in EVENTS if e[0] == "prepack"]
    np.testing.assert_allclose(h, X @ w, rtol=1e-6)


def test_version_and_flags_are_checked_at_registration():
    # seed 001: ort_version_supported "Must be initialized to ORT_API_VERSION."; flags "EP must initialize to 0."
    class Old(OpKernel):
        domain, op_type, since = DOMAIN, "Old", 1
        ort_version_supported = API_VERSION + 1

    class Flagged(OpKernel):
        domain, op_type, since = DOMAIN, "Flagged", 1
        flags = 1

    for cls in (Old, Flagged):
        with pytest.raises(ImportError):
            _registry.register(cls)
        assert _registry.lookup(DOMAIN, cls.op_type, 1) is None


def test_every_registered_kernel_follows_the_contract():
    # STYLE.md contract test: every kernel subclasses OpKernel, declares domain/op_type/since, overrides contract
    # methods with the contract's signatures, and carries the contract version.
    import inspect

    from onnxep.contracts.kernel import Kernel
    for cls in _registry.all_kernels():
        assert issubclass(cls, OpKernel) and cls.op_type and isinstance(cls.since, int)
        assert cls.ort_version_supported == API_VERSION and cls.flags == 0
        for name in ("compute", "prepack_weight", "set_shared_prepacked_weight", "release", "prepack_format",
                     "prepacked_weight_info", "set_prepacked_weight_info"):
            assert list(inspect.signature(getattr(cls, name)).parameters) == list(
                inspect.signature(getattr(Kernel, name)).parameters), (cls, name)


def test_op_index_lists_what_every_op_module_registers():
    """ops/_index.py (which module defines which ops, read so the registry imports a module at the first lookup of one
    of its ops) is what importing every op module registers (oracle: the modules themselves); after an op module is
    added or changed, write it anew with onnxep.ops._registry.write_index()."""
    from onnxep.ops._index import INDEX
    assert INDEX == _registry.index()


def test_a_lookup_imports_only_its_op_modules():
    """A fresh process that imports onnxep and looks up one op imports that op's module, not the ~200 others; the op
    found is the one the full registry gives (oracle: all_kernels after load_all)."""
    import subprocess
    import sys
    code = ("import sys, onnxep\nfrom onnxep.ops import _registry\n"
            "before = {m for m in sys.modules if m.startswith('onnxep.ops.')}\n"
            "cls = _registry.lookup('', 'Celu', 12)\n"
            "after = {m for m in sys.modules if m.startswith('onnxep.ops.')}\n"
            "print(sorted(after - before), cls.__module__ + '.' + cls.__qualname__, len(before) < 100)\n"
            "n = len(_registry.all_kernels())\n"
            "print(_registry.lookup('', 'Celu', 12) is cls, n > 300)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    first, second = r.stdout.strip().splitlines()[-2:]
    assert "onnxep.ops.math.activations'] onnxep.ops.math.activations.Celu" in first and first.endswith("True")
    assert first.count("'onnxep.ops.") <= 3       # its module, and what that one imports
    assert second == "True True"


def test_compute_errors_name_the_node_and_the_session_still_works():
    class Boom(PackedMatMul):
        op_type = "Boom"

        def compute(self, ctx):
            if ctx.input(0)[0, 0] < 0:
                raise ValueError("negative first element")
            super().compute(ctx)

    _registry.register(Boom)
    try:
        m, w = _model()
        for n in m.graph.node:
            n.op_type = "Boom"
        sess = onnxep.InferenceSession(m.SerializeToString())
        with pytest.raises(RuntimeException, match="Boom node.*first.*negative"):
            sess.run(None, {"x": -np.ones((2, 4), np.float32)})
        h, _ = sess.run(None, {"x": X})
        np.testing.assert_allclose(h, X @ w, rtol=1e-6)
    finally:
        _registry.unregister(Boom)


def test_registry_ranges_are_not_inherited_by_subclasses():
    # a registered kernel subclassing another registered one must get its own version range
    class V1(OpKernel):
        domain, op_type, since = DOMAIN, "Ranged", 1

    class V5(V1):
        since = 5

    class V9(V5):
        since = 9

    for c in (V9, V1, V5):
        _registry.register(c)
    try:
        assert [_registry.lookup(DOMAIN, "Ranged", v) for v in (1, 4, 5, 8, 9, 30)] == [V1, V1, V5, V5, V9, V9]
        assert _registry.version_range(V5) == (5, 9)
        _registry.unregister(V5)
        assert _registry.lookup(DOMAIN, "Ranged", 6) is V1
    finally:
        for c in (V1, V9):
            _registry.unregister(c)
