"""The nine light model-zoo models shipped inside the onnx wheel, with seeded random weights (onnxep/_light.py),
against onnxruntime's CPU provider (the oracle), at 1 and 2 threads.

The shipped files make every weight with ConstantOfShape(0.02), so their logits are one repeated number and a layout
or channel-order bug cannot change them. With random weights the logits are distinct, and reversing the input's
channels or swapping H and W moves them by percent (checked here, so these tests can see such a bug). The comparison
is on the tensor feeding the final Softmax (added as an extra graph output; densenet121 has none, its output is the
logits): max |onnxep - onnxruntime| / max |onnxruntime| <= 1e-5, same dtype and shape; every node runs on the cpu
backend (none on the reference fallback)."""

import numpy as np
import onnx
import pytest

import onnxep
from onnxep._bench import REL_ERR, random_feeds, rel_err, with_presoftmax_output
from onnxep._light import light_model, light_names, random_weights

ort = pytest.importorskip("onnxruntime")

NAMES = light_names()


def test_nine_light_models_are_shipped():
    assert len(NAMES) == 9, NAMES


def _logits(model):
    model, pre = with_presoftmax_output(model)
    return model, pre or model.graph.output[0].name


def _ort(data, threads):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = threads
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("name", NAMES)
def test_random_weight_logits_match_onnxruntime_at_1_and_2_threads(name):
    model, pre = _logits(light_model(name))
    data = model.SerializeToString()
    ref = _ort(data, 1)
    feeds = random_feeds(ref, seed=1)
    (want,) = ref.run([pre], feeds)
    # the logits are real-looking: most of them distinct, and the input's layout matters
    assert len(np.unique(want)) >= 0.8 * want.size, f"{len(np.unique(want))} distinct of {want.size}"
    x_name = ref.get_inputs()[0].name
    x = feeds[x_name]
    for moved in (x[:, ::-1], x.transpose(0, 1, 3, 2)):
        (other,) = ref.run([pre], {**feeds, x_name: np.ascontiguousarray(moved)})
        assert rel_err(other, want) > 1e-3
    for threads in (1, 2):
        so = onnxep.SessionOptions()
        so.intra_op_num_threads = threads
        sess = onnxep.InferenceSession(data, so)
        fallback = [n for n, b in sess.node_assignment.items() if b != "cpu"]
        assert fallback == [], f"{len(fallback)} nodes fell back: {fallback[:5]}"
        (ours,) = sess.run([pre], feeds)
        assert ours.dtype == want.dtype and ours.shape == want.shape
        err = rel_err(ours, want)
        assert err <= REL_ERR, f"{threads} thread(s): max diff / max |ort| = {err:.2e}"
        out = model.graph.output[0].name   # the shipped graph output (the softmax) agrees too
        assert rel_err(sess.run([out], feeds)[0], ref.run([out], feeds)[0]) <= REL_ERR


def test_random_weights_are_seeded_and_keep_the_graph():
    """Same seed, same bytes; another seed, other values; the compute nodes and the weights' names and shapes are the
    shipped file's (oracle: the shipped model and onnx.checker)."""
    shipped = light_model("squeezenet", "shipped")
    a, b, c = random_weights(shipped, 0), random_weights(shipped, 0), random_weights(shipped, 1)
    assert a.SerializeToString() == b.SerializeToString() != c.SerializeToString()
    onnx.checker.check_model(a)
    compute = [(n.op_type, list(n.input), list(n.output)) for n in shipped.graph.node if n.op_type != "ConstantOfShape"]
    assert [(n.op_type, list(n.input), list(n.output)) for n in a.graph.node] == compute
    made = {n.output[0] for n in shipped.graph.node if n.op_type == "ConstantOfShape"}
    inits = {t.name: t for t in a.graph.initializer}
    assert made <= set(inits)
    for n in shipped.graph.node:
        if n.op_type == "ConstantOfShape":
            shape = onnx.numpy_helper.to_array(next(t for t in shipped.graph.initializer if t.name == n.input[0]))
            assert list(inits[n.output[0]].dims) == shape.tolist()
    w = onnx.numpy_helper.to_array(inits["conv1_w_0"])
    assert len(np.unique(w)) > 0.9 * w.size and abs(w.std() - np.sqrt(2 / np.prod(w.shape[1:]))) < 0.02


def test_random_weight_batchnorm_variances_are_positive():
    m = light_model("resnet50")
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    bns = [n for n in m.graph.node if n.op_type == "BatchNormalization"]
    assert len(bns) == 53
    assert all(inits[n.input[4]].min() > 0 for n in bns)
