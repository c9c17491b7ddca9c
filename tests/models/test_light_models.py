"""The nine light model-zoo models shipped inside the onnx wheel, against onnxruntime.

Their weights all come from ConstantOfShape(0.02), so the shipped softmax outputs are constant; the comparison is on
the tensor feeding the final Softmax (added as an extra graph output; densenet121 has no Softmax, its output is used), rtol 1e-4, atol 1e-5, and every node must run
on the cpu backend (none on the reference fallback). Oracle: onnxruntime's CPU provider."""
import os

import numpy as np
import onnx
import pytest

import onnxep
from onnxep._bench import ATOL, RTOL, light_models, random_feeds, with_presoftmax_output

ort = pytest.importorskip("onnxruntime")

MODELS = light_models()


def test_nine_light_models_are_shipped():
    assert len(MODELS) == 9, MODELS


@pytest.mark.parametrize("path", MODELS, ids=[os.path.basename(p)[:-5] for p in MODELS])
def test_presoftmax_logits_match_onnxruntime_on_cpu_only(path):
    model, pre = with_presoftmax_output(onnx.load(path))
    if pre is None:  # densenet121 ends without a Softmax: its graph output is the logits
        pre = model.graph.output[0].name
    data = model.SerializeToString()
    sess = onnxep.InferenceSession(data)
    fallback = [n for n, b in sess.node_assignment.items() if b != "cpu"]
    assert fallback == [], f"{len(fallback)} nodes fell back: {fallback[:5]}"
    feeds = random_feeds(sess, seed=1)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    ref = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    (ours,), (theirs,) = sess.run([pre], feeds), ref.run([pre], feeds)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
    np.testing.assert_allclose(ours, theirs, rtol=RTOL, atol=ATOL)
    # and the shipped graph output (the softmax) agrees too
    out = model.graph.output[0].name
    np.testing.assert_allclose(sess.run([out], feeds)[0], ref.run([out], feeds)[0], rtol=RTOL, atol=ATOL)
