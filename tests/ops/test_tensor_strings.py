"""The data-movement ops that existed before on numeric types, now on strings (object arrays) and every numeric type
too: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Transpose, Gather, Shape, Scatter (Concat: every type but strings). Oracles:
onnx.reference, onnxruntime (where it has the kernel)."""
import numpy as np
import pytest

from tests.ops._tensor_cases import ALL, check, data

I64 = np.int64


@pytest.mark.parametrize("dtype", ALL + [object])
def test_view_ops(dtype):
    x = data((2, 1, 3), dtype)
    check("Reshape", {"x": x, "s": np.array([3, -1], I64)}, opset=14)
    check("Flatten", {"x": x}, opset=13, axis=2)
    check("Squeeze", {"x": x, "a": np.array([1], I64)}, opset=13)
    check("Squeeze", {"x": x}, opset=11, axes=[-2])
    check("Unsqueeze", {"x": x, "a": np.array([0, -1], I64)}, opset=13)
    check("Unsqueeze", {"x": x}, opset=11, axes=[1])
    check("Identity", {"x": x}, opset=16)
    check("Shape", {"x": x}, opset=15, start=1)


@pytest.mark.parametrize("dtype", ALL + [object])
def test_copy_ops(dtype):
    x = data((2, 3, 4), dtype)
    check("Transpose", {"x": x}, opset=13, perm=[2, 0, 1])
    if dtype is not object:   # string Concat stays on the reference backend (tests/contracts/test_backend.py)
        check("Concat", {"a": x, "b": data((2, 1, 4), dtype, 1), "c": data((2, 2, 4), dtype, 2)}, opset=13, axis=1)
        check("Concat", {"a": x, "b": data((2, 3, 2), dtype, 1)}, opset=13, axis=-1)
    # onnxruntime 1.32's string Gather on axis 1 copies only the first element of each row: onnx.reference only
    check("Gather", {"x": x, "i": np.array([[2, -1], [0, 1]], I64)}, opset=13, axis=1, with_ort=dtype is not object)
    check("Scatter", {"x": x[0], "i": np.array([[1, 0, 2, 0]], I64), "u": data((1, 4), dtype, 3)}, opset=10,
          with_ref=False)


def test_identity_sequence_and_optional():
    """Oracle: onnx.reference for the sequence, the input itself for the optional (onnx.reference's
    OptionalGetElement adds a leading 1) -- Identity passes a sequence (opset 14) and an optional (opset 16) on
    natively."""
    import onnx
    from onnx import TensorProto, helper

    import onnxep
    from tests.ops._tensor_cases import reference
    x = data((2, 3), np.float32)
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    nodes = [helper.make_node("SequenceConstruct", ["x", "x"], ["s"]), helper.make_node("Identity", ["s"], ["t"],
                                                                                      name="id_seq"),
             helper.make_node("Optional", ["x"], ["o"]), helper.make_node("Identity", ["o"], ["p"], name="id_opt"),
             helper.make_node("OptionalGetElement", ["p"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_value_info("t", seq), helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                                           [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    onnx.checker.check_model(m)
    sess = onnxep.InferenceSession(m.SerializeToString())
    assert sess.node_assignment["id_seq"] == "cpu" and sess.node_assignment["id_opt"] == "cpu"
    got, want = sess.run(None, {"x": x}), reference(m, {"x": x})
    assert len(got[0]) == len(want[0]) == 2
    for a, b in zip(got[0], want[0]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[1], x)
