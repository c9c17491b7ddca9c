"""The synthetic benchmark models (onnxep/_models.py) and `python -m onnxep bench --suite models`.
Oracle: onnxruntime on the same model (the bench's own check), onnx.checker for the builders."""
import io

import numpy as np
import onnx
import pytest

from onnxep import _bench, _models
from onnxep.__main__ import main


@pytest.mark.parametrize("layernorm", ["op", "decomposed"])
def test_bert_encoder_builder(layernorm):
    m = _models.bert_encoder(layers=1, hidden=64, heads=4, seq=8, batch=2, layernorm=layernorm)
    onnx.checker.check_model(m, full_check=True)
    ops = {n.op_type for n in m.graph.node}
    assert {"MatMul", "Softmax", "Erf", "Transpose", "Reshape"} <= ops
    assert ("LayerNormalization" in ops) == (layernorm == "op") and ("ReduceMean" in ops) == (layernorm != "op")
    assert [d.dim_value for d in m.graph.input[1].type.tensor_type.shape.dim] == [2, 1, 1, 8]
    again = _models.bert_encoder(layers=1, hidden=64, heads=4, seq=8, batch=2, layernorm=layernorm)
    assert again.SerializeToString() == m.SerializeToString()      # fixed seed: the same weights every time
    with pytest.raises(ValueError, match="multiple"):
        _models.bert_encoder(hidden=10, heads=3)


def test_mlp_builders():
    for matmul in (False, True):
        m = _models.mlp(m=4, k=8, hidden=16, n=5, matmul=matmul)
        onnx.checker.check_model(m, full_check=True)
        assert ("Gemm" in {n.op_type for n in m.graph.node}) != matmul


def test_bench_models_table():
    """One row of the table: both libraries timed, the output checked against onnxruntime."""
    pytest.importorskip("onnxruntime")
    out = io.StringIO()
    rows = _bench.bench_models(threads=1, warmup=1, repeat=2, round_size=1, pause=0.0, out=out, names=["mlp_gemm"])
    assert len(rows) == 1 and rows[0]["check"].startswith("ok") and rows[0]["fallback_nodes"] == 0
    assert np.isfinite(rows[0]["ratio"]) and "mlp_gemm" in out.getvalue()


def test_cli_suite_models_option(monkeypatch):
    seen = {}
    monkeypatch.setattr(_bench, "bench_models", lambda **kw: seen.update(kw) or [{"check": "ok"}])
    assert main(["bench", "--suite", "models", "--threads", "1", "--repeat", "3"]) == 0
    assert seen["threads"] == 1 and seen["repeat"] == 3


def test_light_bench_table_alternates_rounds(monkeypatch):
    """The light-model table (python -m onnxep bench): the pre-softmax check against onnxruntime, and both sessions
    timed in alternating rounds (the order of the runs is the oracle)."""
    pytest.importorskip("onnxruntime")
    order = []
    real = _bench._alternate

    def spy(fns, warmup, repeat, round_size, pause):
        def tagged(i, fn):
            def run():
                order.append(i)
                return fn()
            return run
        return real([tagged(i, fn) for i, fn in enumerate(fns)], warmup, repeat, round_size, pause)
    monkeypatch.setattr(_bench, "_alternate", spy)
    out = io.StringIO()
    rows = _bench.bench(["squeezenet"], threads=1, warmup=1, repeat=4, round_size=2, pause=0.0, out=out)
    assert len(rows) == 1 and rows[0]["check"].startswith("ok") and np.isfinite(rows[0]["ratio"])
    assert order == [0, 1] + [0, 0, 1, 1] * 2                 # warm-up, then rounds of 2: onnxep, onnxruntime, ...


def test_settle_waits_for_spinning_threads():
    """_alternate's settle (onnxep/_bench.py): it collects garbage and returns only once no thread of the process
    burns CPU (the other library's spinning workers). Oracle: a Python thread spinning for 0.3 s -- settle cannot
    return before it stops; with nothing spinning it returns within its limit."""
    import gc
    import threading
    import time

    stop = time.perf_counter() + 0.3

    def spin():
        while time.perf_counter() < stop:
            pass
    t = threading.Thread(target=spin)
    t.start()
    waited = _bench._settle(0.0, limit=5.0)
    returned = time.perf_counter()
    t.join()
    assert returned >= stop and waited > 0.0
    garbage = [[]]
    garbage[0].append(garbage)
    n = len(gc.get_objects())
    del garbage
    assert _bench._settle(0.0, limit=5.0) < 5.0
    assert len(gc.get_objects()) < n             # the cycle was collected
