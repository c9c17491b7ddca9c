"""The onnxruntime-compatible session API and its errors. Oracle: onnxruntime (same calls, same exception names)."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from tests._util import cpu_only_options, local_function_model, make_model

ort = pytest.importorskip("onnxruntime")


def _relu_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu_graph", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="tests",
                          doc_string="a relu")
    helper.set_model_props(m, {"author": "onnxep"})
    return m


def _both(model):
    b = model.SerializeToString()
    return onnxep.InferenceSession(b), ort.InferenceSession(b, providers=["CPUExecutionProvider"])


def test_node_args_match_onnxruntime():
    ours, theirs = _both(_relu_model())
    for a, b in ((ours.get_inputs(), theirs.get_inputs()), (ours.get_outputs(), theirs.get_outputs())):
        assert [(x.name, x.type, x.shape) for x in a] == [(x.name, x.type, x.shape) for x in b]


def test_overridable_initializers_and_metadata_match_onnxruntime():
    w = np.ones((3,), np.float32)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    wi = helper.make_tensor_value_info("w", TensorProto.FLOAT, [3])
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x, wi],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                          [onnx.numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="p",
                          model_version=3)
    ours, theirs = _both(m)
    assert [(i.name, i.type, i.shape) for i in ours.get_overridable_initializers()] == [
        (i.name, i.type, i.shape) for i in theirs.get_overridable_initializers()]
    assert [i.name for i in ours.get_inputs()] == [i.name for i in theirs.get_inputs()] == ["x"]
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ours.run(None, {"x": xv})[0], theirs.run(None, {"x": xv})[0])
    feed = {"x": xv, "w": np.full(3, 5, np.float32)}  # overriding the initializer
    np.testing.assert_array_equal(ours.run(None, feed)[0], theirs.run(None, feed)[0])
    mo, mt = ours.get_modelmeta(), theirs.get_modelmeta()
    for k in ("producer_name", "graph_name", "domain", "description", "version", "custom_metadata_map"):
        assert getattr(mo, k) == getattr(mt, k), k


@pytest.mark.parametrize("feed,exc,words", [
    ({"z": np.zeros((2, 3), np.float32)}, ValueError, ["x", "missing"]),
    ({}, ValueError, ["x", "missing"]),
    ({"x": np.zeros((2, 3), np.float64)}, "InvalidArgument", ["'x'", "double", "float"]),
    ({"x": np.zeros((2, 3, 1), np.float32)}, "InvalidArgument", ["x", "Got: 3", "Expected: 2"]),
    ({"x": np.zeros((2, 4), np.float32)}, "InvalidArgument", ["x", "index: 1", "Got: 4", "Expected: 3"]),
    ({"x": np.zeros((2, 3), np.float32), "q": np.zeros(1)}, "InvalidArgument", ["'q'", "x"]),
])
def test_bad_feeds_raise_the_onnxruntime_exception_and_the_session_still_works(feed, exc, words):
    ours, theirs = _both(_relu_model())
    ours_exc = getattr(onnxep, exc) if isinstance(exc, str) else exc
    with pytest.raises(ours_exc) as info:
        ours.run(None, feed)
    for w in words:
        assert w in str(info.value)
    with pytest.raises(Exception) as theirs_info:  # onnxruntime raises the exception of the same name
        theirs.run(None, feed)
    assert type(theirs_info.value).__name__ == (exc if isinstance(exc, str) else exc.__name__)
    x = np.array([[-1, 0, 2]], np.float32)
    np.testing.assert_array_equal(ours.run(None, {"x": x})[0], [[0, 0, 2]])


def test_invalid_output_name():
    ours, _ = _both(_relu_model())
    with pytest.raises(onnxep.InvalidArgument, match="Invalid output name"):
        ours.run(["nope"], {"x": np.zeros((1, 3), np.float32)})


def test_missing_file_and_garbage_bytes():
    with pytest.raises(onnxep.NoSuchFile, match="/no/such/model.onnx"):
        onnxep.InferenceSession("/no/such/model.onnx")
    with pytest.raises(onnxep.InvalidProtobuf):
        onnxep.InferenceSession(b"this is not a model")


def test_unknown_provider_is_a_value_error_like_onnxruntime():
    with pytest.raises(ValueError, match="NoSuchExecutionProvider"):
        onnxep.InferenceSession(_relu_model().SerializeToString(), providers=["NoSuchExecutionProvider"])
    s = onnxep.InferenceSession(_relu_model().SerializeToString(), providers=["CPUExecutionProvider"])
    assert s.get_providers()[0] == "OnnxepExecutionProvider"
    assert set(s.get_providers()) <= set(onnxep.get_available_providers())


def test_session_options_and_config_entries():
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = onnxep.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    assert so.get_session_config_entry("session.disable_cpu_ep_fallback") == "1"
    with pytest.raises(onnxep.InvalidArgument):
        so.get_session_config_entry("not.set")
    s = onnxep.InferenceSession(_relu_model().SerializeToString(), so)
    assert s.get_session_options() is so
    assert s._backends["cpu"].num_threads == 1
    ro = onnxep.RunOptions()
    ro.add_run_config_entry("k", "v")
    assert ro.get_run_config_entry("k") == "v"
    np.testing.assert_array_equal(s.run(None, {"x": np.ones((1, 3), np.float32)}, ro)[0], np.ones((1, 3)))


def test_fallback_off_names_the_node_and_op():
    m = local_function_model()
    with pytest.raises(onnxep.NotImplemented, match="'fn'.*Negate"):
        onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    s = onnxep.InferenceSession(m.SerializeToString())  # fallback on: the reference backend runs it
    assert s.node_assignment == {"Relu_0": "cpu", "fn": "reference"}
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], -np.maximum(x, 0))   # oracle: numpy


def test_optimized_model_filepath_is_written(tmp_path):
    so = onnxep.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "opt.onnx")
    onnxep.InferenceSession(_relu_model().SerializeToString(), so)
    onnx.checker.check_model(onnx.load(so.optimized_model_filepath))


def test_external_data_only_from_inside_the_model_folder(tmp_path):
    w = np.arange(1000, dtype=np.float32)
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1000])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1000])],
                          [onnx.numpy_helper.from_array(w, "w")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    inside = tmp_path / "model"
    inside.mkdir()
    onnx.save(m, str(inside / "m.onnx"), save_as_external_data=True, location="w.bin", size_threshold=0)
    s = onnxep.InferenceSession(str(inside / "m.onnx"))
    np.testing.assert_array_equal(s.run(None, {"x": np.ones(1000, np.float32)})[0], w + 1)
    for loc in ("../secret.bin", str(tmp_path / "abs.bin")):
        mm = onnx.load(str(inside / "m.onnx"), load_external_data=False)
        for e in mm.graph.initializer[0].external_data:
            if e.key == "location":
                e.value = loc
        onnx.save(mm, str(inside / "bad.onnx"))
        with pytest.raises(onnxep.InvalidGraph, match="inside the model's folder"):
            onnxep.InferenceSession(str(inside / "bad.onnx"))


def test_script_written_for_onnxruntime_runs_unchanged(tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(_relu_model(), str(path))
    script = textwrap.dedent(f"""
        import numpy as np
        import onnxep as onnxruntime
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = 2
        so.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        sess = onnxruntime.InferenceSession({str(path)!r}, so, providers=["CPUExecutionProvider"])
        name = sess.get_inputs()[0].name
        out = sess.run([sess.get_outputs()[0].name], {{name: np.array([[-1, 2, -3]], dtype=np.float32)}})
        try:
            sess.run(None, {{name: np.zeros((1, 3), np.float64)}})
        except onnxruntime.capi.onnxruntime_pybind11_state.InvalidArgument:
            pass
        print(out[0].tolist(), onnxruntime.get_available_providers()[0], sess.get_modelmeta().producer_name)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=os.getcwd())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["[[0.0,", "2.0,", "0.0]]", "OnnxepExecutionProvider", "tests"]


def test_isa_can_be_forced_and_show_config_reports_it():
    from onnxep import _kernels
    for isa in _kernels.AVAILABLE:
        r = subprocess.run([sys.executable, "-c", "import onnxep; onnxep.show_config()"], capture_output=True,
                           text=True, env={**os.environ, "ONNXEP_ISA": isa})
        assert r.returncode == 0, r.stderr
        assert f"kernel ISA      : {isa}" in r.stdout
    r = subprocess.run([sys.executable, "-c", "import onnxep._kernels"], capture_output=True, text=True,
                       env={**os.environ, "ONNXEP_ISA": "sse9"})
    assert r.returncode != 0 and "ONNXEP_ISA" in r.stderr


def test_ir_version_and_opset_newer_than_onnx_are_refused():
    m = _relu_model()
    m.ir_version = onnx.IR_VERSION + 1
    with pytest.raises(onnxep.InvalidGraph, match="IR version"):
        onnxep.InferenceSession(m.SerializeToString())
    m = _relu_model()
    m.opset_import[0].version = onnx.defs.onnx_opset_version() + 1
    with pytest.raises(onnxep.InvalidGraph, match="opset"):
        onnxep.InferenceSession(m.SerializeToString())
