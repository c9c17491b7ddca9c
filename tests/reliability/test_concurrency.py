"""Concurrent run() calls on one session (onnxruntime allows them). Oracle: the same session run serially."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import onnxep
from onnxep._bench import with_presoftmax_output
from onnxep._light import light_model


@pytest.mark.parametrize("name", ["squeezenet", "shufflenet", "inception_v1"])
def test_concurrent_runs_match_serial_runs(name):
    model, pre = with_presoftmax_output(light_model(name))   # seeded random weights: distinct logits
    sess = onnxep.InferenceSession(model.SerializeToString())
    inp = sess.get_inputs()[0]
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal(inp.shape).astype(np.float32) for _ in range(6)]
    serial = [sess.run([pre], {inp.name: x})[0] for x in feeds]
    assert not np.array_equal(serial[0], serial[1])  # distinct inputs give distinct logits, so a mix-up would show
    with ThreadPoolExecutor(3) as pool:
        for _ in range(2):
            par = list(pool.map(lambda x: sess.run([pre], {inp.name: x})[0], feeds))
            for a, b in zip(serial, par):
                np.testing.assert_array_equal(a, b)
