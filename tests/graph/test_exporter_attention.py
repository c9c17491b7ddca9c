"""Attention as torch.onnx writes it -> com.onnxep FusedAttention (graph/passes/fuse_exporter_attention.py, kernel
ops/onnxep/fused_attention.py): hand-built patterns per exported form (symbolic dims) and the zoo fixtures.

Oracle: onnxruntime's CPU provider on the same (unfused) model. The plans are inspected for the fused node."""
import collections
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.ops.onnxep.fused_attention import FusedAttention_1
from tests._util import make_model, run_ort

RNG = np.random.default_rng(24)
MIN = float(np.finfo(np.float32).min)
ZOO = Path(__file__).resolve().parents[1] / "models" / "zoo"


def _ops(sess):
    return collections.Counter(st[6] for p in sess.plans for st in getattr(p, "steps", ()))


def _session(model, **kw):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return onnxep.InferenceSession(model.SerializeToString(), so, **kw)


def _check(model, feeds, fused=1, rtol=2e-5, native=True):
    """Fused onnxep vs onnxruntime; `native`: the fused node must not take its numpy path."""
    want = run_ort(model, feeds)
    sess = _session(model)
    calls = []
    orig = FusedAttention_1._numpy
    FusedAttention_1._numpy = lambda self, *a: (calls.append(1), orig(self, *a))[1]
    try:
        got = sess.run(None, feeds)
    finally:
        FusedAttention_1._numpy = orig
    assert bool(calls) == (fused > 0 and not native), calls
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.allclose(g, w, rtol=rtol, atol=rtol * max(1.0, float(np.max(np.abs(w)))), equal_nan=True), \
            float(np.nanmax(np.abs(g - w)))
    assert _ops(sess)["FusedAttention"] == fused, _ops(sess)
    off = _session(model, disabled_optimizers=["fuse_exporter_attention"])
    assert _ops(off)["FusedAttention"] == 0
    return sess


def _c(name, value, dtype=np.float32):
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(
        name, TensorProto.FLOAT if dtype == np.float32 else TensorProto.INT64, np.asarray(value).shape,
        np.asarray(value, dtype).reshape(-1).tolist()))


B, H, S, D = 2, 4, 5, 8


def _qkv(b=B, h=H, s=S, d=D, layout="bhsd"):
    shape = (b, h, s, d) if layout == "bhsd" else (b, s, h, d)
    return [RNG.standard_normal(shape).astype(np.float32) for _ in range(3)]


def _sdpa_nodes(q, k, v, out, scale_split=True, nan_guard=True, masks=(), kt_input=False, perm_in=None,
                scale_op="Mul"):
    """SDPA as exported: scale on Q and K (sqrt) or on the scores, K^T by Transpose (or given transposed), masks
    in order, softmax, NaN guard, second product."""
    nodes, qn, kn, vn = [], q, k, v
    if perm_in is not None:     # (b, s, h, d) inputs: head-split transposes
        nodes += [helper.make_node("Transpose", [q], ["qt"], perm=perm_in),
                  helper.make_node("Transpose", [v], ["vt"], perm=perm_in)]
        qn, vn = "qt", "vt"
        kperm = [0, 2, 3, 1]
    else:
        kperm = [0, 1, 3, 2]
    if not kt_input:
        nodes.append(helper.make_node("Transpose", [k], ["kT"], perm=kperm))
        kn = "kT"
    if scale_split:
        nodes += [_c("sc", np.float32(D ** -0.25)), helper.make_node("Mul", [qn, "sc"], ["qs"]),
                  helper.make_node("Mul", [kn, "sc"], ["ks"]), helper.make_node("MatMul", ["qs", "ks"], ["s0"])]
        last = "s0"
    else:
        nodes += [helper.make_node("MatMul", [qn, kn], ["qk"])]
        if scale_op == "Mul":
            nodes += [_c("sc", np.float32(D ** -0.5)), helper.make_node("Mul", ["sc", "qk"], ["s0"])]
        else:
            nodes += [_c("sc", np.float32(D ** 0.5)), helper.make_node("Div", ["qk", "sc"], ["s0"])]
        last = "s0"
    for i, (kind, name, fill) in enumerate(masks):
        if kind == "add":
            nodes.append(helper.make_node("Add", [last, name], [f"m{i}"]))
        else:
            nodes += [_c(f"f{i}", np.float32(fill)), helper.make_node("Where", [name, last, f"f{i}"], [f"m{i}"])]
        last = f"m{i}"
    nodes.append(helper.make_node("Softmax", [last], ["p"], axis=-1))
    if nan_guard:
        nodes += [helper.make_node("IsNaN", ["p"], ["isn"]), _c("zero", np.float32(0.0)),
                  helper.make_node("Where", ["isn", "zero", "p"], ["pz"])]
        p = "pz"
    else:
        p = "p"
    nodes += [helper.make_node("MatMul", [p, vn], ["ctx"]),
              helper.make_node("Transpose", ["ctx"], [out], perm=[0, 2, 1, 3])]
    return nodes


SYM4 = ["batch", "heads", "seq", None]


def test_torchscript_sdpa_form_with_additive_mask_from_bool():
    q, k, v = _qkv()
    keep = RNG.random((B, 1, 1, S)) > 0.3
    nodes = [_c("fz", np.float32(0.0)), _c("fm", np.float32(MIN)),
             helper.make_node("Where", ["keep", "fz", "fm"], ["amask"])]
    nodes += _sdpa_nodes("q", "k", "v", "y", masks=[("add", "amask", None)])
    m = make_model(nodes, {"q": q, "k": k, "v": v, "keep": keep}, ["y"],
                   input_shapes={"q": SYM4, "k": SYM4, "v": SYM4, "keep": ["batch", 1, 1, "seq"]})
    _check(m, {"q": q, "k": k, "v": v, "keep": keep})


@pytest.mark.parametrize("scale_op", ["Mul", "Div"])
def test_scale_on_scores_k_given_transposed_and_causal_where(scale_op):
    q, k, v = _qkv()
    kT = np.ascontiguousarray(k.transpose(0, 1, 3, 2))
    causal = np.tril(np.ones((S, S), bool))[None, None]
    am = ((1.0 - (RNG.random((B, 1, 1, S)) > 0.2)) * MIN).astype(np.float32)
    nodes = _sdpa_nodes("q", "kT", "v", "y", scale_split=False, kt_input=True, scale_op=scale_op,
                        masks=[("where", "causal", MIN), ("add", "am", None)])
    m = make_model(nodes, {"q": q, "kT": kT, "v": v, "causal": causal, "am": am}, ["y"],
                   input_shapes={"q": SYM4, "kT": ["batch", "heads", None, "seq"], "v": SYM4,
                                 "causal": [1, 1, "seq", "seq"], "am": ["batch", 1, 1, "seq"]})
    _check(m, {"q": q, "kT": kT, "v": v, "causal": causal, "am": am})


def test_minus_inf_causal_then_additive_mask_and_head_split_transposes():
    q, k, v = _qkv(layout="bshd")
    causal = np.tril(np.ones((S, S), bool))[None, None]
    am = RNG.standard_normal((B, 1, S, S)).astype(np.float32)
    nodes = _sdpa_nodes("q", "k", "v", "y", perm_in=[0, 2, 1, 3], nan_guard=False,
                        masks=[("add", "am", None), ("where", "causal", -np.inf)])
    sym = ["batch", "seq", 4, 8]
    m = make_model(nodes, {"q": q, "k": k, "v": v, "causal": causal, "am": am}, ["y"],
                   input_shapes={"q": sym, "k": sym, "v": sym, "causal": [1, 1, "seq", "seq"],
                                 "am": ["batch", 1, "seq", "seq"]})
    _check(m, {"q": q, "k": k, "v": v, "causal": causal, "am": am})


def test_fully_masked_rows_are_zeroed_by_the_nan_guard():
    q, k, v = _qkv()
    keep = np.ones((B, 1, S, S), bool)
    keep[0, 0, 2, :] = False
    nodes = _sdpa_nodes("q", "k", "v", "y", masks=[("where", "keep", -np.inf)])
    m = make_model(nodes, {"q": q, "k": k, "v": v, "keep": keep}, ["y"],
                   input_shapes={"q": SYM4, "k": SYM4, "v": SYM4, "keep": ["batch", 1, "seq", "seq"]})
    sess = _check(m, {"q": q, "k": k, "v": v, "keep": keep})
    y = sess.run(None, {"q": q, "k": k, "v": v, "keep": keep})[0]
    assert np.all(y[0, 2] == 0.0) and np.all(np.isfinite(y))


def test_mask_that_broadcasts_the_scores_up_runs_the_numpy_path():
    q, k, v = _qkv(h=1)
    am = RNG.standard_normal((B, 3, S, S)).astype(np.float32)   # 3 heads of mask against 1 of scores
    nodes = _sdpa_nodes("q", "k", "v", "y", masks=[("add", "am", None)])
    m = make_model(nodes, {"q": q, "k": k, "v": v, "am": am}, ["y"],
                   input_shapes={"q": SYM4, "k": SYM4, "v": SYM4, "am": ["batch", None, "seq", "seq"]})
    _check(m, {"q": q, "k": k, "v": v, "am": am}, native=False)


def _gqa_model(kv_heads=2, rep=2, const_shapes=True, mask=False):
    """Past Concat, then the grouped-query repeat Unsqueeze -> Expand -> Reshape of K and V; `mask`: an additive
    mask input "am" of one row per head."""
    q = RNG.standard_normal((B, kv_heads * rep, 1, D)).astype(np.float32)
    feeds = {"q": q}
    if mask:
        feeds["am"] = RNG.standard_normal((B, kv_heads * rep, 1, S + 1)).astype(np.float32)
    nodes = []
    for t in ("k", "v"):
        feeds[f"past_{t}"] = RNG.standard_normal((B, kv_heads, S, D)).astype(np.float32)
        feeds[f"new_{t}"] = RNG.standard_normal((B, kv_heads, 1, D)).astype(np.float32)
        nodes += [helper.make_node("Concat", [f"past_{t}", f"new_{t}"], [f"cat_{t}"], axis=2),
                  _c(f"ax_{t}", np.array([2], np.int64), np.int64),
                  helper.make_node("Unsqueeze", [f"cat_{t}", f"ax_{t}"], [f"u_{t}"]),
                  helper.make_node("Shape", [f"cat_{t}"], [f"sh_{t}"]),
                  _c(f"i0_{t}", np.array([0, 1], np.int64), np.int64),
                  _c(f"i2_{t}", np.array([2, 3], np.int64), np.int64),
                  helper.make_node("Gather", [f"sh_{t}", f"i0_{t}"], [f"bh_{t}"]),
                  helper.make_node("Gather", [f"sh_{t}", f"i2_{t}"], [f"sd_{t}"]),
                  _c(f"rep_{t}", np.array([rep], np.int64), np.int64),
                  helper.make_node("Concat", [f"bh_{t}", f"rep_{t}", f"sd_{t}"], [f"es_{t}"], axis=0),
                  helper.make_node("Expand", [f"u_{t}", f"es_{t}"], [f"e_{t}"]),
                  _c(f"rs_{t}", np.array([0, -1, 0, 0][:1] + [kv_heads * rep, -1, D], np.int64), np.int64),
                  helper.make_node("Reshape", [f"e_{t}", f"rs_{t}"], [f"r_{t}"])]
    nodes += _sdpa_nodes("q", "r_k", "r_v", "y", scale_split=False, masks=(("add", "am", None),) if mask else ())
    m = make_model(nodes, feeds, ["y", "cat_k", "cat_v"],
                   input_shapes={"q": ["batch", None, 1, None], "past_k": ["batch", None, "past", None],
                                 "past_v": ["batch", None, "past", None], "new_k": ["batch", None, 1, None],
                                 "new_v": ["batch", None, 1, None], "am": ["batch", None, 1, None]})
    return m, feeds


def test_grouped_query_repeat_reads_the_shared_head():
    m, feeds = _gqa_model()
    sess = _check(m, feeds)
    # the fused node reads the concatenated kv (the repeat is gone from the plan)
    ops = _ops(sess)
    assert ops["Expand"] == 0, ops


@pytest.mark.parametrize("kv_heads,rep,rows", [(2, 2, 2), (1, 3, 3), (2, 4, 4), (1, 8, 4), (2, 6, 3), (1, 5, 1),
                                              (3, 1, 1)])
def test_grouped_query_heads_of_a_step_go_to_the_kernel_as_rows_of_one_item(kv_heads, rep, rows):
    """A decoding step (one query row a head) of grouped-query attention: the query heads that read one kv head go to
    the kernel as the rows of one item, up to _kernels.ATTN_DIRECT_ROWS (4) of them, so each key row is read once for
    them (fused_attention._shared_kv_rows); a repeat with no divisor in 2 .. 4 (5) and no repeat at all keep one row
    an item. A mask of one row per head checks that every row keeps its own. Oracle: onnxruntime."""
    m, feeds = _gqa_model(kv_heads, rep, mask=True)
    sess = _check(m, feeds)
    (fa,) = [st[0] for p in sess.plans for st in getattr(p, "steps", ()) if st[6] == "FusedAttention"]
    preps = [v for v in fa._caches().natives.values() if v is not None and v[0] == "fused"]
    assert preps and all(int(v[4][1]) == rows and int(v[4][0]) == B * kv_heads * rep // rows for v in preps), \
        [list(v[4][:2]) for v in preps]


def test_scale_after_the_mask_is_not_folded_into_alpha():
    q, k, v = _qkv()
    am = RNG.standard_normal((B, 1, 1, S)).astype(np.float32)
    nodes = [helper.make_node("Transpose", ["k"], ["kT"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kT"], ["qk"]), helper.make_node("Add", ["qk", "am"], ["qm"]),
             _c("sc", np.float32(0.3)), helper.make_node("Mul", ["qm", "sc"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]
    m = make_model(nodes, {"q": q, "k": k, "v": v, "am": am}, ["y"],
                   input_shapes={"q": SYM4, "k": SYM4, "v": SYM4, "am": ["batch", 1, 1, "seq"]})
    _check(m, {"q": q, "k": k, "v": v, "am": am}, fused=0)


def test_a_probabilities_output_keeps_the_pattern():
    q, k, v = _qkv()
    nodes = _sdpa_nodes("q", "k", "v", "y", nan_guard=False)
    m = make_model(nodes, {"q": q, "k": k, "v": v}, ["y", "p"],
                   input_shapes={"q": SYM4, "k": SYM4, "v": SYM4})
    _check(m, {"q": q, "k": k, "v": v}, fused=0)


@pytest.mark.parametrize("name", ["bert_1layer.dynamo", "bert_1layer.torchscript", "gpt2_1layer_past.dynamo",
                                  "gpt2_1layer_past.torchscript", "llama_1layer_past.dynamo",
                                  "llama_1layer_past.torchscript"])
def test_zoo_fixture_attention_is_fused(name):
    path = ZOO / f"{name}.onnx"
    data = np.load(ZOO / f"{name}.npz")
    feeds = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    eso = onnxep.SessionOptions()
    eso.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sess = onnxep.InferenceSession(str(path), eso)
    got = sess.run(None, feeds)
    assert _ops(sess)["FusedAttention"] >= 1, _ops(sess)
    assert _ops(sess)["Softmax"] == 0, _ops(sess)
    for g, w in zip(got, want):
        err = float(np.max(np.abs(g - w))) / max(float(np.max(np.abs(w))), 1e-30)
        assert err < 1e-4, err


def test_float32_casts_around_the_products_are_absorbed():
    q, k, v = _qkv()
    causal = np.tril(np.ones((S, S), bool))[None, None]
    nodes = [helper.make_node("Cast", ["q"], ["qc"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["k"], ["kc"], to=TensorProto.FLOAT),
             helper.make_node("Transpose", ["kc"], ["kT"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["qc", "kT"], ["qk"]), _c("fill", np.float32(MIN)),
             helper.make_node("Where", ["causal", "qk", "fill"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("Cast", ["p"], ["pc"], to=TensorProto.FLOAT),
             helper.make_node("MatMul", ["pc", "v"], ["y"])]
    m = make_model(nodes, {"q": q, "k": k, "v": v, "causal": causal}, ["y"],
                   input_shapes={"q": SYM4, "k": SYM4, "v": SYM4, "causal": [1, 1, "seq", "seq"]})
    _check(m, {"q": q, "k": k, "v": v, "causal": causal})


def _view_k_attention(k):
    """Attention over K given as `k` transposed the dynamo way, Reshape(Transpose(Reshape(k, s1), (0, 2, 1)), s2),
    scaled by 0.35: q, v, s1, s2 -> y."""
    return [helper.make_node("Reshape", [k, "s1"], ["k3"]),
            helper.make_node("Transpose", ["k3"], ["k3t"], perm=[0, 2, 1]),
            helper.make_node("Reshape", ["k3t", "s2"], ["kT"]),
            helper.make_node("MatMul", ["q", "kT"], ["qk"]), _c("sc", np.float32(0.35)),
            helper.make_node("Mul", ["qk", "sc"], ["s"]),
            helper.make_node("Softmax", ["s"], ["p"], axis=-1), helper.make_node("MatMul", ["p", "v"], ["y"])]


@pytest.mark.parametrize("swap", [True, False])
def test_dynamo_transpose_of_k_through_a_3d_view(swap):
    """K^T as Reshape(Transpose(Reshape(k, (-1, T, D)), (0, 2, 1)), s2): s2 = (B, H, D, T) is the swap the kernel
    reads through strides; s1 = (B, H * T, D) scrambles the items, which the kernel computes with numpy."""
    q, k, v = _qkv()
    s1 = [-1, S, D] if swap else [B, H * S, D]
    nodes = [_c("s1", np.array(s1, np.int64), np.int64), _c("s2", np.array([B, H, D, S], np.int64), np.int64),
             *_view_k_attention("k")]
    m = make_model(nodes, {"q": q, "k": k, "v": v}, ["y"], input_shapes={"q": SYM4, "k": SYM4, "v": SYM4})
    _check(m, {"q": q, "k": k, "v": v})


def test_a_repeat_of_a_non_head_dim_is_expanded_first():
    """Unsqueeze at the key axis: the 'repeat' doubles the keys, not the heads -- the kernel expands with numpy."""
    q = RNG.standard_normal((B, H, S, D)).astype(np.float32)
    k = RNG.standard_normal((B, H, S, D)).astype(np.float32)
    v = RNG.standard_normal((B, H, 2 * S, D)).astype(np.float32)
    nodes = [_c("ax", np.array([3], np.int64), np.int64), helper.make_node("Unsqueeze", ["k", "ax"], ["ku"]),
             _c("es", np.array([1, 1, 1, 2, 1], np.int64), np.int64), helper.make_node("Expand", ["ku", "es"], ["ke"]),
             _c("rs", np.array([0, 0, -1, D], np.int64), np.int64), helper.make_node("Reshape", ["ke", "rs"], ["kr"])]
    nodes += _sdpa_nodes("q", "kr", "v", "y", nan_guard=False)
    m = make_model(nodes, {"q": q, "k": k, "v": v}, ["y"], input_shapes={"q": SYM4, "k": SYM4, "v": SYM4})
    _check(m, {"q": q, "k": k, "v": v}, native=True)


def test_a_small_where_fill_is_not_fused():
    """Where(keep, scores, -1e4): the kernel's additive form would be scores - 1e4, not -1e4 (fully masked rows
    differ), so the pattern stays."""
    q, k, v = _qkv()
    keep = np.ones((B, 1, S, S), bool)
    keep[1, 0, 3, :] = False
    nodes = _sdpa_nodes("q", "k", "v", "y", masks=[("where", "keep", -1e4)])
    m = make_model(nodes, {"q": q, "k": k, "v": v, "keep": keep}, ["y"],
                   input_shapes={"q": SYM4, "k": SYM4, "v": SYM4, "keep": ["batch", 1, "seq", "seq"]})
    _check(m, {"q": q, "k": k, "v": v, "keep": keep}, fused=0)


def _renamed(nodes, prefix, keep):
    for n in nodes:
        for lst in (n.input, n.output):
            for i, x in enumerate(lst):
                if x and x not in keep:
                    lst[i] = prefix + x
    return nodes


def test_layers_of_equal_attributes_share_their_per_shape_plans():
    """Two attention layers with the same attributes plan a new shape once (FusedAttention_1._caches: one set of
    per-shape plans for both -- a decoder's layers all read keys of one shape, and a decoder fed its growing past
    has a new shape every step); a layer without the NaN guard (another nan_zero) has plans of its own. Oracle:
    onnxruntime."""
    q, k, v = _qkv()
    io = {"q", "k", "v", "q2", "k2", "v2", "q3", "k3", "v3", "y", "y2", "y3"}
    nodes = _sdpa_nodes("q", "k", "v", "y", scale_split=False)
    nodes += _renamed(_sdpa_nodes("q2", "k2", "v2", "y2", scale_split=False), "L2_", io)
    nodes += _renamed(_sdpa_nodes("q3", "k3", "v3", "y3", scale_split=False, nan_guard=False), "L3_", io)
    feeds = {name: x for i in ("", "2", "3") for name, x in zip((f"q{i}", f"k{i}", f"v{i}"), _qkv())}
    m = make_model(nodes, feeds, ["y", "y2", "y3"], input_shapes={x: SYM4 for x in feeds})
    sess = _session(m)
    assert _ops(sess)["FusedAttention"] == 3, _ops(sess)
    longer = {name: x for i in ("", "2", "3") for name, x in zip((f"q{i}", f"k{i}", f"v{i}"), _qkv(s=S + 3))}
    for f in (feeds, longer):
        for g, w in zip(sess.run(None, f), run_ort(m, f)):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * max(1.0, float(np.max(np.abs(w)))))
    ks = [st[0] for p in sess.plans for st in getattr(p, "steps", ()) if st[6] == "FusedAttention"]
    c = [x._caches() for x in ks]
    assert c[0] is c[1] and c[2] is not c[0]
    assert len(c[0].natives) == 2 and len(c[2].natives) == 2          # two shapes each, planned once


def test_a_call_of_a_known_key_skips_the_resolution(monkeypatch):
    """FusedAttention_1.compute keys a call by its inputs' shapes, strides and dtypes and its int64 inputs' values
    (_call_key): the layers of one decoding step resolve the grouped-query repeat and plan once, the other layers'
    calls run that plan on their own inputs; a new past length (new shape-input values) resolves again. Oracle:
    onnxruntime, each layer's output against its own."""
    from onnxep.ops.onnxep import fused_attention as fa
    io = {"q", "past_k", "past_v", "new_k", "new_v", "y", "cat_k", "cat_v"}
    m1, feeds1 = _gqa_model(2, 3)
    m2, feeds2 = _gqa_model(2, 3)
    renamed = _renamed(list(m2.graph.node), "L2_", set())
    names = {x: "L2_" + x for x in io}
    nodes = list(m1.graph.node) + renamed
    feeds = dict(feeds1, **{names[k]: v for k, v in feeds2.items()})
    outs = ["y", "cat_k", "cat_v", "L2_y", "L2_cat_k", "L2_cat_v"]
    shapes = {"q": ["batch", None, 1, None], "past_k": ["batch", None, "past", None],
              "past_v": ["batch", None, "past", None], "new_k": ["batch", None, 1, None],
              "new_v": ["batch", None, 1, None]}
    m = make_model(nodes, feeds, outs, input_shapes=dict(shapes, **{names[k]: v for k, v in shapes.items()}))
    from onnxep.backends.cpu import device
    monkeypatch.setattr(device, "COMPILED_RUNS", False)      # (every run through compute, none compiled)
    sess = _session(m)
    assert _ops(sess)["FusedAttention"] == 2, _ops(sess)
    resolved = []
    orig = fa.FusedAttention_1._resolve
    monkeypatch.setattr(fa.FusedAttention_1, "_resolve", lambda self, get: (resolved.append(1), orig(self, get))[1])
    longer = {k: np.concatenate([v, v[:, :, :2]], axis=2) if "past" in k else v for k, v in feeds.items()}
    for f, n in ((feeds, 1), (feeds, 1), (longer, 2)):
        for g, w in zip(sess.run(None, f), run_ort(m, f)):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5 * max(1.0, float(np.max(np.abs(w)))))
        assert len(resolved) == n, resolved


def test_the_call_key_tells_a_bf16_session_from_an_fp32_one(monkeypatch):
    """The per-call memo is shared by the nodes of equal attributes, across sessions: a bf16 session's call
    (onnxep.compute_precision=bf16, ops/_bf16.py use_bf16) must not reuse an fp32 session's plan of the same shapes,
    nor the other way round. (bf16 hardware stood in for: a one-query-row step keeps the fp32 kernel either way,
    _bf16.bf16_attention.) Oracle: onnxruntime."""
    from onnxep.ops import _bf16
    monkeypatch.setattr(_bf16._kernels, "bgemm_hw", lambda: True)
    m, feeds = _gqa_model(2, 2)
    so = onnxep.SessionOptions()
    so.add_session_config_entry("onnxep.compute_precision", "bf16")
    sessions = [_session(m), onnxep.InferenceSession(m.SerializeToString(), so)]
    kernels = [st[0] for s in sessions for p in s.plans for st in getattr(p, "steps", ()) if st[6] == "FusedAttention"]
    assert len(kernels) == 2 and kernels[0]._caches() is kernels[1]._caches()
    assert [_bf16.use_bf16(k) for k in kernels] == [False, True]
    want = run_ort(m, feeds)
    for s in sessions:
        np.testing.assert_allclose(s.run(None, feeds)[0], want[0], rtol=2e-5, atol=2e-5)
    assert len(kernels[0]._caches().calls) == 2


def test_grouped_query_k_whose_shape_the_exporter_reads_is_not_repeated():
    """The dynamo exporter's grouped-query K: the repeat Reshape(Expand(Unsqueeze(kv))) is transposed through a 3-D
    view whose shapes it computes from a Shape of the repeated tensor. The fused node reads kv itself; the repeat
    stays for that Shape only, folded into a ShapeSubgraph that runs it on stand-ins (no Expand in the plan, no copy
    made)."""
    kv_heads, rep = 2, 2
    h = kv_heads * rep
    q = RNG.standard_normal((B, h, 1, D)).astype(np.float32)
    feeds = {"q": q, "past_k": RNG.standard_normal((B, kv_heads, S, D)).astype(np.float32),
             "new_k": RNG.standard_normal((B, kv_heads, 1, D)).astype(np.float32),
             "v": RNG.standard_normal((B, h, S + 1, D)).astype(np.float32)}
    i64 = np.int64
    nodes = [helper.make_node("Concat", ["past_k", "new_k"], ["cat_k"], axis=2),
             _c("ax", np.array([2], i64), i64), helper.make_node("Unsqueeze", ["cat_k", "ax"], ["u"]),
             helper.make_node("Shape", ["cat_k"], ["sh"]),
             _c("i01", np.array([0, 1], i64), i64), _c("i23", np.array([2, 3], i64), i64),
             helper.make_node("Gather", ["sh", "i01"], ["bh"]), helper.make_node("Gather", ["sh", "i23"], ["td"]),
             _c("rp", np.array([rep], i64), i64),
             helper.make_node("Concat", ["bh", "rp", "td"], ["es"], axis=0),
             helper.make_node("Expand", ["u", "es"], ["e"]),
             _c("rs", np.array([0, h, -1, D], i64), i64),
             helper.make_node("Reshape", ["e", "rs"], ["kr"]),
             # the 3-D view's shapes from the repeated tensor's shape: s1 = (-1, T, D), s2 = (B, H, D, T)
             helper.make_node("Shape", ["kr"], ["ksh"]),
             _c("g0", np.array([0], i64), i64), _c("g1", np.array([1], i64), i64),
             _c("g2", np.array([2], i64), i64), _c("g3", np.array([3], i64), i64),
             _c("m1", np.array([-1], i64), i64),
             helper.make_node("Gather", ["ksh", "g0"], ["kb"]), helper.make_node("Gather", ["ksh", "g1"], ["kh"]),
             helper.make_node("Gather", ["ksh", "g2"], ["kt"]), helper.make_node("Gather", ["ksh", "g3"], ["kd"]),
             helper.make_node("Concat", ["m1", "kt", "kd"], ["s1"], axis=0),
             helper.make_node("Concat", ["kb", "kh", "kd", "kt"], ["s2"], axis=0),
             *_view_k_attention("kr")]
    m = make_model(nodes, feeds, ["y", "cat_k"],
                   input_shapes={"q": ["batch", h, 1, D], "past_k": ["batch", kv_heads, "past", D],
                                 "new_k": ["batch", kv_heads, 1, D], "v": ["batch", h, "total", D]})
    sess = _check(m, feeds)
    ops = _ops(sess)
    assert ops["Expand"] == 0 and ops["Reshape"] == 0 and ops["Unsqueeze"] == 0, ops
    (fa,) = [st[0] for p in sess.plans for st in p.steps if st[6] == "FusedAttention"]
    assert fa.k_expand == 2 and fa.k_view_at is not None
    (sub,) = [st[0] for p in sess.plans for st in p.steps if st[6] == "ShapeSubgraph"
              and any(s[4] == "Expand" for s in st[0]._steps)]
    assert [s[4] for s, stand in zip(sub._steps, sub._standin) if stand] == ["Unsqueeze", "Expand", "Reshape"]
    # a longer past: the body runs again on stand-ins of the new shapes
    feeds2 = dict(feeds, past_k=RNG.standard_normal((B, kv_heads, 2 * S, D)).astype(np.float32),
                  v=RNG.standard_normal((B, h, 2 * S + 1, D)).astype(np.float32))
    want = run_ort(m, feeds2)
    for g, w in zip(sess.run(None, feeds2), want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
