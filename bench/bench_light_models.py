"""pytest-benchmark: each light model (seeded random weights, onnxep/_light.py) through onnxep and onnxruntime, grouped
per model.

    python -m pytest bench/bench_light_models.py --benchmark-only --benchmark-group-by=group
"""

import pytest

import onnxep
from onnxep._bench import random_feeds
from onnxep._light import light_model, light_names

NAMES = light_names()


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("runtime", ["onnxep", "onnxruntime"])
def bench_light_model(benchmark, name, runtime):
    data = light_model(name).SerializeToString()
    if runtime == "onnxep":
        sess = onnxep.InferenceSession(data)
    else:
        ort = pytest.importorskip("onnxruntime")
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    feeds = random_feeds(sess)
    sess.run(None, feeds)
    benchmark.group = name
    benchmark.pedantic(sess.run, args=(None, feeds), rounds=10, warmup_rounds=2)
