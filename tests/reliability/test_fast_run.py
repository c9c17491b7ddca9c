"""run()'s per-signature fast path (session._FastRun): the same answers as the generic path, and the generic path
whenever a run is not one of the signature's plain runs. Oracle: numpy (the models compute x + c, x.reshape(shape) * 2)
and the generic path itself (ONNXEP runs with the fast path dropped)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxep
from onnxep import session as session_mod
from tests._util import run_threads


def _add_model(dims):
    c = numpy_helper.from_array(np.arange(4, dtype=np.float32), "c")
    g = helper.make_graph([helper.make_node("Add", ["x", "c"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, dims)], [c])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return m.SerializeToString()


def _reshape_model():
    """z = reshape(x, s) * 2: the int64 feed `s` is a shape (its values are part of the signature)."""
    two = numpy_helper.from_array(np.array(2, np.float32), "two")
    g = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Mul", ["r", "two"], ["z"])],
                          "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
                                helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [two])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    return m.SerializeToString()


def test_fast_path_taken_and_outputs_fresh():
    s = onnxep.InferenceSession(_add_model([2, 4]))
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    outs = [s.run(None, {"x": x}) for _ in range(5)]
    assert s._fast is not None
    c = np.arange(4, dtype=np.float32)
    for y, z in outs:
        np.testing.assert_array_equal(y, x + c)
        np.testing.assert_array_equal(z, np.maximum(x + c, 0))
        assert y.flags.writeable and y.flags.owndata or y.base is not None
    # the caller owns what run() returns: no two runs hand out the same memory
    ptrs = {o.__array_interface__["data"][0] for pair in outs[2:] for o in pair}
    assert len(ptrs) == 2 * len(outs[2:])


@pytest.mark.parametrize("names", [["z"], ["z", "y"], ["y", "z"], None, []])
def test_output_names(names):
    s = onnxep.InferenceSession(_add_model([2, 4]))
    x = np.ones((2, 4), np.float32)
    want = {"y": x + np.arange(4, dtype=np.float32), "z": np.maximum(x + np.arange(4, dtype=np.float32), 0)}
    for other in (["z"], None, ["y", "z"]):      # a fast path of other names in place
        s.run(other, {"x": x})
        s.run(other, {"x": x})
        got = s.run(names, {"x": x})
        for n, g in zip(names or ["y", "z"], got):
            np.testing.assert_array_equal(g, want[n])
        assert len(got) == len(names or ["y", "z"])


def test_other_feeds_take_the_generic_path():
    s = onnxep.InferenceSession(_add_model(["N", 4]))
    c = np.arange(4, dtype=np.float32)
    rng = np.random.default_rng(1)
    for n in (1, 3, 3, 3, 1, 5, 3):
        x = rng.standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], x + c)
        xt = rng.standard_normal((4, n)).astype(np.float32).T          # not C-contiguous
        np.testing.assert_array_equal(s.run(None, {"x": xt})[0], xt + c)
    with pytest.raises(Exception, match="Invalid input name"):
        s.run(None, {"x": np.ones((3, 4), np.float32), "q": np.ones(1, np.float32)})
    with pytest.raises(Exception, match="data type"):
        s.run(None, {"x": np.ones((3, 4), np.float64)})
    with pytest.raises(ValueError, match="missing"):
        s.run(None, {})
    with pytest.raises(Exception, match="Invalid output name"):
        s.run(["nope"], {"x": np.ones((3, 4), np.float32)})


def test_small_int_feed_values_are_part_of_the_signature():
    s = onnxep.InferenceSession(_reshape_model())
    x = np.arange(6, dtype=np.float32)
    for shape in ((2, 3), (2, 3), (2, 3), (3, 2), (3, 2), (1, 6), (2, 3), (6, 1)):
        z = s.run(None, {"x": x, "s": np.array(shape, np.int64)})[0]
        np.testing.assert_array_equal(z, x.reshape(shape) * 2)


def test_set_providers_drops_the_fast_path():
    s = onnxep.InferenceSession(_add_model([2, 4]))
    x = np.ones((2, 4), np.float32)
    for _ in range(3):
        s.run(None, {"x": x})
    old = s._fast
    assert old is not None
    s.set_providers(["CPUExecutionProvider"])
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], x + np.arange(4, dtype=np.float32))
    assert s._fast is not old


def test_threads_share_a_session():
    s = onnxep.InferenceSession(_add_model(["N", 4]))
    c = np.arange(4, dtype=np.float32)

    def work(seed):
        rng = np.random.default_rng(seed)
        for i in range(300):
            x = rng.standard_normal((1 + (i // 50) % 3, 4)).astype(np.float32)
            y, z = s.run(None, {"x": x})
            np.testing.assert_array_equal(y, x + c)
            np.testing.assert_array_equal(z, np.maximum(x + c, 0))

    run_threads(work, 4)


def test_gives_up_on_sessions_that_never_qualify(monkeypatch):
    so = onnxep.SessionOptions()
    so.enable_mem_pattern = False          # no memory planner: no fast path
    s = onnxep.InferenceSession(_add_model([2, 4]), so)
    x = np.ones((2, 4), np.float32)
    for _ in range(session_mod._FAST_TRIES + 3):
        np.testing.assert_array_equal(s.run(None, {"x": x})[0], x + np.arange(4, dtype=np.float32))
    assert s._fast is None and s._fast_misses == session_mod._FAST_TRIES
