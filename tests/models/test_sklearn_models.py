"""scikit-learn models and pipelines converted with skl2onnx (fixtures in tests/models/sklearn, written by
bench/zoo/sklearn_models.py), run on onnxep with the fallback off (session.disable_cpu_ep_fallback = 1).

Oracles: scikit-learn's own outputs stored in each .npz (labels equal; probabilities within 1e-4, 2e-3 for SVC whose
libsvm coupling runs in float64 where onnx runs float32; regression values within 1e-4 relative + absolute), and
onnxruntime on the same model (labels equal, floats within 1e-5). ZipMap outputs (a list of dicts per row, as
onnxruntime returns them) are compared key by key."""
import glob
import json
import os

import numpy as np
import pytest

import onnxep

HERE = os.path.join(os.path.dirname(__file__), "sklearn")
with open(os.path.join(HERE, "index.json")) as f:
    INDEX = json.load(f)
NAMES = sorted(INDEX)


def _model(name):
    # the file as skl2onnx wrote it: onnx 1.23's shape inference leaves several ai.onnx.ml outputs untyped, and
    # build_graph completes them (onnxep/graph/ml_types.py)
    return os.path.join(HERE, f"{name}.onnx")


def _session(name):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return onnxep.InferenceSession(_model(name), so)


def _dense(v, keys):
    """A ZipMap list of dicts as a [N, C] array in the order of keys; arrays unchanged."""
    if isinstance(v, list):
        assert all(isinstance(r, dict) and list(r) == list(keys) for r in v)
        return np.array([[r[k] for k in keys] for r in v], np.float64)
    return np.asarray(v)


def test_fixtures_present_and_small():
    assert len(NAMES) >= 12
    total = sum(os.path.getsize(p) for p in glob.glob(os.path.join(HERE, "*")))
    assert total < 2_000_000
    ops = {op for info in INDEX.values() for op in info["ops"]}
    assert {"LinearClassifier", "LinearRegressor", "TreeEnsembleClassifier", "TreeEnsembleRegressor", "SVMClassifier",
            "SVMRegressor", "ZipMap", "Scaler", "Imputer", "OneHotEncoder", "Normalizer", "Binarizer",
            "ArrayFeatureExtractor"} <= ops


@pytest.mark.parametrize("name", NAMES)
def test_matches_sklearn_and_onnxruntime(name):
    import onnxruntime as ort

    info = INDEX[name]
    data = np.load(os.path.join(HERE, f"{name}.npz"), allow_pickle=False)
    x = data["X"]
    sess = _session(name)
    assert all(b == "cpu" for b in sess.node_assignment.values())
    feed = {sess.get_inputs()[0].name: x}
    got = sess.run(None, feed)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(os.path.join(HERE, f"{name}.onnx"), so, providers=["CPUExecutionProvider"]).run(None, feed)
    assert len(got) == len(want)
    if info["kind"] == "clf":
        classes = data["classes"]
        keys = [str(c) if classes.dtype.kind == "U" else int(c) for c in classes]
        label, proba = got
        np.testing.assert_array_equal(np.asarray(label), want[0])
        np.testing.assert_array_equal(np.asarray(label).astype(data["label"].dtype), data["label"])
        assert isinstance(proba, list) == info["zipmap"] == isinstance(want[1], list)
        p = _dense(proba, keys)
        np.testing.assert_allclose(p, _dense(want[1], keys), rtol=1e-5, atol=1e-5)
        atol = 2e-3 if "svc" in name else 1e-4
        np.testing.assert_allclose(p, data["proba"], rtol=1e-4, atol=atol)
    else:
        v = got[0]
        assert v.dtype == want[0].dtype and v.shape == want[0].shape
        np.testing.assert_allclose(v, want[0], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(v.reshape(data["value"].shape), data["value"], rtol=1e-4, atol=1e-4)


def test_zipmap_output_is_a_list_of_dicts():
    name = "decision_tree_strings_zipmap"
    x = np.load(os.path.join(HERE, f"{name}.npz"))["X"][:3]
    label, proba = _session(name).run(None, {"X": x})
    assert label.dtype == object and isinstance(label[0], str)
    assert isinstance(proba, list) and len(proba) == 3
    assert set(proba[0]) == {"cat", "dog", "emu"} and all(isinstance(v, float) for v in proba[0].values())
