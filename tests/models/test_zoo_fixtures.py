"""Tiny real exported models (tests/models/zoo) against onnxruntime's outputs stored beside them.

Oracle: onnxruntime 1.32 (CPU provider), run when the fixtures were made; its outputs are stored in the .npz, so this
test needs neither torch nor onnxruntime. The fixtures are what ``python bench/zoo/export.py --fixtures
tests/models/zoo`` writes (torch 2.13.0 + transformers, random seeded weights, node metadata stripped): a 1-layer BERT,
a 1-layer GPT-2 and a 1-layer LLaMA (grouped-query attention, rotary) taking past key/values, each from both exporters
(torch.onnx dynamo and TorchScript); from the dynamo exporter a 1-layer Whisper decoder step (its self-attention cache
grown, its cross-attention keys / values fed), a small plain-torch ResNet, a diffusion-style UNet
(GroupNorm, SiLU, cross-attention, ConvTranspose, nearest Resize), a 1-layer DeiT and a small EfficientNet. The stored
inputs are at other batch / sequence sizes than the export's, so the dynamic axes are exercised.

Each model runs with the reference fallback on, and with it off (session.disable_cpu_ep_fallback=1); outputs must have
onnxruntime's shape and dtype and max |onnxep - ort| / max |ort| <= the fixture's tolerance (1e-4). A case that does
not work yet is a strict xfail naming why, so it fails (and the mark must go) once it starts passing."""
import json
from pathlib import Path

import numpy as np
import pytest

import onnxep

ZOO = Path(__file__).parent / "zoo"
INDEX = json.loads((ZOO / "index.json").read_text())
ENTRIES = {e["name"]: e for e in INDEX["models"] if e["status"] == "ok"}

EXPECTED = {
    "bert_1layer.dynamo", "bert_1layer.torchscript", "gpt2_1layer_past.dynamo", "gpt2_1layer_past.torchscript",
    "llama_1layer_past.dynamo", "llama_1layer_past.torchscript", "resnet_tiny.dynamo", "unet_tiny.dynamo",
    "deit_1layer.dynamo", "efficientnet_tiny.dynamo", "whisper_1layer_past.dynamo",
}

# known failures: fixture -> reason (strict xfail: the test fails once the case passes, and the entry must go)
FAILS_WITH_FALLBACK = {}
FAILS_WITHOUT_FALLBACK = {}


def _cases(known):
    return [pytest.param(name, id=name, marks=pytest.mark.xfail(strict=True, reason=known[name]))
            if name in known else pytest.param(name, id=name) for name in sorted(ENTRIES)]


def _load(name):
    entry = ENTRIES[name]
    data = np.load(ZOO / entry["data"])
    feeds = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("input:")}
    want = {k.split(":", 1)[1]: data[k] for k in data.files if k.startswith("output:")}
    return entry, ZOO / entry["file"], feeds, want


def _rel_err(got, want):
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    return float(np.max(np.abs(g - w))) / max(float(np.max(np.abs(w))), 1e-30)


def _check(name, fallback):
    entry, path, feeds, want = _load(name)
    so = onnxep.SessionOptions()
    if not fallback:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    sess = onnxep.InferenceSession(str(path), so)
    if not fallback:
        assert set(sess.node_assignment.values()) == {"cpu"}
    names = [o.name for o in sess.get_outputs()]
    assert names == list(want), (names, list(want))
    got = sess.run(None, feeds)
    for n, g in zip(names, got):
        w = want[n]
        assert g.shape == w.shape and g.dtype == w.dtype, (n, g.shape, g.dtype, w.shape, w.dtype)
        err = _rel_err(g, w)
        assert err <= entry["tolerance"], f"{name} output {n}: max diff / max |ort| = {err:.2e}"
    return sess


def test_the_fixtures_are_all_there_and_small():
    assert set(ENTRIES) == EXPECTED, sorted(set(ENTRIES) ^ EXPECTED)
    total = sum(p.stat().st_size for p in ZOO.iterdir())
    assert total < 1.7e6, f"{total} bytes of fixtures"
    for e in ENTRIES.values():
        assert (ZOO / e["file"]).is_file() and (ZOO / e["data"]).is_file()
        # the reference outputs are not degenerate (a constant output would check nothing)
        assert e["min_distinct"] >= 0.2, (e["name"], e["min_distinct"])


@pytest.mark.parametrize("name", _cases(FAILS_WITH_FALLBACK))
def test_matches_onnxruntime_with_the_fallback_on(name):
    _check(name, fallback=True)


@pytest.mark.parametrize("name", _cases(FAILS_WITHOUT_FALLBACK))
def test_matches_onnxruntime_with_the_fallback_off(name):
    _check(name, fallback=False)


def test_past_key_values_grow_by_the_new_tokens():
    """The decoders' present key/values are the past ones with the new step appended (a real decoding step)."""
    for name in ("gpt2_1layer_past.dynamo", "llama_1layer_past.torchscript"):
        _, path, feeds, want = _load(name)
        sess = onnxep.InferenceSession(str(path))
        got = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        past, present = feeds["past_key_values.0.key"], got["present.0.key"]
        step = feeds["input_ids"].shape[1]
        assert present.shape[2] == past.shape[2] + step
        np.testing.assert_allclose(present[:, :, :past.shape[2]], past, rtol=0, atol=0)
        np.testing.assert_allclose(present, want["present.0.key"], rtol=1e-4, atol=1e-5)
