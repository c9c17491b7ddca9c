"""ShapeMemo (onnxep/ops/_memo.py): the kernels' per-shape plans, bounded, the oldest dropped first; and kernels fed
more distinct shapes than it keeps still compute what the oracle does. Oracle: onnx.reference."""
import numpy as np
from onnx import helper

import onnxep
from onnxep.ops._memo import ShapeMemo
from tests._util import assert_outputs_match, make_model, run_reference


def test_memo_keeps_at_most_limit_oldest_dropped_first(monkeypatch):
    monkeypatch.setattr(ShapeMemo, "LIMIT", 3)
    m = ShapeMemo()
    for k in range(5):
        assert m.keep((k,), k * 10) == k * 10
    assert list(m) == [(2,), (3,), (4,)]
    m.keep((3,), 31)                 # a key it holds: replaced in place, nothing dropped
    assert list(m.items()) == [((2,), 20), ((3,), 31), ((4,), 40)]


def test_memo_shared_by_threads(monkeypatch):
    """Memos are shared by the runs of several Python threads (a session run from threads; FusedAttention's by
    every node of equal attributes): concurrent keeps raise nothing and leave the memo near its bound."""
    import sys
    import threading
    monkeypatch.setattr(ShapeMemo, "LIMIT", 8)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)         # threads switch often: a keep without its guard raises KeyError here
    m = ShapeMemo()
    errors = []

    def work(t):
        try:
            for k in range(50000):
                m.keep((t, k), k)
                m.get((t, k - 1))
        except Exception as e:          # (what the test is for: none expected)
            errors.append(e)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    try:
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    assert len(m) <= 8 + 4


def _kernels_of(sess, op_type):
    return [s[0] for p in sess._executor.plans for s in getattr(p, "steps", ()) if s[6] == op_type]


def test_layer_normalization_new_lengths_past_the_memo(monkeypatch):
    """Constant Scale / B over the last dim: the rows are memoized by the normalized dims, the plan by X's shape. A
    model fed more lengths than the memo keeps (and lengths it dropped, coming back) matches the oracle at each, and
    the memo stays bounded. Planner off: every run goes through compute."""
    monkeypatch.setattr(ShapeMemo, "LIMIT", 4)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((2, 3, 8)).astype(np.float32)
    inits = {"s": rng.standard_normal(8).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32)}
    m = make_model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)], {"x": x0}, ["y"],
                   opset=17, initializers=inits, input_shapes={"x": ["n", "l", 8]})
    so = onnxep.SessionOptions()
    so.enable_mem_pattern = False
    sess = onnxep.InferenceSession(m.SerializeToString(), so)
    (kernel,) = _kernels_of(sess, "LayerNormalization")
    for n, length in [(2, 3), (1, 5), (2, 7), (3, 1), (1, 9), (2, 3), (4, 2), (1, 5)]:
        feeds = {"x": (rng.standard_normal((n, length, 8)) * 3 + 1).astype(np.float32)}
        assert_outputs_match(sess.run(None, feeds), run_reference(m, feeds), rtol=1e-5, atol=2e-5)
        assert len(kernel._plans) <= 4
    assert list(kernel._rows) == [(3, (8,))]      # the rows: one entry for every length


def test_attention_lengths_past_the_memo(monkeypatch):
    """MatMul -> Softmax -> MatMul attention with a dynamic length, fused to one FusedAttention: more lengths than
    its memos keep, some coming back, each against the oracle."""
    monkeypatch.setattr(ShapeMemo, "LIMIT", 2)
    rng = np.random.default_rng(1)
    q = rng.standard_normal((1, 2, 4, 8)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["ss"]),
             helper.make_node("Softmax", ["ss"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    dyn = [1, 2, "l", 8]
    m = make_model(nodes, {"q": q, "k": q, "v": q}, ["y"], opset=17,
                   initializers={"scale": np.array(8 ** -0.5, np.float32)},
                   input_shapes={"q": dyn, "k": dyn, "v": dyn})
    so = onnxep.SessionOptions()
    so.enable_mem_pattern = False
    sess = onnxep.InferenceSession(m.SerializeToString(), so)
    (kernel,) = _kernels_of(sess, "FusedAttention")
    for length in [4, 6, 3, 4, 9, 6]:
        feeds = {k: rng.standard_normal((1, 2, length, 8)).astype(np.float32) for k in "qkv"}
        assert_outputs_match(sess.run(None, feeds), run_reference(m, feeds), rtol=1e-5, atol=1e-5)
        assert 0 < len(kernel._caches().natives) <= 2
