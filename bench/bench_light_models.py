"""pytest-benchmark: each light model through onnxep and onnxruntime, grouped per model.

    python -m pytest bench/bench_light_models.py --benchmark-only --benchmark-group-by=group
"""
import os

import onnx
import pytest

import onnxep
from onnxep._bench import light_models, random_feeds

MODELS = light_models()


@pytest.mark.parametrize("path", MODELS, ids=[os.path.basename(p)[:-5] for p in MODELS])
@pytest.mark.parametrize("runtime", ["onnxep", "onnxruntime"])
def bench_light_model(benchmark, path, runtime):
    data = onnx.load(path).SerializeToString()
    if runtime == "onnxep":
        sess = onnxep.InferenceSession(data)
    else:
        ort = pytest.importorskip("onnxruntime")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    feeds = random_feeds(sess)
    sess.run(None, feeds)
    benchmark.group = os.path.basename(path)
    benchmark.pedantic(sess.run, args=(None, feeds), rounds=10, warmup_rounds=2)
