"""Greedy decoding loops on the committed 1-layer decoders (tests/models/zoo), each step's present key / values fed back
as the next step's past: onnxep appends a step's rows in place (ops/_grow.py, onnxep.append_in_place) and must give
onnxruntime's logits and presents at every step (the oracle: onnxruntime's CPU provider running the same loop), also
when one past is continued twice, from two threads at once, or with the in-place append turned off."""
import threading
from pathlib import Path

import numpy as np
import pytest

import onnxep
from onnxep.ops import _grow

ort = pytest.importorskip("onnxruntime")

ZOO = Path(__file__).parent / "zoo"
DECODERS = ["gpt2_1layer_past.dynamo", "gpt2_1layer_past.torchscript", "llama_1layer_past.dynamo",
            "llama_1layer_past.torchscript", "whisper_1layer_past.dynamo"]
STEPS = 12


def _start(name):
    data = np.load(ZOO / f"{name}.npz")
    return {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}


def _session(name, append="1", threads=1):
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = threads
    if append is not None:
        so.add_session_config_entry("onnxep.append_in_place", append)
    return onnxep.InferenceSession(str(ZOO / f"{name}.onnx"), so)


def _ort(name):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(str(ZOO / f"{name}.onnx"), so, providers=["CPUExecutionProvider"])


def _step(sess, feeds, tokens=None):
    """One decoding step: (outputs by name, the next step's feeds: the argmax token unless `tokens`, the presents as
    the past, the mask one longer)."""
    names = [o.name for o in sess.get_outputs()]
    got = dict(zip(names, sess.run(None, feeds)))
    ids = "input_ids" if "input_ids" in feeds else "decoder_input_ids"     # (a seq2seq decoder's)
    batch = feeds[ids].shape[0]
    nxt = dict(feeds)           # (a seq2seq decoder's cross-attention keys / values stay)
    nxt[ids] = (np.argmax(got["logits"][:, -1], axis=-1).reshape(batch, 1).astype(np.int64) if tokens is None
                else tokens)
    if "attention_mask" in feeds:
        nxt["attention_mask"] = np.ones((batch, feeds["attention_mask"].shape[1] + 1), np.int64)
    for n, v in got.items():
        if n.startswith("present"):
            nxt[n.replace("present", "past_key_values")] = v
    return got, nxt


def _ids(feeds):
    return feeds["input_ids"] if "input_ids" in feeds else feeds["decoder_input_ids"]


def _key0(outputs):
    """The first layer's present key (present.0.key, or a seq2seq decoder's present.0.decoder.key)."""
    return "present.0.key" if "present.0.key" in outputs else "present.0.decoder.key"


def _close(got, want, what):
    for n, w in want.items():
        np.testing.assert_allclose(got[n], w, rtol=1e-4, atol=1e-5, err_msg=f"{what}: {n}")


def _appended(sess, oracle, name, step=_step):
    """Steps of a decoding loop whose present key shares its buffer with the step before's, every step checked
    against onnxruntime's."""
    feeds = ours = _start(name)
    appended, last = 0, None
    for i in range(STEPS):
        want, feeds = _step(oracle, feeds)
        got, ours = step(sess, ours, _ids(feeds))
        _close(got, want, f"{name} step {i}")
        key = got[_key0(got)]
        appended += last is not None and not key.flags.c_contiguous and np.shares_memory(key, last)
        last = key
    return appended


@pytest.mark.parametrize("name", DECODERS)
def test_a_decoding_loop_matches_onnxruntime_and_appends_in_place(name):
    # the first steps of each new length are recorded by the memory planner (plain outputs); from the steps its
    # signature family serves, each step's rows go after the last step's, in the same buffer
    assert _appended(_session(name), _ort(name), name) >= STEPS // 2


@pytest.mark.parametrize("name", ["gpt2_1layer_past.dynamo", "llama_1layer_past.dynamo",
                                  "llama_1layer_past.torchscript"])
def test_batch_one_steps_plan_a_new_length_from_the_last(name, monkeypatch):
    """Batch 1 (the fixtures' first row): each step's attention, reading K and V in their buffer with spare rows and a
    mask broadcast over all but its key dim, takes the last step's plan with its key count written in
    (fused_attention._by_length) instead of resolving anew; every step's logits and presents are onnxruntime's."""
    from onnxep.ops.onnxep import fused_attention as fa
    resolved, by_length = [], []
    orig_resolve, orig_by = fa.FusedAttention_1._resolve, fa._by_length
    def resolve(self, get):
        resolved.append(1)
        return orig_resolve(self, get)

    def by(*a):
        r = orig_by(*a)
        by_length.append(r is not None)
        return r
    monkeypatch.setattr(fa.FusedAttention_1, "_resolve", resolve)
    monkeypatch.setattr(fa, "_by_length", by)
    sess, oracle = _session(name), _ort(name)
    feeds = {k: v[:1] for k, v in _start(name).items()}
    ours = feeds
    for i in range(STEPS):
        want, feeds = _step(oracle, feeds)
        got, ours = _step(sess, ours, _ids(feeds))
        _close(got, want, f"{name} step {i}")
    assert sum(by_length) >= STEPS // 2, (by_length, len(resolved))
    assert len(resolved) < STEPS // 2, (by_length, len(resolved))


@pytest.mark.parametrize("name", ["gpt2_1layer_past.dynamo", "llama_1layer_past.dynamo"])
def test_a_left_padded_batch_keeps_each_rows_mask_as_the_cache_grows(name):
    """Batch 2, the second row left-padded (its first two positions masked out, each step's mask one column longer):
    the steps planned from the last step's (fused_attention._by_length) find each row's mask anew -- the rows lie the
    key count apart -- so every step's logits and presents are onnxruntime's."""
    sess, oracle = _session(name), _ort(name)
    start = _start(name)
    mask = np.ones_like(start["attention_mask"])
    mask[1, :2] = 0
    feeds = dict(start, attention_mask=mask)
    ours = dict(feeds)
    for i in range(STEPS):
        want = dict(zip([o.name for o in oracle.get_outputs()], oracle.run(None, feeds)))
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, ours)))
        _close(got, want, f"{name} step {i}")
        toks = np.argmax(want["logits"][:, -1], axis=-1).reshape(2, 1).astype(np.int64)
        grow = np.concatenate([feeds["attention_mask"], np.ones((2, 1), np.int64)], axis=1)
        feeds = dict(feeds, input_ids=toks, attention_mask=grow,
                     **{n.replace("present", "past_key_values"): v for n, v in want.items() if n.startswith("present")})
        ours = dict(ours, input_ids=toks, attention_mask=grow,
                    **{n.replace("present", "past_key_values"): v for n, v in got.items() if n.startswith("present")})


@pytest.mark.parametrize("name", DECODERS[:1] + DECODERS[2:3])
def test_turned_off_every_output_is_c_contiguous(name):
    sess, oracle = _session(name, "0"), _ort(name)
    feeds = ours = _start(name)
    for step in range(STEPS):
        want, feeds = _step(oracle, feeds)
        got, ours = _step(sess, ours, _ids(feeds))
        _close(got, want, f"{name} step {step}")
        assert all(v.flags.c_contiguous for v in got.values())


def _warm(sess, feeds, steps=STEPS):
    """The feeds after `steps` steps of sess (its presents are views appended in place by then)."""
    for _ in range(steps):
        _, feeds = _step(sess, feeds)
    return feeds


@pytest.mark.parametrize("name", DECODERS[:1] + DECODERS[3:])
def test_one_past_continued_twice_gives_both_continuations(name):
    """Two continuations of one past (beam search): the first appends in place, the second finds the buffer taken
    past this past's rows and copies; each equals onnxruntime's on the same feeds, and the first's outputs keep
    their values after the second run."""
    sess, oracle = _session(name), _ort(name)
    feeds = _warm(sess, _start(name))
    plain = {k: np.ascontiguousarray(v) for k, v in feeds.items()}
    ids = "input_ids" if "input_ids" in feeds else "decoder_input_ids"
    key = _key0([o.name for o in sess.get_outputs()])
    past = key.replace("present", "past_key_values")
    assert _grow.is_view(feeds[past])
    a = dict(feeds, **{ids: np.full_like(feeds[ids], 3)})
    b = dict(feeds, **{ids: np.full_like(feeds[ids], 7)})
    got_a, _ = _step(sess, a)
    kept = {n: v.copy() for n, v in got_a.items()}
    got_b, _ = _step(sess, b)
    _close(got_a, kept, f"{name}: continuation a after b ran")
    _close(got_a, _step(oracle, dict(plain, **{ids: a[ids]}))[0], f"{name}: continuation a")
    _close(got_b, _step(oracle, dict(plain, **{ids: b[ids]}))[0], f"{name}: continuation b")
    assert np.shares_memory(got_a[key], feeds[past]) and not np.shares_memory(got_b[key], feeds[past])
    # the past itself still holds its rows
    np.testing.assert_array_equal(feeds[past], plain[past])


def test_two_threads_continuing_one_past_at_once():
    """Runs on two threads fed the same past view, each of 20 pasts whose buffer can take the next rows: at most one
    of them claims the rows; both get onnxruntime's results."""
    name = "llama_1layer_past.dynamo"
    sess, oracle = _session(name), _ort(name)
    starts = [_warm(sess, _start(name)) for _ in range(20)]
    assert all(_grow.is_view(s["past_key_values.0.key"]) for s in starts)
    plain = {k: np.ascontiguousarray(v) for k, v in starts[0].items()}
    want = {t: _step(oracle, dict(plain, input_ids=np.full_like(plain["input_ids"], t)))[0] for t in (3, 7)}
    errors = []
    barrier = threading.Barrier(2)
    claimed = [[False, False] for _ in starts]     # per past, per thread: its present in the past's buffer

    def work(t):
        try:
            for i, start in enumerate(starts):
                barrier.wait()
                got, _ = _step(sess, dict(start, input_ids=np.full_like(start["input_ids"], t)))
                _close(got, want[t], f"thread {t}")
                claimed[i][t == 7] = np.shares_memory(got["present.0.key"], start["past_key_values.0.key"])
        except BaseException as e:       # (reported below: a failed assert in a thread fails nothing by itself)
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(t,)) for t in (3, 7)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]
    assert all(a + b == 1 for a, b in claimed), claimed      # one run appended in place, the other copied


def test_a_strided_array_of_the_callers_own_is_copied_and_runs():
    """A non-contiguous past the caller made (not a view onnxep handed out) is taken as any feed: copied."""
    name = "gpt2_1layer_past.dynamo"
    sess, oracle = _session(name), _ort(name)
    feeds = _start(name)
    wide = {k: np.concatenate([v, np.zeros_like(v)], axis=2)[:, :, :v.shape[2]] if k.startswith("past") else v
            for k, v in feeds.items()}
    assert not wide["past_key_values.0.key"].flags.c_contiguous
    _close(_step(sess, wide)[0], _step(oracle, feeds)[0], name)


def test_the_grow_buffers_views():
    """ops/_grow.py on its own (oracle: numpy.concatenate): appends go after the filled rows of the same buffer, the
    views handed out keep their values, a view reshaped in place or of another buffer is not taken for one."""
    rng = np.random.default_rng(0)
    past = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    views, want = [], [past]

    def check(*_):
        pass

    x = past
    for step in range(40):
        new = rng.standard_normal((2, 3, 1, 5)).astype(np.float32)
        shape = list(x.shape)
        shape[2] += 1
        y = _grow.concat([x, new], 2, tuple(shape), np.float32, 1, check)
        want.append(np.concatenate([want[-1], new], axis=2))
        np.testing.assert_array_equal(y, want[-1])
        assert _grow.is_view(y) and _grow.flat(y) is not None
        if step and y.shape[2] <= 4 + _grow.spare_rows(5) + 1:
            assert np.shares_memory(y, views[-1])       # appended in the first buffer while it had spare rows
        views.append(y)
        x = y
    for v, w in zip(views, want[1:]):
        np.testing.assert_array_equal(v, w)
    assert not _grow.is_view(past) and _grow.flat(past) is None
    last = views[-1]
    last.shape = (2, 3, last.shape[2] * 5)
    assert not _grow.is_view(last)
    assert _grow.spare_rows(0) == _grow.MIN_SPARE and _grow.spare_rows(10 ** 6) == _grow.MAX_SPARE


@pytest.mark.parametrize("new_rows", [1, 3, 120])
@pytest.mark.parametrize("strided_new", [False, True])
def test_appended_rows_on_both_sides_of_the_small_append_size(new_rows, strided_new):
    """Rows appended to a view (ops/_grow.py): up to SMALL_APPEND bytes by numpy's assignment, more by join_into
    (120 rows of 2 x 3 x 32 floats: 92 KB); a new input that is itself strided is read through its strides. Oracle:
    numpy.concatenate; the appends land in the first buffer (its 256 spare rows cover them)."""
    rng = np.random.default_rng(1)
    past = rng.standard_normal((2, 3, 1000, 32)).astype(np.float32)
    first = _grow.concat([past[:, :, :999], past[:, :, 999:]], 2, (2, 3, 1000, 32), np.float32, 2, lambda *_: None)
    x, want = first, past
    for _ in range(2):
        wide = rng.standard_normal((2, 3, new_rows, 64)).astype(np.float32)
        new = wide[..., ::2] if strided_new else np.ascontiguousarray(wide[..., ::2])
        assert (new.nbytes <= _grow.SMALL_APPEND) == (new_rows < 120)
        shape = (2, 3, x.shape[2] + new_rows, 32)
        y = _grow.concat([x, new], 2, shape, np.float32, 2, lambda *_: None)
        want = np.concatenate([want, new], axis=2)
        np.testing.assert_array_equal(y, want)
        assert np.shares_memory(y, first)
        x = y
    np.testing.assert_array_equal(first, past)


def test_a_concat_output_read_by_another_op_stays_c_contiguous():
    """The in-place append needs every reader of the output to take strided views (Kernel.strided_inputs): a Relu
    reading the cache too keeps the Concat's output a plain array (oracle: numpy)."""
    from onnx import TensorProto, helper
    g = helper.make_graph(
        [helper.make_node("Concat", ["past", "new"], ["present"], axis=2),
         helper.make_node("Relu", ["present"], ["r"])], "g",
        [helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, 2, "s", 4]),
         helper.make_tensor_value_info("new", TensorProto.FLOAT, [1, 2, 1, 4])],
        [helper.make_tensor_value_info("present", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxep.InferenceSession(m.SerializeToString())
    rng = np.random.default_rng(1)
    past = rng.standard_normal((1, 2, 3, 4)).astype(np.float32)
    for _ in range(8):
        new = rng.standard_normal((1, 2, 1, 4)).astype(np.float32)
        present, r = sess.run(None, {"past": past, "new": new})
        want = np.concatenate([past, new], axis=2)
        np.testing.assert_array_equal(present, want)
        np.testing.assert_array_equal(r, np.maximum(want, 0))
        assert present.flags.c_contiguous
        past = present


def test_an_epcontext_model_appends_too(tmp_path):
    """A session on the EPContext model onnxep wrote (its plans rebuilt from the blob) marks the same Concats."""
    name = "gpt2_1layer_past.dynamo"
    so = onnxep.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_file_path", str(tmp_path / "ctx.onnx"))
    onnxep.InferenceSession(str(ZOO / f"{name}.onnx"), so)
    sess = onnxep.InferenceSession(str(tmp_path / "ctx.onnx"))
    assert _appended(sess, _ort(name), name) >= STEPS // 2


def test_outputs_bound_by_iobinding_are_written_where_bound():
    """An IOBinding run writes its outputs as bound (no view with spare rows); the loop still matches onnxruntime."""
    name = "llama_1layer_past.dynamo"

    def bound_step(sess, feeds, tokens):
        b = sess.io_binding()
        for k, v in feeds.items():
            b.bind_cpu_input(k, v)
        names = [o.name for o in sess.get_outputs()]
        for n in names:
            b.bind_output(n)
        sess.run_with_iobinding(b)
        got = dict(zip(names, b.copy_outputs_to_cpu()))
        nxt = dict(feeds, input_ids=tokens,
                   attention_mask=np.ones((tokens.shape[0], feeds["attention_mask"].shape[1] + 1), np.int64))
        nxt.update({n.replace("present", "past_key_values"): v for n, v in got.items() if n.startswith("present")})
        return got, nxt

    assert _appended(_session(name), _ort(name), name, bound_step) == 0


def test_a_bad_value_is_refused_naming_the_entry():
    with pytest.raises(onnxep.InvalidArgument, match="onnxep.append_in_place='yes'"):
        _session("gpt2_1layer_past.dynamo", "yes")
