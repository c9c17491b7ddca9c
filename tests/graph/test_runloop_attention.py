"""FusedAttention in the compiled run loop (RL_ATTENTION, ops/onnxep/fused_attention.py c_step): the exporter
attention forms of tests/graph/test_exporter_attention.py run as C steps, bit-identical to the Python loop and close
to onnxruntime (the oracle, on the unfused model)."""
from __future__ import annotations

import numpy as np
import pytest

import onnxep

from onnxep.ops.onnxep.fused_attention import FusedAttention_1
from tests._util import assert_outputs_match, make_model, run_ort
from tests.graph.test_exporter_attention import SYM4, _gqa_model, _qkv, _sdpa_nodes
from tests.graph.test_runloop import compiled_vs_python

RNG = np.random.default_rng(26)


def _compiled(model, feeds_list):
    """compiled_vs_python (equal bits, close to onnxruntime), then the FusedAttention.compute calls of a fresh
    compiled session running feeds_list twice: the first run and the capture run are Python, the runs after it
    must take the C step."""
    got, progs = compiled_vs_python(model, feeds_list)
    for f, g in zip(feeds_list, got):
        assert_outputs_match(g, run_ort(model, f), rtol=2e-5, atol=2e-5)
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = 1
    sess = onnxep.InferenceSession(model.SerializeToString(), so)
    calls = []
    orig = FusedAttention_1.compute
    FusedAttention_1.compute = lambda self, ctx: (calls.append(1), orig(self, ctx))[1]
    try:
        for f in feeds_list + feeds_list:
            sess.run(None, f)
    finally:
        FusedAttention_1.compute = orig
    return calls, progs


def _feeds(make, n=3):
    return [make() for _ in range(n)]


@pytest.mark.parametrize("masks", [(), ("add",), ("add", "where"), ("where_pad", "add", "where")])
def test_masked_attention_runs_as_a_c_step(masks):
    B, H, S, D = 2, 4, 5, 8

    def make():
        q, k, v = _qkv(layout="bshd")
        f = {"q": q, "k": k, "v": v}
        if "add" in masks:
            f["am"] = RNG.standard_normal((B, 1, S, S)).astype(np.float32)
        if "where" in masks:
            f["causal"] = np.tril(np.ones((S, S), bool))[None, None]
        if "where_pad" in masks:
            f["keep"] = keep
        return f

    # a fully masked batch item: NaN probabilities -> 0 (the NaN guard). The same values in every feed: a small
    # bool feed's values are part of the run signature (they may be shapes), new values would capture again
    keep = RNG.uniform(size=(B, 1, 1, S)) < 0.7
    keep[0, 0, 0, :] = False

    spec = {"add": ("add", "am", None), "where": ("where", "causal", -np.inf), "where_pad": ("where", "keep", -np.inf)}
    nodes = _sdpa_nodes("q", "k", "v", "y", perm_in=[0, 2, 1, 3], nan_guard="where_pad" in masks,
                        masks=[spec[m] for m in masks])
    sym = ["batch", "seq", 4, 8]
    shapes = {"q": sym, "k": sym, "v": sym, "causal": [1, 1, "seq", "seq"], "am": ["batch", 1, "seq", "seq"],
              "keep": ["batch", 1, 1, "seq"]}
    feeds = _feeds(make)
    m = make_model(nodes, feeds[0], ["y"], input_shapes={k: shapes[k] for k in feeds[0]})
    calls, progs = _compiled(m, feeds)
    assert progs
    assert len(calls) == 2, calls         # the first run and the capture; the 4 runs after are compiled


def test_grouped_query_attention_runs_as_a_c_step():
    model, feeds = _gqa_model()
    calls, progs = _compiled(model, [feeds, feeds])
    assert progs and len(calls) == 2, calls
