"""A client script written for onnxruntime that uses more than run(): OrtValue, IOBinding, run_with_ort_values,
run_async, set_providers, fallback switches, add_initializer, free dimension overrides, RunOptions.terminate, the
module functions and profiling. It runs unchanged on onnxruntime and on onnxep:

    python -m tests.api.client onnxruntime
    python -m tests.api.client onnxep

`main(rt, workdir)` returns one record per call: (label, "ok", result) or (label, "raise", exception type), the
result reduced to what both runtimes must agree on (values, shapes, types, equalities -- not provider names or version
strings). tests/api/test_client.py runs it on both and compares the records."""
from __future__ import annotations

import json
import os
import sys
import threading

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(path):
    """Y = Relu(X + W), Z = X * 2; X is [N, 3] with N a free dimension (denotation DATA_BATCH)."""
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])
    x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3])
    z = helper.make_tensor_value_info("Z", TensorProto.FLOAT, ["N", 3])
    w = numpy_helper.from_array(np.array([-1.0, 0.0, 1.0], np.float32), "W")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    nodes = [helper.make_node("Add", ["X", "W"], ["T"], name="add"),
             helper.make_node("Relu", ["T"], ["Y"], name="relu"),
             helper.make_node("Mul", ["X", "two"], ["Z"], name="mul")]
    g = helper.make_graph(nodes, "client", [x], [y, z], [w, two])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def _reduce(v):
    """What both runtimes must agree on in a result."""
    if isinstance(v, np.ndarray):
        return ("array", str(v.dtype), v.shape, v.tolist())
    if isinstance(v, (list, tuple)):
        return [_reduce(x) for x in v]
    if isinstance(v, (bool, int, float, str, type(None))):
        return v
    if type(v).__name__ == "OrtValue":
        return ("OrtValue", _reduce(v.numpy()))
    return type(v).__name__


def main(rt, workdir):
    records = []

    def call(label, f):
        try:
            records.append((label, "ok", _reduce(f())))
        except Exception as e:  # noqa: BLE001 - the record is the exception's type
            kind = type(e).__name__ if type(e).__module__ == "builtins" else f"{type(e).__name__} (runtime's)"
            records.append((label, "raise", kind))

    path = make_model(os.path.join(workdir, "client.onnx"))
    cpu = ["CPUExecutionProvider"]
    so = rt.SessionOptions()
    so.log_severity_level = 3
    sess = rt.InferenceSession(path, so, providers=cpu)
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    want_y, want_z = np.maximum(x + np.array([-1, 0, 1], np.float32), 0), x * 2

    # ------------------------------------------------------------------ OrtValue
    ov = rt.OrtValue.ortvalue_from_numpy(x)
    call("OrtValue.shares", lambda: ov.data_ptr() == x.ctypes.data)
    call("OrtValue.numpy", lambda: ov.numpy())
    call("OrtValue.numpy shares", lambda: np.shares_memory(ov.numpy(), x))
    call("OrtValue.shape", lambda: ov.shape())
    call("OrtValue.data_type", lambda: ov.data_type())
    call("OrtValue.element_type", lambda: ov.element_type())
    call("OrtValue.device_name", lambda: ov.device_name())
    call("OrtValue.is_tensor", lambda: ov.is_tensor())
    call("OrtValue.tensor_size_in_bytes", lambda: ov.tensor_size_in_bytes())
    call("OrtValue.asarray", lambda: np.asarray(ov))
    strided = np.arange(12, dtype=np.float32).reshape(2, 6)[:, ::2]
    call("OrtValue.from strided", lambda: rt.OrtValue.ortvalue_from_numpy(strided).numpy())
    call("OrtValue.from list", lambda: rt.OrtValue.ortvalue_from_numpy([1.0, 2.0]))
    call("OrtValue.from strings", lambda: rt.OrtValue.ortvalue_from_numpy(np.array(["a", "b"])))
    call("OrtValue.from bool", lambda: rt.OrtValue.ortvalue_from_numpy(np.array([True, False])).data_type())
    call("OrtValue(array)", lambda: rt.OrtValue(x))
    empty = rt.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
    call("from_shape_and_type", lambda: (empty.shape(), empty.data_type(), empty.numpy().shape))
    call("from_shape_and_type int", lambda: rt.OrtValue.ortvalue_from_shape_and_type([4], TensorProto.INT64)
         .data_type())
    call("from_shape_and_type negative", lambda: rt.OrtValue.ortvalue_from_shape_and_type([-1, 3], np.float32))
    call("from_shape_and_type str", lambda: rt.OrtValue.ortvalue_from_shape_and_type([2], np.str_))
    before = empty.data_ptr()
    call("update_inplace", lambda: (empty.update_inplace(np.full((2, 3), 7, np.float32)), empty.numpy(),
                                    empty.data_ptr() == before))
    call("update_inplace OrtValue", lambda: (empty.update_inplace(ov), empty.numpy()))
    call("update_inplace wrong size", lambda: empty.update_inplace(np.ones((3, 3), np.float32)))
    call("update_inplace list", lambda: empty.update_inplace([1.0] * 6))

    # ------------------------------------------------------------------ run_with_ort_values
    call("run_with_ort_values", lambda: sess.run_with_ort_values(["Y", "Z"], {"X": ov}))
    call("run_with_ort_values None", lambda: sess.run_with_ort_values(None, {"X": ov}))
    call("run_with_ort_values types", lambda: [type(v).__name__ for v in sess.run_with_ort_values(None, {"X": ov})])
    call("run_with_ort_values numpy feed", lambda: sess.run_with_ort_values(None, {"X": x}))
    call("run_with_ort_values missing", lambda: sess.run_with_ort_values(None, {}))
    call("run_with_ort_values bad output", lambda: sess.run_with_ort_values(["nope"], {"X": ov}))
    call("run_with_ort_values bad dtype", lambda: sess.run_with_ort_values(
        None, {"X": rt.OrtValue.ortvalue_from_numpy(x.astype(np.float64))}))

    # ------------------------------------------------------------------ IOBinding
    b = sess.io_binding()
    call("bind_cpu_input unknown", lambda: b.bind_cpu_input("nope", x))
    call("bind_cpu_input list", lambda: b.bind_cpu_input("X", [[1.0, 2.0, 3.0]]))
    call("run nothing bound", lambda: sess.run_with_iobinding(b))
    b.bind_cpu_input("X", x)
    call("run no output bound", lambda: sess.run_with_iobinding(b))
    b.bind_output("Y")
    b.bind_output("Z", "cpu")
    call("run_with_iobinding", lambda: sess.run_with_iobinding(b))
    call("get_outputs", lambda: b.get_outputs())
    call("get_outputs device", lambda: [v.device_name() for v in b.get_outputs()])
    call("copy_outputs_to_cpu", lambda: b.copy_outputs_to_cpu())
    # preallocated outputs: an OrtValue, and a raw buffer
    y_buf = rt.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float32)
    z_arr = np.zeros((2, 3), np.float32)
    y_ptr = y_buf.data_ptr()
    b.bind_ortvalue_output("Y", y_buf)
    b.bind_output("Z", "cpu", 0, np.float32, [2, 3], z_arr.ctypes.data)
    call("run preallocated", lambda: sess.run_with_iobinding(b))
    call("preallocated Y in place", lambda: (y_buf.data_ptr() == y_ptr, b.get_outputs()[0].data_ptr() == y_ptr,
                                             np.array_equal(y_buf.numpy(), want_y)))
    call("preallocated Z in place", lambda: (b.get_outputs()[1].data_ptr() == z_arr.ctypes.data,
                                             np.array_equal(z_arr, want_z)))
    x2 = x * -1
    b.bind_input("X", "cpu", 0, np.float32, [2, 3], x2.ctypes.data)
    call("rerun preallocated", lambda: (sess.run_with_iobinding(b), y_buf.data_ptr() == y_ptr, y_buf.numpy(), z_arr))
    ov_in = rt.OrtValue.ortvalue_from_numpy(x)
    b.bind_ortvalue_input("X", ov_in)
    call("bind_ortvalue_input", lambda: (sess.run_with_iobinding(b), b.copy_outputs_to_cpu()))
    call("bind_ortvalue_input numpy", lambda: b.bind_ortvalue_input("X", x))
    call("bind_ortvalue_output numpy", lambda: b.bind_ortvalue_output("Y", x))
    call("bind_output buffer without shape", lambda: b.bind_output("Y", "cpu", 0, np.float32, None, z_arr.ctypes.data))
    call("preallocated wrong dtype", lambda: (b.bind_ortvalue_output(
        "Y", rt.OrtValue.ortvalue_from_shape_and_type([2, 3], np.float64)), sess.run_with_iobinding(b)))
    call("preallocated wrong shape", lambda: (b.bind_ortvalue_output(
        "Y", rt.OrtValue.ortvalue_from_shape_and_type([5, 3], np.float32)), sess.run_with_iobinding(b)))
    b.bind_ortvalue_output("Y", y_buf)
    call("run after binding error", lambda: (sess.run_with_iobinding(b), y_buf.numpy()))
    b.clear_binding_outputs()
    call("cleared outputs", lambda: (b.get_outputs(), sess.run_with_iobinding(b)))
    b.bind_output("Y")
    b.clear_binding_inputs()
    call("cleared inputs", lambda: sess.run_with_iobinding(b))
    other = rt.InferenceSession(path, so, providers=cpu)
    call("binding of another session", lambda: other.run_with_iobinding(b))

    # ------------------------------------------------------------------ run_async
    done = threading.Event()
    got = {}

    def callback(results, user_data, err):
        got.update(results=results, user_data=user_data, err=err,
                   main=threading.current_thread() is threading.main_thread())
        done.set()

    call("run_async", lambda: sess.run_async(None, {"X": x}, callback, "my data"))
    call("run_async callback", lambda: (done.wait(30), got["results"], got["user_data"], got["err"], got["main"]))
    done.clear()
    got.clear()
    call("run_async OrtValue feed", lambda: (sess.run_async(["Z"], {"X": ov}, callback, None), done.wait(30),
                                             got["results"], got["err"]))
    done.clear()
    got.clear()
    call("run_async bad feed", lambda: (sess.run_async(None, {"X": x.astype(np.float64)}, callback, 1),
                                        done.wait(30), got["results"], bool(got["err"]), got["main"]))
    done.clear()
    call("run_async missing", lambda: sess.run_async(None, {}, callback, None))

    # ------------------------------------------------------------------ RunOptions.terminate
    ro = rt.RunOptions()
    ro.terminate = True
    call("terminate run", lambda: sess.run(None, {"X": x}, ro))
    call("terminate run_with_ort_values", lambda: sess.run_with_ort_values(None, {"X": ov}, ro))
    b2 = sess.io_binding()
    b2.bind_cpu_input("X", x)
    b2.bind_output("Y")
    call("terminate run_with_iobinding", lambda: sess.run_with_iobinding(b2, ro))
    done.clear()
    got.clear()
    call("terminate run_async", lambda: (sess.run_async(None, {"X": x}, callback, None, ro), done.wait(30),
                                         got["results"], bool(got["err"])))
    ro.terminate = False
    call("after terminate", lambda: sess.run(None, {"X": x}, ro))

    # ------------------------------------------------------------------ providers, fallback
    call("disable_fallback", lambda: sess.disable_fallback())
    call("enable_fallback", lambda: sess.enable_fallback())
    call("set_providers", lambda: (sess.set_providers(cpu), sess.run(None, {"X": x})))
    call("set_providers default", lambda: (sess.set_providers(), sess.run(["Z"], {"X": x})))
    # (on its own session: onnxruntime 1.32's session is unusable after this error -- onnxep's still runs)
    call("set_providers unknown", lambda: rt.InferenceSession(path, so, providers=cpu).set_providers(
        ["NoSuchExecutionProvider"]))
    call("binding after set_providers", lambda: sess.run_with_iobinding(b2))
    call("new binding after set_providers", lambda: (lambda nb: (nb.bind_cpu_input("X", x), nb.bind_output("Z"),
                                                                 sess.run_with_iobinding(nb),
                                                                 nb.copy_outputs_to_cpu()))(sess.io_binding()))

    # ------------------------------------------------------------------ SessionOptions
    w = np.array([10.0, 20.0, 30.0], np.float32)
    w_ov = rt.OrtValue.ortvalue_from_numpy(w)
    so_init = rt.SessionOptions()
    so_init.log_severity_level = 3
    call("add_initializer numpy", lambda: so_init.add_initializer("W", w))
    call("add_initializer", lambda: so_init.add_initializer("W", w_ov))
    s_init = rt.InferenceSession(path, so_init, providers=cpu)
    call("add_initializer used", lambda: s_init.run(["Y"], {"X": x}))
    w[:] = [100.0, 200.0, 300.0]      # no copy: the session reads the caller's array
    call("add_initializer not copied", lambda: s_init.run(["Y"], {"X": x}))
    so_dim = rt.SessionOptions()
    so_dim.log_severity_level = 3
    call("free dim by name", lambda: so_dim.add_free_dimension_override_by_name("N", 2))
    call("free dim by name str", lambda: so_dim.add_free_dimension_override_by_name("N", "2"))
    s_dim = rt.InferenceSession(path, so_dim, providers=cpu)
    call("free dim shapes", lambda: (s_dim.get_inputs()[0].shape, s_dim.get_outputs()[0].shape))
    call("free dim run", lambda: s_dim.run(["Z"], {"X": x}))
    call("free dim wrong feed", lambda: s_dim.run(None, {"X": np.ones((3, 3), np.float32)}))
    so_den = rt.SessionOptions()
    so_den.log_severity_level = 3
    call("free dim by denotation", lambda: so_den.add_free_dimension_override_by_denotation("DATA_BATCH", 1))
    call("free dim denotation shapes", lambda: rt.InferenceSession(path, so_den, providers=cpu).get_inputs()[0].shape)

    # ------------------------------------------------------------------ module functions
    call("version", lambda: (isinstance(rt.get_version_string(), str), rt.get_version_string() == rt.__version__))
    # not "available <= all": onnxruntime lists a registered plugin EP (onnxep's own, once a test registered it in
    # this process) as available but not in get_all_providers(), its build's list
    call("all providers", lambda: ("CPUExecutionProvider" in rt.get_all_providers(),
                                   "CPUExecutionProvider" in rt.get_available_providers()))
    call("build info", lambda: isinstance(rt.get_build_info(), str) and len(rt.get_build_info()) > 0)
    call("logger severity", lambda: rt.set_default_logger_severity(3))
    call("logger severity 7", lambda: rt.set_default_logger_severity(7))
    call("logger severity str", lambda: rt.set_default_logger_severity("3"))
    call("logger verbosity", lambda: rt.set_default_logger_verbosity(0))
    call("set_seed", lambda: rt.set_seed(1234))
    call("set_seed str", lambda: rt.set_seed("x"))

    # ------------------------------------------------------------------ profiling
    call("not profiling", lambda: (sess.get_profiling_start_time_ns(), sess.end_profiling()))
    so_prof = rt.SessionOptions()
    so_prof.log_severity_level = 3
    so_prof.enable_profiling = True
    so_prof.profile_file_prefix = os.path.join(workdir, "client_profile")
    s_prof = rt.InferenceSession(path, so_prof, providers=cpu)
    start = s_prof.get_profiling_start_time_ns()
    s_prof.run(None, {"X": x})

    def profile():
        name = s_prof.end_profiling()
        with open(name) as f:
            events = json.load(f)
        return (isinstance(start, int) and start > 0, os.path.dirname(name) == workdir,
                isinstance(events, list) and any(e.get("cat") == "Node" for e in events),
                s_prof.end_profiling(), s_prof.get_profiling_start_time_ns() == start)
    call("end_profiling", profile)
    return records


if __name__ == "__main__":
    import importlib
    import tempfile

    module = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "onnxruntime")
    with tempfile.TemporaryDirectory() as d:
        for rec in main(module, d):
            print(*rec, sep="  |  ")
