"""Issue 26: RunOptions.terminate set during a compiled run (backends/cpu/runloop.py) stops it before the next
stretch of C steps, with onnxruntime's exception (Fail, "Exiting due to terminate flag being set to true."), and the
session runs in full afterwards. Oracle: the output buffer bound with IOBinding -- the C step after the flag never
writes it -- and numpy for the values; onnxruntime for the error type and message (tests/api/client.py)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.backends.cpu import device as cpu_device
from onnxep.ops import _registry
from onnxep.ops._base import OpKernel

DOMAIN = "test.terminate"


class _Hook(OpKernel):
    """y := x + 1 in Python (a Python step of the compiled loop), calling `hook()` last when set (after its
    allocation, which would see the flag itself)."""

    domain, op_type, since = DOMAIN, "Hook", 1
    hook = None

    def compute(self, ctx):
        x = ctx.input(0)
        np.add(x, 1, out=ctx.output(0, x.shape))
        if type(self).hook is not None:
            type(self).hook()


@pytest.fixture
def hook_kernel(monkeypatch):
    monkeypatch.setattr(cpu_device, "COMPILED_RUNS", True)
    _registry.register(_Hook)
    try:
        yield _Hook
    finally:
        _registry.unregister(_Hook)
        _Hook.hook = None


def test_terminate_stops_a_compiled_run_before_its_next_c_stretch(hook_kernel):
    # x -> Relu -> Hook (Python) -> Relu -> Neg -> y: the C stretch after the Python step writes y
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r0"), helper.make_node("Hook", ["a"], ["b"], domain=DOMAIN,
                                                                                    name="hook"),
             helper.make_node("Relu", ["b"], ["c"], name="r1"), helper.make_node("Neg", ["c"], ["y"], name="neg")]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64])],
                          value_info=[helper.make_tensor_value_info("b", TensorProto.FLOAT, [64])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)],
                              ir_version=8)
    s = onnxep.InferenceSession(model.SerializeToString())
    assert set(s.node_assignment.values()) == {"cpu"} and len(s.plans) == 1     # one plan: the C steps follow Hook
    x = np.linspace(-1, 1, 64).astype(np.float32)
    want = -(np.maximum(x, 0) + 1)
    y = np.zeros(64, np.float32)
    b = s.io_binding()
    b.bind_cpu_input("x", x)
    b.bind_ortvalue_output("y", onnxep.OrtValue.ortvalue_from_numpy(y))
    for _ in range(4):          # recording, capture, compiled runs
        s.run_with_iobinding(b)
        np.testing.assert_array_equal(y, want)
    ro = onnxep.RunOptions()
    hook_kernel.hook = lambda: setattr(ro, "terminate", True)
    y[:] = 7
    with pytest.raises(onnxep.Fail, match="Exiting due to terminate flag being set to true."):
        s.run(None, {"x": x}, ro)
    with pytest.raises(RuntimeError, match="Error in execution: Exiting due to terminate flag being set to true."):
        s.run_with_iobinding(b, ro)
    np.testing.assert_array_equal(y, np.full(64, 7, np.float32))      # the C stretch after the hook never ran
    hook_kernel.hook = None
    ro.terminate = False
    s.run_with_iobinding(b, ro)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], want)
