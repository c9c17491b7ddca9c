"""onnxep.onnx_backend (the onnx.backend.base.Backend adapter) and the conformance data cache.
Oracles: numpy for values; onnx.backend.test.case.node's case count for the cache."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper

import onnxep
from onnxep.onnx_backend import OnnxepBackend, OnnxepBackendRep

from tests._util import local_function_model

from . import _data


def _model(op="Relu", opset=14, **attrs):
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


X = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], dtype=np.float32)


def test_supports_device():
    assert OnnxepBackend.supports_device("CPU")
    assert not OnnxepBackend.supports_device("CUDA")
    assert not OnnxepBackend.supports_device("CUDA:1")
    assert not OnnxepBackend.supports_device("TPU")


@pytest.mark.parametrize("feed", ["list", "dict", "array"])
def test_prepare_run(feed):
    # oracle: numpy maximum(x, 0)
    rep = OnnxepBackend.prepare(_model(), "CPU")
    assert isinstance(rep, OnnxepBackendRep)
    inputs = {"list": [X], "dict": {"x": X}, "array": X}[feed]
    out = rep.run(inputs)
    assert len(out) == 1
    assert out[0].dtype == np.float32 and out[0].shape == (2, 3)
    np.testing.assert_array_equal(out[0], np.maximum(X, 0))
    np.testing.assert_array_equal(out["y"], out[0])


def test_run_model_and_module_functions():
    # oracle: numpy exp (Exp runs on whichever backend supports it)
    from onnxep import onnx_backend
    out = onnx_backend.run_model(_model("Exp", 13), [X])
    assert out[0].shape == (2, 3) and out[0].dtype == np.float32
    np.testing.assert_allclose(out[0], np.exp(X), rtol=1e-6)


@pytest.mark.parametrize("opset", [None, 6, 13])
def test_run_node(opset):
    # oracle: numpy (x + y)
    node = helper.make_node("Add", ["a", "b"], ["c"])
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.ones((2, 3), np.float32)
    kw = {} if opset is None else {"opset_version": opset}
    out = OnnxepBackend.run_node(node, [a, b], **kw)
    assert out[0].dtype == np.float32 and out[0].shape == (2, 3)
    np.testing.assert_array_equal(out[0], a + b)
    out = OnnxepBackend.run_node(node, {"a": a, "b": b}, outputs_info=[(np.float32, (2, 3))])
    np.testing.assert_array_equal(out[0], a + b)


def test_run_node_wrong_input_count():
    node = helper.make_node("Add", ["a", "b"], ["c"])
    with pytest.raises(ValueError, match="2 inputs"):
        OnnxepBackend.run_node(node, [np.ones(2, np.float32)])


def test_fallback_switch_passes_through():
    # a model-local function node has no cpu kernel: with the fallback off the session refuses it
    model = local_function_model()
    with pytest.raises(onnxep.NotImplemented, match="fallback is off"):
        OnnxepBackend.prepare(model, **{"session.disable_cpu_ep_fallback": "1"})
    with pytest.raises(onnxep.NotImplemented, match="fallback is off"):
        OnnxepBackend.prepare(model, session_config={"session.disable_cpu_ep_fallback": "1"})
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    with pytest.raises(onnxep.NotImplemented):
        OnnxepBackend.prepare(model, sess_options=so)
    # the caller's SessionOptions are copied, not changed
    so2 = onnxep.SessionOptions()
    OnnxepBackend.prepare(model, sess_options=so2, **{"session.disable_prepacking": "1"})
    with pytest.raises(onnxep.InvalidArgument):
        so2.get_session_config_entry("session.disable_prepacking")
    # Relu is a cpu kernel: runs with the fallback off
    rep = OnnxepBackend.prepare(_model(), **{"session.disable_cpu_ep_fallback": "1"}, intra_op_num_threads=1)
    assert rep.session.get_session_options().intra_op_num_threads == 1
    assert set(rep.session.node_assignment.values()) == {"cpu"}


def test_unknown_option_and_device():
    with pytest.raises(TypeError, match="unknown option"):
        OnnxepBackend.prepare(_model(), no_such_option=1)
    with pytest.raises(RuntimeError, match="CPU only"):
        OnnxepBackend.prepare(_model(), "CUDA")


def test_too_many_inputs():
    rep = OnnxepBackend.prepare(_model())
    with pytest.raises(ValueError, match="got 2 inputs"):
        rep.run([X, X])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the generators compute log(0) and overflowing casts
def test_data_cache_complete():
    # oracle: the installed onnx's node case generators (one folder per case, each with model and data)
    from onnx.backend.test.loader import load_model_tests
    path = _data.ensure_data()
    assert path.endswith(f"onnx-{onnx.__version__}")
    assert os.path.isfile(os.path.join(path, "COMPLETE"))
    names = {c.name for c in load_model_tests(kind="node")}
    on_disk = set(os.listdir(os.path.join(path, "node")))
    assert on_disk == names
    case = os.path.join(path, "node", "test_relu")
    assert os.path.isfile(os.path.join(case, "model.onnx"))
    assert os.path.isfile(os.path.join(case, "data.json"))
    assert os.path.isfile(os.path.join(case, "test_data_set_0", "input_0.pb"))
    assert os.path.isfile(os.path.join(case, "test_data_set_0", "output_0.pb"))
    assert _data.ensure_data() == path  # reused, not regenerated


def test_every_exclusion_matches_a_case():
    # oracle: the suite's own case list; a stale exclusion (matching nothing) would hide nothing and mislead
    import re

    from .exclusions import EXCLUDE, KNOWN_FAILING, NO_FALLBACK_EXCLUDE
    from .test_onnx_backend import backend_test
    names = [n for items in backend_test._test_items.values() for n in items]
    assert len(names) == 2033  # onnx 1.23.2: 1884 node + 82 + 35 + 23 + 9, CPU only
    for pattern in {**EXCLUDE, **NO_FALLBACK_EXCLUDE, **KNOWN_FAILING}:
        assert any(re.search(pattern, n) for n in names), pattern
