"""Issue 26 items 2 and 3: load-time validation with named errors naming the node and the attribute, model paths
that name no readable file, external data of a model given as bytes, big-endian feeds, strings fed to numeric inputs
-- and after each error the session (or a new one) still runs correctly. Oracle: onnxruntime 1.32 (installed) for
the error types where it refuses the same thing; where onnxep differs from it on purpose the test says why."""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.graph import model as model_mod

ort = pytest.importorskip("onnxruntime")

X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])
Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])
Y_ANY = helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)
FEED = {"X": np.arange(6, dtype=np.float32).reshape(2, 3)}


def _bytes(nodes, inputs=(X,), outputs=(Y,), inits=()):
    g = helper.make_graph(nodes, "g", list(inputs), list(outputs), list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


GOOD = _bytes([helper.make_node("Relu", ["X"], ["Y"], name="r")])


def _ort(model):
    so = ort.SessionOptions()
    so.log_severity_level = 4
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def _still_runs(model=GOOD):
    """After an error, sessions still work (a new one of a good model, runs of an existing one)."""
    s = onnxep.InferenceSession(model)
    np.testing.assert_array_equal(s.run(None, FEED)[0], np.maximum(FEED["X"], 0))


# (label, model, onnxruntime's error type name, what onnxep's message must name)
BAD_MODELS = [
    ("attribute of the wrong type", _bytes([helper.make_node("Concat", ["X", "X"], ["Y"], name="cat", axis="a")],
                                           outputs=[Y_ANY]),
     "InvalidGraph", r"'cat : axis'. Expected: 'INT', actual: 'STRING'"),
    ("float attribute for an int one", _bytes([helper.make_node("Concat", ["X", "X"], ["Y"], name="cat", axis=1.0)],
                                              outputs=[Y_ANY]),
     "InvalidGraph", r"node 'cat' \(Concat.*'cat : axis'. Expected: 'INT', actual: 'FLOAT'"),
    ("ints attribute for a float one", _bytes([helper.make_node("LeakyRelu", ["X"], ["Y"], name="lr", alpha=[1, 2])]),
     "InvalidGraph", r"'lr : alpha'. Expected: 'FLOAT', actual: 'INTS'"),
    ("unknown attribute", _bytes([helper.make_node("Relu", ["X"], ["Y"], name="r", foo=1)]),
     "InvalidGraph", r"node 'r' \(Relu.*Unrecognized attribute: 'foo'"),
    ("missing required attribute", _bytes([helper.make_node("Concat", ["X", "X"], ["Y"], name="cat")],
                                          outputs=[Y_ANY]),
     "InvalidGraph", r"node 'cat' \(Concat.*Required attribute 'axis' is missing"),
    ("too few inputs", _bytes([helper.make_node("Add", ["X"], ["Y"], name="a")]),
     "InvalidGraph", r"node 'a' \(Add, schema ai.onnx::Add:14\): has input size 1 not in range \[min=2, max=2\]"),
    ("too many inputs", _bytes([helper.make_node("Add", ["X", "X", "X"], ["Y"], name="a")]),
     "InvalidGraph", r"node 'a' \(Add.*input size 3 not in range"),
    ("too many outputs", _bytes([helper.make_node("Relu", ["X"], ["Y", "Z"], name="r")]),
     "InvalidGraph", r"node 'r' \(Relu.*output size 2 not in range \[min=1, max=1\]"),
    ("input listed twice", _bytes([helper.make_node("Relu", ["X"], ["Y"], name="r")], inputs=[X, X]),
     "Fail", r"Duplicate definition-site for \(X\): graph input 'X' is listed twice"),
    ("node output that is a graph input", _bytes([helper.make_node("Relu", ["X"], ["X"], name="r"),
                                                  helper.make_node("Relu", ["X"], ["Y"], name="r2")]),
     "Fail", r"Duplicate definition-site for \(X\): node 'r' \(Relu\) writes 'X', which is already a graph input"),
    ("value made by two nodes", _bytes([helper.make_node("Relu", ["X"], ["Y"], name="r1"),
                                        helper.make_node("Neg", ["X"], ["Y"], name="r2")]),
     "Fail", r"Duplicate definition-site for \(Y\): node 'r2' \(Neg\) writes 'Y'"),
    ("attribute error in a subgraph", _bytes([helper.make_node(
        "If", ["c"], ["Y"], name="if0",
        then_branch=helper.make_graph([helper.make_node("Relu", ["X"], ["t"], name="inner", foo=1)], "then", [],
                                      [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])]),
        else_branch=helper.make_graph([helper.make_node("Neg", ["X"], ["e"], name="inner2")], "else", [],
                                      [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])]))],
        inputs=[X, helper.make_tensor_value_info("c", TensorProto.BOOL, [])]),
     "InvalidGraph", r"node 'inner' \(Relu.*Unrecognized attribute: 'foo'"),
]


@pytest.mark.parametrize("label,model,ort_type,message", BAD_MODELS, ids=[m[0] for m in BAD_MODELS])
def test_invalid_models_are_refused_at_load_with_onnxruntimes_error_type(label, model, ort_type, message):
    with pytest.raises(Exception) as want:
        _ort(model)
    assert type(want.value).__name__ == ort_type
    with pytest.raises(getattr(onnxep, ort_type), match=message):
        onnxep.InferenceSession(model)
    _still_runs()


def test_a_graph_output_listed_twice_is_refused():
    # the issue asks for a refusal; onnxruntime 1.32 runs such a graph and hands the value out twice
    model = _bytes([helper.make_node("Relu", ["X"], ["Y"], name="r")], outputs=[Y, Y])
    assert len(_ort(model).run(None, FEED)) == 2
    with pytest.raises(onnxep.InvalidGraph, match=r"graph output 'Y' is listed twice \(outputs 0 and 1\)"):
        onnxep.InferenceSession(model)
    _still_runs()


def test_a_valid_model_with_optional_inputs_and_subgraphs_passes_the_checks():
    # the checks refuse nothing onnxruntime runs: optional inputs left empty, trailing ones omitted, If bodies
    clip = _bytes([helper.make_node("Clip", ["X", "", "hi"], ["Y"], name="clip")],
                  inits=[onnx.numpy_helper.from_array(np.array(2, np.float32), "hi")])
    np.testing.assert_array_equal(onnxep.InferenceSession(clip).run(None, FEED)[0], np.minimum(FEED["X"], 2))
    np.testing.assert_array_equal(_ort(clip).run(None, FEED)[0], np.minimum(FEED["X"], 2))


def test_model_paths_that_name_no_readable_file_say_which(tmp_path, monkeypatch):
    # oracle: onnxruntime's types -- a directory: InvalidProtobuf (its message only says "Protobuf parsing failed"),
    # missing: NoSuchFile; onnxep's messages say which
    with pytest.raises(Exception) as want:
        _ort(str(tmp_path))
    assert type(want.value).__name__ == "InvalidProtobuf"
    with pytest.raises(onnxep.InvalidProtobuf, match="it is a directory, not a model file"):
        onnxep.InferenceSession(str(tmp_path))
    missing = tmp_path / "nope.onnx"
    with pytest.raises(Exception) as want:
        _ort(str(missing))
    assert type(want.value).__name__ == "NoSuchFile"
    with pytest.raises(onnxep.NoSuchFile, match="file doesn't exist"):
        onnxep.InferenceSession(str(missing))
    with pytest.raises(onnxep.NoSuchFile, match=r"file doesn't exist \(nor does its folder"):
        onnxep.InferenceSession(str(tmp_path / "no_dir" / "m.onnx"))
    # unreadable: the system's reason (as root, permissions do not stop a read: the open fails by hand)
    path = tmp_path / "m.onnx"
    path.write_bytes(GOOD)

    def refuse(p, *a, **k):
        raise PermissionError(13, "Permission denied", p)
    monkeypatch.setattr(model_mod, "open", refuse, raising=False)
    with pytest.raises(onnxep.Fail, match="the file cannot be read: Permission denied"):
        onnxep.InferenceSession(str(path))
    monkeypatch.undo()
    _still_runs(str(path))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its permissions")
def test_an_unreadable_model_file_says_so(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(GOOD)
    path.chmod(0)
    with pytest.raises(onnxep.Fail, match="cannot be read"):
        onnxep.InferenceSession(str(path))


@pytest.mark.parametrize("location,why", [("../../etc/passwd", "points outside any folder"),
                                          ("/etc/passwd", "points outside any folder"),
                                          ("w.bin", "has no folder its external data could be read from")])
def test_a_bytes_model_with_external_data_says_why_it_cannot_be_read(location, why):
    w = helper.make_tensor("W", TensorProto.FLOAT, [3], [0, 0, 0])
    w.data_location = TensorProto.EXTERNAL
    del w.float_data[:]
    e = w.external_data.add()
    e.key, e.value = "location", location
    model = _bytes([helper.make_node("Add", ["X", "W"], ["Y"], name="a")], inits=[w])
    with pytest.raises(Exception) as want:       # onnxruntime refuses it too (Fail, escaping its working directory)
        _ort(model)
    assert type(want.value).__name__ == "Fail"
    with pytest.raises(onnxep.InvalidGraph, match=f"initializer 'W': external data location '{location}'.*{why}"):
        onnxep.InferenceSession(model)
    _still_runs()


def test_a_big_endian_feed_is_converted():
    # oracle: numpy on the same values. onnxruntime 1.32 reads a big-endian array's bytes as native ones and returns
    # garbage (checked here, so the day it converts too this test says so)
    s = onnxep.InferenceSession(GOOD)
    x = (np.arange(6, dtype=np.float32).reshape(2, 3) - 2).astype(">f4")
    np.testing.assert_array_equal(s.run(None, {"X": x})[0], np.maximum(x.astype(np.float32), 0))
    assert not np.array_equal(_ort(GOOD).run(None, {"X": x})[0], np.maximum(x.astype(np.float32), 0))
    with pytest.raises(onnxep.InvalidArgument, match=r"Actual: \(tensor\(double\)\) , expected: \(tensor\(float\)\)"):
        s.run(None, {"X": x.astype(">f8")})             # another type in another byte order: still refused
    np.testing.assert_array_equal(s.run(None, FEED)[0], np.maximum(FEED["X"], 0))
    # OrtValue: converted too (onnxruntime shares the bytes as they are)
    v = onnxep.OrtValue.ortvalue_from_numpy(x)
    np.testing.assert_array_equal(v.numpy(), x.astype(np.float32))


@pytest.mark.parametrize("value,kind", [(np.array([["a", "b", "c"]] * 2), "a string array"),
                                        (np.array([[b"a", b"b", b"c"]] * 2), "a string array"),
                                        (np.array([["a", "b", "c"]] * 2, dtype=object), "an object array"),
                                        (np.ones((2, 3), dtype=object), "an object array")])
def test_strings_fed_to_a_numeric_input_are_named_as_such(value, kind):
    # oracle: onnxruntime -- InvalidArgument, "Actual: (tensor(string)) , expected: (tensor(float))"
    with pytest.raises(Exception) as want:
        _ort(GOOD).run(None, {"X": value})
    assert type(want.value).__name__ == "InvalidArgument"
    assert "Actual: (tensor(string)) , expected: (tensor(float))" in str(want.value)
    s = onnxep.InferenceSession(GOOD)
    with pytest.raises(onnxep.InvalidArgument, match=rf"input 'X'. Actual: \(tensor\(string\)\) , expected: "
                                                     rf"\(tensor\(float\)\): {kind}"):
        s.run(None, {"X": value})
    np.testing.assert_array_equal(s.run(None, FEED)[0], np.maximum(FEED["X"], 0))


def test_add_initializer_of_another_shape_or_type_is_refused_and_the_options_still_work():
    # onnxruntime 1.32 crashes the process on either (checked by hand: not run here); onnxep refuses when the
    # session is made, naming the initializer
    model = _bytes([helper.make_node("Add", ["X", "W"], ["Y"], name="a")],
                   inits=[onnx.numpy_helper.from_array(np.zeros(3, np.float32), "W")])
    for bad, what in ((np.ones(4, np.float32), r"\[3\], the OrtValue given is tensor\(float\) \[4\]"),
                      (np.ones(3, np.float64), r"\[3\], the OrtValue given is tensor\(double\) \[3\]")):
        so = onnxep.SessionOptions()
        so.add_initializer("W", onnxep.OrtValue.ortvalue_from_numpy(bad))
        with pytest.raises(onnxep.InvalidArgument, match=rf"add_initializer\('W'\): the model's initializer is "
                                                         rf"tensor\(float\) {what}"):
            onnxep.InferenceSession(model, so)
        w = np.array([1, 2, 3], np.float32)
        so.add_initializer("W", onnxep.OrtValue.ortvalue_from_numpy(w))
        np.testing.assert_array_equal(onnxep.InferenceSession(model, so).run(None, FEED)[0], FEED["X"] + w)


def test_a_negative_free_dimension_override_is_refused_at_session_creation():
    model = _bytes([helper.make_node("Relu", ["X"], ["Y"], name="r")],
                   inputs=[helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])], outputs=[Y_ANY])
    so = onnxep.SessionOptions()
    so.add_free_dimension_override_by_name("N", -1)
    with pytest.raises(onnxep.InvalidArgument, match="free dimension override of 'N'.*-1 is negative"):
        onnxep.InferenceSession(model, so)
    # a ModelProto given is not changed by the overrides
    proto = onnx.ModelProto.FromString(model)
    so = onnxep.SessionOptions()
    so.add_free_dimension_override_by_name("N", 2)
    assert onnxep.InferenceSession(proto, so).get_inputs()[0].shape == [2, 3]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"


def test_logging_goes_through_pythons_logging_at_log_severity_level(caplog):
    # the session's log_severity_level is its own gate (onnxruntime's session logger): 0 logs verbose records to the
    # "onnxep" logger, 3 only errors
    so = onnxep.SessionOptions()
    so.log_severity_level = 0
    so.logid = "mine"
    with caplog.at_level(1, logger="onnxep"):
        onnxep.InferenceSession(GOOD, so).run(None, FEED)
    records = [r for r in caplog.records if r.name == "onnxep"]
    assert records and all(getattr(r, "logid", None) == "mine" for r in records)
    assert any(r.levelname == "DEBUG" for r in records) and any(r.levelname == "INFO" for r in records)
    caplog.clear()
    so.log_severity_level = 3
    with caplog.at_level(1, logger="onnxep"):
        onnxep.InferenceSession(GOOD, so).run(None, FEED)
    assert not [r for r in caplog.records if r.name == "onnxep"]


def test_run_async_calls_every_callback_on_a_worker_thread_with_its_own_outputs():
    # oracle: onnxruntime -- the callback runs on a thread that is not the caller's, with the outputs of its run;
    # numpy for the values
    import threading
    s = onnxep.InferenceSession(GOOD)
    lock, done, seen = threading.Lock(), threading.Event(), []

    def cb(results, user_data, err):
        with lock:
            seen.append((user_data, err, threading.current_thread() is threading.main_thread(),
                         np.array_equal(results[0], np.maximum(FEED["X"] * user_data, 0))))
            if len(seen) == 8:
                done.set()
    for k in range(8):
        s.run_async(None, {"X": FEED["X"] * k}, cb, k)
    assert done.wait(60)
    assert sorted(seen) == [(k, "", False, True) for k in range(8)]


def test_a_loop_body_naming_one_value_as_two_outputs_still_runs():
    # oracle: onnxruntime -- the refusal of a repeated graph output is for the model's graph only: a Loop body may
    # hand one value out as its loop-carried and its scan output
    T = TensorProto
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "one"], ["v_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", T.INT64, []), helper.make_tensor_value_info("cond_in", T.BOOL, []),
                 helper.make_tensor_value_info("v_in", T.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", T.BOOL, []), helper.make_tensor_value_info("v_out", T.FLOAT, [2]),
         helper.make_tensor_value_info("v_out", T.FLOAT, [2])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["n", "c", "v0"], ["vf", "scan"], body=body, name="loop")], "g",
        [helper.make_tensor_value_info("n", T.INT64, []), helper.make_tensor_value_info("c", T.BOOL, []),
         helper.make_tensor_value_info("v0", T.FLOAT, [2])],
        [helper.make_tensor_value_info("vf", T.FLOAT, [2]), helper.make_tensor_value_info("scan", T.FLOAT, [None, 2])],
        [onnx.numpy_helper.from_array(np.ones(2, np.float32), "one")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()
    feed = {"n": np.array(3, np.int64), "c": np.array(True), "v0": np.zeros(2, np.float32)}
    want = _ort(model).run(None, feed)
    got = onnxep.InferenceSession(model).run(None, feed)
    for w, x in zip(want, got):
        np.testing.assert_array_equal(x, w)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_as_model_path_is_refused_without_waiting_for_a_writer(tmp_path):
    # oracle: the error type onnxep gives any path that is not a regular file (InvalidProtobuf, as for a directory);
    # the model file is opened before it is checked, so the open must not block on a FIFO no one writes to
    import threading
    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)
    got = []

    def create():
        try:
            onnxep.InferenceSession(str(fifo))
        except Exception as e:      # (recorded: the assertion below names it)
            got.append(e)
    t = threading.Thread(target=create, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "InferenceSession blocked opening a FIFO"
    assert len(got) == 1 and isinstance(got[0], onnxep.InvalidProtobuf) and "not a regular file" in str(got[0])
