"""Issue 22, no option silently ignored: every SessionOptions / RunOptions / InferenceSession option is honoured,
refused with a named error, or (where it cannot apply to a CPU provider) accepted with a one-time warning.
Oracle: onnxruntime (installed) -- its behaviour and exception types for the same calls -- unless a test says
otherwise."""
import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep.ops import _registry
from onnxep.ops._base import OpKernel
from tests._util import make_model

ort = pytest.importorskip("onnxruntime")


# ---------------------------------------------------------------------------------------------- supports_op (item 7)
def test_a_crash_in_a_kernels_supports_surfaces_naming_node_op_and_class():
    # oracle: the exception chain -- before, CpuDevice.supports_op swallowed it and the node went to the reference
    # backend without a word
    class BrokenSupports(OpKernel):
        domain, op_type, since = "", "Neg", 17        # the model's opset: it wins the lookup

        @classmethod
        def supports(cls, op):
            raise ZeroDivisionError("deliberate")

        def compute(self, ctx):
            raise AssertionError("never compiled")

    m = make_model([helper.make_node("Neg", ["x"], ["y"], name="the_neg")], {"x": np.ones((2,), np.float32)}, ["y"])
    _registry.register(BrokenSupports)
    try:
        with pytest.raises(onnxep.EPFail, match=r"BrokenSupports.*'the_neg'.*Neg.*ZeroDivisionError: deliberate") \
                as info:
            onnxep.InferenceSession(m.SerializeToString())
        assert isinstance(info.value.__cause__, ZeroDivisionError)
    finally:
        _registry.unregister(BrokenSupports)
    s = onnxep.InferenceSession(m.SerializeToString())      # unregistered: the node runs again
    np.testing.assert_array_equal(s.run(None, {"x": np.ones((2,), np.float32)})[0], -np.ones((2,), np.float32))
