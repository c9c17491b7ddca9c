"""Export a zoo of real architectures to ONNX with torch.onnx, as users export them, into a cache folder.

Each model is a transformers class built from a small but real config (random init, seeded) or a plain-torch net
(a ResNet, a MobileNetV3 and a diffusion-style UNet: there is no CPU torchvision). Both exporters are tried: the
dynamo one (``torch.onnx.export(..., dynamo=True)``) and the classic TorchScript one (``dynamo=False``); the files
are ``<arch>.<exporter>.onnx`` with dynamic batch / sequence axes as the exporter writes them. For each file the
folder also holds ``<arch>.<exporter>.npz`` (``input:<name>`` seeded reference inputs, ``output:<name>``
onnxruntime's outputs on them) and ``index.json`` lists every (arch, exporter): status, why it failed, opset, node
count, input shapes, tolerance, and how far onnxruntime is from torch on the same inputs (a check of the export
itself, not of onnxep).

Needs torch 2.13.0 (CPU), transformers, onnxscript, onnx and onnxruntime: the ``zoo`` extra, in a venv of its own
(never the test venv). ``bench/zoo/check.py`` then runs every cached model with onnxep, without torch.

    python bench/zoo/export.py                   # every architecture, both exporters -> ~/.cache/onnxep/zoo
    python bench/zoo/export.py --only llama_past --out /tmp/zoo
    python bench/zoo/export.py --exporter dynamo --list
    python bench/zoo/export.py --fixtures tests/models/zoo   # the tiny committed test fixtures
"""
from __future__ import annotations

import argparse
import contextlib
import inspect
import io
import json
import logging
import math
import os
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

DEFAULT_OUT = Path(os.environ.get("ONNXEP_ZOO", Path.home() / ".cache" / "onnxep" / "zoo"))
EXPORTERS = ("dynamo", "torchscript")
#: max |onnxep - onnxruntime| / max |onnxruntime| a model's outputs may differ by (check.py)
DEFAULT_TOL = 1e-4
SEED = 0

# shapes the model is exported with, and the (different) shapes of the stored reference inputs: running the
# references at other sizes checks that the dynamic axes really are dynamic
EXPORT_DIMS = dict(batch=2, seq=16, past=8, step=3)
REF_DIMS = dict(batch=3, seq=11, past=7, step=1)
#: the committed fixtures' reference sizes (smaller files)
FIXTURE_DIMS = dict(batch=2, seq=7, past=5, step=1)


@dataclass
class Built:
    """What a builder returns: the module (outputs a tuple of tensors), the input names with their dynamic axes,
    the output names, and make(rng, dims) -> {input name: numpy array} (dims as EXPORT_DIMS)."""
    module: object
    inputs: dict          # name -> {axis: dim name}
    outputs: list
    make: Callable
    tolerance: float = DEFAULT_TOL
    note: str = ""
    max_positions: int | None = None     # a decoder's longest sequence (past + new tokens), when it has one


@dataclass
class Arch:
    name: str
    family: str
    build: Callable       # (**kw) -> Built
    kw: dict = field(default_factory=dict)
    exporters: tuple = EXPORTERS


ARCHS: dict[str, Arch] = {}
#: the tiny variants committed as test fixtures (tests/models/zoo): name -> (arch, builder kwargs, exporters)
FIXTURES: dict[str, Arch] = {}


def arch(name, family, **kw):
    def deco(fn):
        ARCHS[name] = Arch(name, family, fn, kw)
        return fn
    return deco


# ---------------------------------------------------------------------------------------------------------- helpers
def _torch():
    import torch
    return torch


class _Wrap:
    """An nn.Module calling fn(model, **named inputs) -> tuple of tensors (built lazily: torch imported on use)."""

    def __new__(cls, model, names, fn):
        torch = _torch()

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def call(self, *args):
                out = fn(self.model, **dict(zip(names, args)))
                return tuple(out) if isinstance(out, (tuple, list)) else (out,)

        # forward gets one named parameter per input (torch.export maps dynamic shapes onto parameter names)
        params = [f"{''.join(c if c.isalnum() else '_' for c in n)}" for n in names]
        scope = {}
        exec(f"def forward(self, {', '.join(params)}):\n    return self.call({', '.join(params)})\n", scope)
        Wrap.forward = scope["forward"]
        return Wrap().eval()


def _ids(rng, b, s, vocab, low=3):
    return rng.integers(low, vocab, size=(b, s), dtype=np.int64)


def _mask(b, s, pad_row=True):
    m = np.ones((b, s), dtype=np.int64)
    if pad_row and b > 1 and s > 4:
        m[1, -(s // 4):] = 0          # the second sequence is shorter: padding the mask must hide
    return m


def _text_inputs(vocab, token_types=False):
    names = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    if token_types:
        names["token_type_ids"] = {0: "batch", 1: "sequence"}

    def make(rng, d):
        b, s = d["batch"], d["seq"]
        feeds = {"input_ids": _ids(rng, b, s, vocab), "attention_mask": _mask(b, s)}
        if token_types:
            tt = np.zeros((b, s), dtype=np.int64)
            tt[:, s // 2:] = 1
            feeds["token_type_ids"] = tt
        return feeds
    return names, make


def _image_inputs(size, channels=3, name="pixel_values"):
    names = {name: {0: "batch"}}

    def make(rng, d):
        return {name: rng.standard_normal((d["batch"], channels, size, size)).astype(np.float32)}
    return names, make


def _seeded(ctor, *a, **k):
    torch = _torch()
    torch.manual_seed(SEED)
    m = ctor(*a, **k)
    return m.eval()


def _hf(cls_name, config_name, **cfg):
    import transformers
    config = getattr(transformers, config_name)(**cfg)
    return _seeded(getattr(transformers, cls_name), config), config


def _encoder(cls_name, config_name, vocab=1000, token_types=False, outputs=("last_hidden_state",), **cfg):
    model, _ = _hf(cls_name, config_name, vocab_size=vocab, **cfg)
    names, make = _text_inputs(vocab, token_types)

    def fn(m, **kw):
        o = m(**kw)
        return tuple(getattr(o, n) for n in outputs)
    return Built(_Wrap(model, list(names), fn), names, list(outputs), make)


# ------------------------------------------------------------------------------------------------- text encoders
@arch("bert", "text-encoder")
def bert(layers=2, hidden=64, vocab=1000):
    return _encoder("BertModel", "BertConfig", vocab, True, ("last_hidden_state", "pooler_output"),
                    hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                    intermediate_size=hidden * 4, max_position_embeddings=128)


@arch("distilbert", "text-encoder")
def distilbert(layers=2, hidden=64):
    return _encoder("DistilBertModel", "DistilBertConfig", dim=hidden, n_layers=layers, n_heads=4,
                    hidden_dim=hidden * 4, max_position_embeddings=128)


@arch("roberta", "text-encoder")
def roberta(layers=2, hidden=64):
    return _encoder("RobertaModel", "RobertaConfig", outputs=("last_hidden_state", "pooler_output"),
                    hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                    intermediate_size=hidden * 4, max_position_embeddings=130, pad_token_id=1)


@arch("albert", "text-encoder")
def albert(layers=2, hidden=64):
    return _encoder("AlbertModel", "AlbertConfig", outputs=("last_hidden_state", "pooler_output"),
                    embedding_size=32, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                    intermediate_size=hidden * 4, max_position_embeddings=128)


@arch("electra", "text-encoder")
def electra(layers=2, hidden=64):
    return _encoder("ElectraModel", "ElectraConfig", token_types=True, embedding_size=32, hidden_size=hidden,
                    num_hidden_layers=layers, num_attention_heads=4, intermediate_size=hidden * 4,
                    max_position_embeddings=128)


@arch("deberta_v2", "text-encoder")
def deberta_v2(layers=2, hidden=64):
    # the DeBERTa-v3 layout: relative attention with log buckets, shared keys, p2c + c2p
    return _encoder("DebertaV2Model", "DebertaV2Config", hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=4, intermediate_size=hidden * 4, max_position_embeddings=128,
                    relative_attention=True, position_buckets=32, max_relative_positions=-1,
                    pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm", share_att_key=True,
                    position_biased_input=False, type_vocab_size=0)


@arch("minilm_sentence", "text-encoder")
def minilm_sentence(layers=2, hidden=128, heads=4, vocab=1000, positions=128):
    """A MiniLM-style sentence encoder (all-MiniLM-L6-v2's shape, narrower): BERT, then mean pooling over the
    attention mask and L2 normalization, as sentence-transformers exports it."""
    torch = _torch()
    model, _ = _hf("BertModel", "BertConfig", vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                   num_attention_heads=heads, intermediate_size=hidden * 4, max_position_embeddings=positions)
    names, make = _text_inputs(vocab, True)

    def fn(m, input_ids, attention_mask, token_type_ids):
        h = m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
        w = attention_mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * w).sum(1) / torch.clamp(w.sum(1), min=1e-9)
        return h, torch.nn.functional.normalize(pooled, p=2, dim=1)
    return Built(_Wrap(model, list(names), fn), names, ["token_embeddings", "sentence_embedding"], make)


@arch("modernbert", "text-encoder")
def modernbert(layers=3, hidden=64):
    """ModernBERT: rotary embeddings, GeGLU, local (windowed) attention every layer but each third's global."""
    return _encoder("ModernBertModel", "ModernBertConfig", hidden_size=hidden, num_hidden_layers=layers,
                    num_attention_heads=4, intermediate_size=hidden * 2, global_attn_every_n_layers=3,
                    local_attention=8, max_position_embeddings=128, pad_token_id=0)


# ------------------------------------------------------------------------------------------------------ decoders
def _causal_lm(cls_name, config_name, past=False, vocab=1000, **cfg):
    torch = _torch()
    import transformers
    model, config = _hf(cls_name, config_name, vocab_size=vocab, **cfg)
    if not past:
        names, make = _text_inputs(vocab)

        def fn(m, input_ids, attention_mask):
            return m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits
        return Built(_Wrap(model, list(names), fn), names, ["logits"], make)

    n_layers = config.num_hidden_layers
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    names = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total_sequence"}}
    for i in range(n_layers):
        names[f"past_key_values.{i}.key"] = {0: "batch", 2: "past_sequence"}
        names[f"past_key_values.{i}.value"] = {0: "batch", 2: "past_sequence"}
    outputs = ["logits"] + [f"present.{i}.{kv}" for i in range(n_layers) for kv in ("key", "value")]

    def make(rng, d):
        b, s, p = d["batch"], d["step"], d["past"]
        feeds = {"input_ids": _ids(rng, b, s, vocab), "attention_mask": np.ones((b, p + s), dtype=np.int64)}
        for i in range(n_layers):
            for kv in ("key", "value"):
                feeds[f"past_key_values.{i}.{kv}"] = rng.standard_normal((b, kv_heads, p, head_dim)).astype(
                    np.float32)
        return feeds

    def fn(m, input_ids, attention_mask, **kv):
        data = [(kv[f"past_key_values.{i}.key"], kv[f"past_key_values.{i}.value"]) for i in range(n_layers)]
        cache = transformers.DynamicCache(ddp_cache_data=data, config=m.config)
        key = "cache" if "cache" in inspect.signature(m.forward).parameters else "past_key_values"
        out = m(input_ids=input_ids, attention_mask=attention_mask, use_cache=True, **{key: cache})
        present = getattr(out, key)
        flat = []
        for layer in present.layers:
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)
    del torch
    return Built(_Wrap(model, list(names), fn), names, outputs, make)


def _gpt2_cfg(layers, hidden):
    return dict(n_embd=hidden, n_layer=layers, n_head=4, n_positions=128)


@arch("gpt2", "decoder")
def gpt2(layers=2, hidden=64):
    return _causal_lm("GPT2LMHeadModel", "GPT2Config", **_gpt2_cfg(layers, hidden))


@arch("gpt2_past", "decoder")
def gpt2_past(layers=2, hidden=64, vocab=1000):
    return _causal_lm("GPT2LMHeadModel", "GPT2Config", past=True, vocab=vocab, **_gpt2_cfg(layers, hidden))


@arch("opt", "decoder")
def opt(layers=2, hidden=64):
    return _causal_lm("OPTForCausalLM", "OPTConfig", hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=4, ffn_dim=hidden * 4, word_embed_proj_dim=hidden,
                      max_position_embeddings=128)


@arch("gpt_neo", "decoder")
def gpt_neo(layers=2, hidden=64):
    return _causal_lm("GPTNeoForCausalLM", "GPTNeoConfig", hidden_size=hidden, num_layers=layers, num_heads=4,
                      attention_types=[[["global", "local"], layers // 2]] if layers % 2 == 0
                      else [[["global"], layers]], window_size=8, max_position_embeddings=128)


def _llama_cfg(layers, hidden):
    return dict(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=hidden * 3, max_position_embeddings=256, rms_norm_eps=1e-6,
                tie_word_embeddings=False)


@arch("llama", "decoder")
def llama(layers=2, hidden=64):
    """RMSNorm, rotary embeddings, SiLU-gated MLP, grouped-query attention (2 key/value heads for 4 heads)."""
    return _causal_lm("LlamaForCausalLM", "LlamaConfig", **_llama_cfg(layers, hidden))


@arch("llama_past", "decoder")
def llama_past(layers=2, hidden=64, vocab=1000):
    return _causal_lm("LlamaForCausalLM", "LlamaConfig", past=True, vocab=vocab, **_llama_cfg(layers, hidden))


@arch("qwen2_past", "decoder")
def qwen2_past(layers=2, hidden=64):
    """Qwen2: LLaMA's blocks with biased q/k/v projections and grouped-query attention, one step with past."""
    return _causal_lm("Qwen2ForCausalLM", "Qwen2Config", past=True, **_llama_cfg(layers, hidden))


@arch("mistral", "decoder")
def mistral(layers=2, hidden=64):
    """Mistral: LLaMA's blocks with sliding-window attention (window 8, shorter than the sequence)."""
    return _causal_lm("MistralForCausalLM", "MistralConfig", sliding_window=8, **_llama_cfg(layers, hidden))


@arch("gemma2", "decoder")
def gemma2(layers=2, hidden=64):
    """Gemma 2: alternating sliding / global attention, logit soft-capping, GeLU-tanh gated MLP, pre+post norms."""
    return _causal_lm("Gemma2ForCausalLM", "Gemma2Config", head_dim=16, sliding_window=8,
                      **_llama_cfg(layers, hidden))


@arch("phi", "decoder")
def phi(layers=2, hidden=64):
    """Phi-2: partial rotary embeddings, parallel attention and MLP blocks, GeLU."""
    return _causal_lm("PhiForCausalLM", "PhiConfig", hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=4, intermediate_size=hidden * 4, partial_rotary_factor=0.5,
                      max_position_embeddings=128)


@arch("gptj", "decoder")
def gptj(layers=2, hidden=64):
    """GPT-J: interleaved rotary embeddings on part of each head, parallel attention and MLP."""
    return _causal_lm("GPTJForCausalLM", "GPTJConfig", n_embd=hidden, n_layer=layers, n_head=4, rotary_dim=8,
                      n_positions=128)


@arch("bloom", "decoder")
def bloom(layers=2, hidden=64):
    """BLOOM: ALiBi position biases instead of position embeddings, embedding LayerNorm."""
    return _causal_lm("BloomForCausalLM", "BloomConfig", hidden_size=hidden, n_layer=layers, n_head=4)


@arch("falcon", "decoder")
def falcon(layers=2, hidden=64):
    """Falcon: multi-query attention (one key/value head), rotary, parallel attention."""
    return _causal_lm("FalconForCausalLM", "FalconConfig", hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=4, multi_query=True, new_decoder_architecture=False, parallel_attn=True,
                      alibi=False, bias=False)


@arch("qwen3_past", "decoder")
def qwen3_past(layers=2, hidden=64):
    """Qwen3: LLaMA's blocks with an RMSNorm on each head's queries and keys, one step with past."""
    return _causal_lm("Qwen3ForCausalLM", "Qwen3Config", past=True, head_dim=16, **_llama_cfg(layers, hidden))


@arch("gemma3", "decoder")
def gemma3(layers=2, hidden=64):
    """Gemma 3 (text): query / key norms, sliding-window layers beside global ones, two rotary bases."""
    return _causal_lm("Gemma3ForCausalLM", "Gemma3TextConfig", head_dim=16, sliding_window=8,
                      layer_types=["sliding_attention", "full_attention"][:layers] * max(1, layers // 2),
                      **_llama_cfg(layers, hidden))


@arch("phi3", "decoder")
def phi3(layers=2, hidden=64):
    """Phi-3: one fused qkv projection and one fused gate / up projection, split in the graph."""
    return _causal_lm("Phi3ForCausalLM", "Phi3Config", pad_token_id=0, **_llama_cfg(layers, hidden))


# ------------------------------------------------------------------------------------------------ seq2seq
def _seq2seq(cls_name, config_name, part, vocab=1000, enc_len=None, **cfg):
    model, config = _hf(cls_name, config_name, vocab_size=vocab, **cfg)
    d_model = getattr(config, "d_model", None) or config.hidden_size
    if part == "encoder":
        names, make = _text_inputs(vocab)

        def fn(m, input_ids, attention_mask):
            return m.get_encoder()(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return Built(_Wrap(model, list(names), fn), names, ["last_hidden_state"], make)
    names = {"decoder_input_ids": {0: "batch", 1: "decoder_sequence"},
             "encoder_hidden_states": {0: "batch", 1: "encoder_sequence"},
             "encoder_attention_mask": {0: "batch", 1: "encoder_sequence"}}

    def make(rng, d):
        b, s = d["batch"], d["seq"]
        return {"decoder_input_ids": _ids(rng, b, max(d["step"], 2) + 2, vocab),
                "encoder_hidden_states": rng.standard_normal((b, s, d_model)).astype(np.float32),
                "encoder_attention_mask": _mask(b, s)}

    def fn(m, decoder_input_ids, encoder_hidden_states, encoder_attention_mask):
        out = m(encoder_outputs=(encoder_hidden_states,), attention_mask=encoder_attention_mask,
                decoder_input_ids=decoder_input_ids, use_cache=False)
        return out.logits
    return Built(_Wrap(model, list(names), fn), names, ["logits"], make)


def _decoder_step(model, config, names, encoder, vocab=1000):
    """One step of a seq2seq decoder as a decoding loop runs it (optimum's decoder-with-past layout): the self-attention
    cache past_key_values.<i>.decoder.key / value, grown a row a step (present.<i>.decoder.key / value), and the
    cross-attention keys and values past_key_values.<i>.encoder.key / value, computed once from the encoder's states
    and fed unchanged. `names`: the other inputs ({name: axes}), encoder(rng, d) their arrays. Outputs: logits and
    the self-attention presents."""
    torch = _torch()
    import transformers
    n_layers = config.decoder_layers
    heads = config.decoder_attention_heads
    head_dim = config.d_model // heads
    names = {"decoder_input_ids": {0: "batch", 1: "decoder_sequence"}, **names}
    for i in range(n_layers):
        for kv in ("key", "value"):
            names[f"past_key_values.{i}.decoder.{kv}"] = {0: "batch", 2: "past_sequence"}
            names[f"past_key_values.{i}.encoder.{kv}"] = {0: "batch", 2: "encoder_sequence"}
    outputs = ["logits"] + [f"present.{i}.decoder.{kv}" for i in range(n_layers) for kv in ("key", "value")]

    def make(rng, d):
        b, p = d["batch"], d["past"]
        feeds = {"decoder_input_ids": _ids(rng, b, d["step"], vocab), **encoder(rng, d)}
        enc = encoder.length(d)
        for i in range(n_layers):
            for kv in ("key", "value"):
                feeds[f"past_key_values.{i}.decoder.{kv}"] = rng.standard_normal((b, heads, p, head_dim)).astype(
                    np.float32)
                feeds[f"past_key_values.{i}.encoder.{kv}"] = rng.standard_normal((b, heads, enc, head_dim)).astype(
                    np.float32)
        return feeds

    def fn(m, decoder_input_ids, encoder_attention_mask=None, **kv):
        own = [(kv[f"past_key_values.{i}.decoder.key"], kv[f"past_key_values.{i}.decoder.value"])
               for i in range(n_layers)]
        cross = [(kv[f"past_key_values.{i}.encoder.key"], kv[f"past_key_values.{i}.encoder.value"])
                 for i in range(n_layers)]
        cache = transformers.EncoderDecoderCache(transformers.DynamicCache(ddp_cache_data=own, config=m.config),
                                                 transformers.DynamicCache(ddp_cache_data=cross, config=m.config))
        k0 = cross[0][0]
        # (the cross-attention reads the cache; the states only have to be there, of the encoder's length)
        states = torch.zeros((k0.shape[0], k0.shape[2], m.config.d_model), dtype=k0.dtype)
        extra = {} if encoder_attention_mask is None else {"attention_mask": encoder_attention_mask}
        key = "cache" if "cache" in inspect.signature(m.forward).parameters else "past_key_values"
        out = m(encoder_outputs=(states,), decoder_input_ids=decoder_input_ids, use_cache=True, **{key: cache},
                **extra)
        flat = []
        for layer in getattr(out, key).self_attention_cache.layers:
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)
    return Built(_Wrap(model, list(names), fn), names, outputs, make,
                 max_positions=getattr(config, "max_target_positions", None) or config.max_position_embeddings)


@arch("bart_decoder_past", "seq2seq")
def bart_decoder_past(layers=2, hidden=64, vocab=1000):
    """BART's decoder, one step with its self-attention cache (a summarization / translation loop)."""
    model, config = _hf("BartForConditionalGeneration", "BartConfig", vocab_size=vocab, **_bart_cfg(layers, hidden))

    def encoder(rng, d):
        return {"encoder_attention_mask": _mask(d["batch"], d["seq"])}
    encoder.length = lambda d: d["seq"]
    return _decoder_step(model, config, {"encoder_attention_mask": {0: "batch", 1: "encoder_sequence"}}, encoder,
                         vocab)


def _t5_cfg(layers, hidden):
    return dict(d_model=hidden, d_kv=hidden // 4, d_ff=hidden * 2, num_layers=layers, num_decoder_layers=layers,
                num_heads=4, relative_attention_num_buckets=16, decoder_start_token_id=0)


def _bart_cfg(layers, hidden):
    return dict(d_model=hidden, encoder_layers=layers, decoder_layers=layers, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=hidden * 2, decoder_ffn_dim=hidden * 2,
                max_position_embeddings=128)


@arch("t5_encoder", "seq2seq")
def t5_encoder(layers=2, hidden=64):
    return _seq2seq("T5ForConditionalGeneration", "T5Config", "encoder", **_t5_cfg(layers, hidden))


@arch("t5_decoder", "seq2seq")
def t5_decoder(layers=2, hidden=64):
    return _seq2seq("T5ForConditionalGeneration", "T5Config", "decoder", **_t5_cfg(layers, hidden))


@arch("bart_encoder", "seq2seq")
def bart_encoder(layers=2, hidden=64):
    return _seq2seq("BartForConditionalGeneration", "BartConfig", "encoder", **_bart_cfg(layers, hidden))


@arch("bart_decoder", "seq2seq")
def bart_decoder(layers=2, hidden=64):
    return _seq2seq("BartForConditionalGeneration", "BartConfig", "decoder", **_bart_cfg(layers, hidden))


# ------------------------------------------------------------------------------------------------------- audio
def _whisper_cfg(layers, hidden):
    return dict(vocab_size=1000, d_model=hidden, encoder_layers=layers, decoder_layers=layers,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=hidden * 2,
                decoder_ffn_dim=hidden * 2, num_mel_bins=80, max_source_positions=50, max_target_positions=64,
                decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                suppress_tokens=None, begin_suppress_tokens=None)


@arch("whisper_encoder", "audio")
def whisper_encoder(layers=2, hidden=64):
    return _whisper_encoder(_whisper_cfg(layers, hidden))


def _whisper_encoder(cfg):
    model, _ = _hf("WhisperForConditionalGeneration", "WhisperConfig", **cfg)
    frames = 2 * cfg["max_source_positions"]     # Whisper's encoder takes exactly this many mel frames
    names = {"input_features": {0: "batch"}}

    def make(rng, d):
        return {"input_features": rng.standard_normal((d["batch"], 80, frames)).astype(np.float32)}

    def fn(m, input_features):
        return m.get_encoder()(input_features=input_features).last_hidden_state
    return Built(_Wrap(model, list(names), fn), names, ["last_hidden_state"], make)


@arch("whisper_decoder_past", "audio")
def whisper_decoder_past(layers=2, hidden=64, vocab=1000):
    """Whisper's decoder, one step with its self-attention cache (a transcription loop)."""
    return _whisper_step(dict(_whisper_cfg(layers, hidden), vocab_size=vocab))


def _whisper_sized(d_model, layers, heads, ffn, vocab, frames, positions):
    return dict(_whisper_cfg(layers, d_model), vocab_size=vocab, encoder_attention_heads=heads,
                decoder_attention_heads=heads, encoder_ffn_dim=ffn, decoder_ffn_dim=ffn, max_source_positions=frames,
                max_target_positions=positions)


#: Whisper-base's shape (d_model 512, 6 + 6 layers, 8 heads, vocab 51865, 1500 frames, 448 positions)
WHISPER_BASE = dict(d_model=512, layers=6, heads=8, ffn=2048, vocab=51865, frames=1500, positions=448)


def _whisper_step(cfg):
    model, config = _hf("WhisperForConditionalGeneration", "WhisperConfig", **cfg)

    def encoder(rng, d):
        return {}
    encoder.length = lambda d: cfg["max_source_positions"]
    return _decoder_step(model, config, {}, encoder, cfg["vocab_size"])


@arch("whisper_decoder", "audio")
def whisper_decoder(layers=2, hidden=64):
    cfg = _whisper_cfg(layers, hidden)
    model, _ = _hf("WhisperForConditionalGeneration", "WhisperConfig", **cfg)
    names = {"decoder_input_ids": {0: "batch", 1: "decoder_sequence"},
             "encoder_hidden_states": {0: "batch", 1: "encoder_sequence"}}

    def make(rng, d):
        b = d["batch"]
        return {"decoder_input_ids": _ids(rng, b, max(d["step"], 2) + 2, 1000),
                "encoder_hidden_states": rng.standard_normal((b, cfg["max_source_positions"], hidden)).astype(
                    np.float32)}

    def fn(m, decoder_input_ids, encoder_hidden_states):
        return m(encoder_outputs=(encoder_hidden_states,), decoder_input_ids=decoder_input_ids,
                 use_cache=False).logits
    return Built(_Wrap(model, list(names), fn), names, ["logits"], make)


@arch("wav2vec2", "audio")
def wav2vec2(layers=2, hidden=64):
    """The conv feature encoder (GroupNorm on the first conv), the grouped positional conv, a transformer."""
    model, _ = _hf("Wav2Vec2Model", "Wav2Vec2Config", hidden_size=hidden, num_hidden_layers=layers,
                   num_attention_heads=4, intermediate_size=hidden * 2, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2),
                   conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                   feat_extract_norm="group", do_stable_layer_norm=False, mask_time_prob=0.0)
    names = {"input_values": {0: "batch", 1: "samples"}}

    def make(rng, d):
        return {"input_values": rng.standard_normal((d["batch"], 100 * d["seq"])).astype(np.float32)}

    def fn(m, input_values):
        return m(input_values=input_values).last_hidden_state
    return Built(_Wrap(model, list(names), fn), names, ["last_hidden_state"], make)


@arch("ast", "audio")
def ast(layers=2, hidden=64):
    """Audio Spectrogram Transformer: a ViT over overlapping patches of a log-mel spectrogram."""
    model, _ = _hf("ASTModel", "ASTConfig", hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                   intermediate_size=hidden * 4, max_length=64, num_mel_bins=32, frequency_stride=10, time_stride=10)
    names = {"input_values": {0: "batch"}}

    def make(rng, d):
        return {"input_values": rng.standard_normal((d["batch"], 64, 32)).astype(np.float32)}

    def fn(m, input_values):
        o = m(input_values=input_values)
        return o.last_hidden_state, o.pooler_output
    return Built(_Wrap(model, list(names), fn), names, ["last_hidden_state", "pooler_output"], make)


# ------------------------------------------------------------------------------------------------------ vision
def _lively(model):
    """Re-initialize a convnet as torch does (Kaiming-uniform convs and linears) with BatchNorm statistics and affine
    parameters that are not the identity: transformers' small-std init makes a deep random convnet's activations
    vanish (MobileNetV2's logits came out ~1e-25, EfficientNet's exactly 0), and an identity BatchNorm hides bugs."""
    torch = _torch()
    torch.manual_seed(SEED + 7)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
                mod.reset_parameters()
            elif isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return model


def _vision(cls_name, config_name, size, outputs=("last_hidden_state",), lively=False, **cfg):
    model, _ = _hf(cls_name, config_name, **cfg)
    if lively:
        _lively(model)
    names, make = _image_inputs(size)

    def fn(m, pixel_values):
        o = m(pixel_values=pixel_values)
        return tuple(getattr(o, n) for n in outputs)
    return Built(_Wrap(model, list(names), fn), names, list(outputs), make)


@arch("vit", "vision")
def vit(layers=2, hidden=64):
    return _vision("ViTModel", "ViTConfig", 32, ("last_hidden_state", "pooler_output"), image_size=32, patch_size=8,
                   hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4, intermediate_size=hidden * 4)


@arch("deit", "vision")
def deit(layers=2, hidden=64):
    return _vision("DeiTForImageClassificationWithTeacher", "DeiTConfig", 32, ("logits",), image_size=32,
                   patch_size=8, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                   intermediate_size=hidden * 4, num_labels=10)


@arch("swin", "vision")
def swin(layers=1, hidden=32):
    return _vision("SwinModel", "SwinConfig", 32, ("last_hidden_state", "pooler_output"), image_size=32,
                   patch_size=2, embed_dim=hidden, depths=[2 * layers, layers], num_heads=[2, 4], window_size=4)


def _convnext(prefix, layers, hidden):
    return _vision(f"{prefix}Model", f"{prefix}Config", 32, ("last_hidden_state", "pooler_output"), lively=True,
                   num_stages=2, hidden_sizes=[hidden, 2 * hidden], depths=[layers, layers])


@arch("convnext", "vision")
def convnext(layers=1, hidden=16):
    return _convnext("ConvNext", layers, hidden)


@arch("resnet", "vision")
def resnet(layers=1, hidden=16):
    return _vision("ResNetForImageClassification", "ResNetConfig", 64, ("logits",), lively=True,
                   embedding_size=hidden, hidden_sizes=[2 * hidden, 4 * hidden], depths=[layers, layers],
                   layer_type="bottleneck", num_labels=10)


@arch("mobilenet_v2", "vision")
def mobilenet_v2(depth=0.35):
    return _vision("MobileNetV2ForImageClassification", "MobileNetV2Config", 64, ("logits",), lively=True,
                   image_size=64, depth_multiplier=depth, num_labels=10)


@arch("efficientnet", "vision")
def efficientnet(width=0.25, depth=0.3, size=64):
    """Its pooler is AvgPool2d(kernel = hidden_dim, ceil_mode=True): a kernel larger than the feature map, as in every
    transformers EfficientNet (B0: kernel 1280 on 7x7)."""
    return _vision("EfficientNetForImageClassification", "EfficientNetConfig", size, ("logits",), lively=True,
                   image_size=size, width_coefficient=width, depth_coefficient=depth, hidden_dim=int(1280 * width),
                   num_labels=10)


@arch("regnet", "vision")
def regnet(layers=1, hidden=16):
    return _vision("RegNetForImageClassification", "RegNetConfig", 64, ("logits",), lively=True,
                   embedding_size=hidden, hidden_sizes=[2 * hidden, 4 * hidden], depths=[layers, layers],
                   groups_width=8, num_labels=10)


@arch("segformer", "vision")
def segformer(layers=1, hidden=16):
    return _vision("SegformerForSemanticSegmentation", "SegformerConfig", 64, ("logits",), lively=True,
                   num_encoder_blocks=2, depths=[layers, layers], sr_ratios=[4, 2], hidden_sizes=[hidden, 2 * hidden],
                   patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[4, 4],
                   decoder_hidden_size=32, num_labels=5)


@arch("clip_vision", "vision")
def clip_vision(layers=2, hidden=64):
    return _vision("CLIPVisionModelWithProjection", "CLIPVisionConfig", 32, ("image_embeds", "last_hidden_state"),
                   image_size=32, patch_size=8, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                   intermediate_size=hidden * 4, projection_dim=32)


@arch("clip_text", "text-encoder")
def clip_text(layers=2, hidden=64):
    model, _ = _hf("CLIPTextModelWithProjection", "CLIPTextConfig", vocab_size=1000, hidden_size=hidden,
                   num_hidden_layers=layers, num_attention_heads=4, intermediate_size=hidden * 4,
                   max_position_embeddings=32, projection_dim=32, eos_token_id=2)
    names = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}

    def make(rng, d):
        b, s = d["batch"], d["seq"]
        ids = _ids(rng, b, s, 1000)
        mask = np.ones((b, s), dtype=np.int64)
        for r in range(b):             # each sequence ends with the end-of-text token the pooling looks for
            end = s - 1 - (r % 3)
            ids[r, end] = 2
            mask[r, end + 1:] = 0
        return {"input_ids": ids, "attention_mask": mask}

    def fn(m, input_ids, attention_mask):
        o = m(input_ids=input_ids, attention_mask=attention_mask)
        return o.text_embeds, o.last_hidden_state
    return Built(_Wrap(model, list(names), fn), names, ["text_embeds", "last_hidden_state"], make)


@arch("mpnet", "text-encoder")
def mpnet(layers=2, hidden=64):
    """MPNet (all-mpnet-base-v2's encoder): relative position buckets shared across layers."""
    return _encoder("MPNetModel", "MPNetConfig", outputs=("last_hidden_state", "pooler_output"), hidden_size=hidden,
                    num_hidden_layers=layers, num_attention_heads=4, intermediate_size=hidden * 4,
                    max_position_embeddings=130, relative_attention_num_buckets=32)


@arch("beit", "vision")
def beit(layers=2, hidden=64):
    """BEiT: relative position bias tables per layer, layer scale, mean pooling."""
    return _vision("BeitModel", "BeitConfig", 32, ("last_hidden_state", "pooler_output"), image_size=32,
                   patch_size=8, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                   intermediate_size=hidden * 4, use_relative_position_bias=True, use_mean_pooling=True)


@arch("dinov2", "vision")
def dinov2(layers=2, hidden=64):
    """DINOv2: layer scale, interpolated (bicubic) position embeddings."""
    return _vision("Dinov2Model", "Dinov2Config", 32, ("last_hidden_state", "pooler_output"), image_size=32,
                   patch_size=8, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4, mlp_ratio=4)


@arch("convnextv2", "vision")
def convnextv2(layers=1, hidden=16):
    """ConvNeXt V2: global response normalization (an L2 norm over the pixels per channel) in each block."""
    return _convnext("ConvNextV2", layers, hidden)


@arch("siglip_vision", "vision")
def siglip_vision(layers=2, hidden=64):
    """SigLIP's vision tower: a ViT without class token, pooled by a multi-head attention probe."""
    return _vision("SiglipVisionModel", "SiglipVisionConfig", 32, ("last_hidden_state", "pooler_output"),
                   image_size=32, patch_size=8, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                   intermediate_size=hidden * 4)


@arch("yolos", "vision")
def yolos(layers=2, hidden=64):
    """YOLOS: a ViT detecting objects through detection tokens (class logits and boxes)."""
    return _vision("YolosForObjectDetection", "YolosConfig", 32, ("logits", "pred_boxes"), image_size=[32, 32],
                   patch_size=8, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                   intermediate_size=hidden * 4, num_detection_tokens=5, num_labels=7)


@arch("dpt", "vision")
def dpt(layers=4, hidden=64):
    """DPT depth estimation: a ViT whose hidden states a convolutional neck reassembles, fuses and upsamples."""
    built = _vision("DPTForDepthEstimation", "DPTConfig", 32, ("predicted_depth",), lively=True, image_size=32,
                    patch_size=8, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                    intermediate_size=hidden * 4, backbone_out_indices=[0, 1, 2, 3],
                    neck_hidden_sizes=[16, 32, 48, 64], fusion_hidden_size=32, head_in_index=-1)
    with _torch().no_grad():     # (the head ends in a ReLU: a random init's depths came out all zeros)
        built.module.model.head.head[4].bias.fill_(1.0)
    return built


@arch("mobilevit", "vision")
def mobilevit(layers=1):
    """MobileViT: MobileNetV2 blocks with transformer blocks over unfolded patches (SiLU)."""
    return _vision("MobileViTForImageClassification", "MobileViTConfig", 64, ("logits",), lively=True,
                   image_size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 16, 24, 32, 40, 48, 64],
                   num_attention_heads=2, num_labels=10)


# -------------------------------------------------------------------------------------------- plain-torch nets
def _torch_resnet(width=16, blocks=(1, 1, 1, 1), classes=10):
    nn = _torch().nn

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.down = None if stride == 1 and cin == cout else nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = nn.functional.relu(self.b1(self.c1(x)))
            y = self.b2(self.c2(y))
            return nn.functional.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width),
                                      nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
            layers, cin = [], width
            for i, n in enumerate(blocks):
                cout = width * 2 ** i
                for j in range(n):
                    layers.append(Block(cin, cout, 2 if (j == 0 and i > 0) else 1))
                    cin = cout
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(cin, classes)

        def forward(self, x):
            return self.fc(self.pool(self.layers(self.stem(x))).flatten(1))

    m = _seeded(ResNet)
    with _torch().no_grad():          # BatchNorm statistics that are not the identity
        for mod in m.modules():
            if isinstance(mod, nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
    return m


@arch("resnet_torch", "vision")
def resnet_torch(width=16, blocks=(1, 1, 1, 1), size=64):
    """ResNet-18's layout (BasicBlocks, BatchNorm, max pool, global average pool), narrower, in plain torch."""
    names, make = _image_inputs(size, name="input")
    return Built(_Wrap(_torch_resnet(width, blocks), ["input"], lambda m, input: m(input)), names, ["logits"], make)


@arch("mobilenet_v3", "vision")
def mobilenet_v3(width=16):
    """MobileNetV3-small's blocks in plain torch (transformers has no MobileNetV3): inverted residuals with
    depthwise convs, squeeze-and-excitation with Hardsigmoid, Hardswish and ReLU."""
    nn = _torch().nn

    class SE(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.f = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, max(8, c // 4), 1), nn.ReLU(),
                                   nn.Conv2d(max(8, c // 4), c, 1), nn.Hardsigmoid())

        def forward(self, x):
            return x * self.f(x)

    class IR(nn.Module):
        def __init__(self, cin, exp, cout, k, stride, se, act):
            super().__init__()
            A = nn.Hardswish if act == "hs" else nn.ReLU
            mods = [] if exp == cin else [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), A()]
            mods += [nn.Conv2d(exp, exp, k, stride, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), A()]
            if se:
                mods.append(SE(exp))
            mods += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
            self.f = nn.Sequential(*mods)
            self.res = stride == 1 and cin == cout

        def forward(self, x):
            y = self.f(x)
            return x + y if self.res else y

    w = width
    cfg = [(w, w, w, 3, 2, True, "re"), (w, 4 * w, 2 * w, 3, 2, False, "re"), (2 * w, 6 * w, 2 * w, 3, 1, False, "re"),
           (2 * w, 6 * w, 3 * w, 5, 2, True, "hs"), (3 * w, 8 * w, 3 * w, 5, 1, True, "hs")]

    class MobileNetV3(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, w, 3, 2, 1, bias=False), nn.BatchNorm2d(w), nn.Hardswish())
            self.blocks = nn.Sequential(*[IR(*c) for c in cfg])
            self.last = nn.Sequential(nn.Conv2d(3 * w, 12 * w, 1, bias=False), nn.BatchNorm2d(12 * w), nn.Hardswish())
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(12 * w, 64), nn.Hardswish(),
                                      nn.Dropout(0.2), nn.Linear(64, 10))

        def forward(self, x):
            return self.head(self.last(self.blocks(self.stem(x))))

    m = _seeded(MobileNetV3)
    names, make = _image_inputs(64, name="input")
    return Built(_Wrap(m, ["input"], lambda m, input: m(input)), names, ["logits"], make)


def _unet(ch=32, ctx_dim=32, heads=4):
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    def timestep_embedding(t, dim):
        half = dim // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32, device=t.device) / half)
        args = t[:, None].float() * freqs[None]
        return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)

    class ResBlock(nn.Module):
        def __init__(self, cin, cout, tdim):
            super().__init__()
            self.n1, self.c1 = nn.GroupNorm(8, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.t = nn.Linear(tdim, cout)
            self.n2, self.c2 = nn.GroupNorm(8, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Identity() if cin == cout else nn.Conv2d(cin, cout, 1)

        def forward(self, x, temb):
            h = self.c1(F.silu(self.n1(x)))
            h = h + self.t(F.silu(temb))[:, :, None, None]
            h = self.c2(F.silu(self.n2(h)))
            return self.skip(x) + h

    class Attention(nn.Module):
        def __init__(self, dim, kv_dim):
            super().__init__()
            self.q, self.k, self.v = nn.Linear(dim, dim, bias=False), nn.Linear(kv_dim, dim, bias=False), \
                nn.Linear(kv_dim, dim, bias=False)
            self.o = nn.Linear(dim, dim)

        def forward(self, x, ctx):
            b, n, c = x.shape
            q = self.q(x).reshape(b, n, heads, c // heads).transpose(1, 2)
            k = self.k(ctx).reshape(b, ctx.shape[1], heads, c // heads).transpose(1, 2)
            v = self.v(ctx).reshape(b, ctx.shape[1], heads, c // heads).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, k, v)
            return self.o(a.transpose(1, 2).reshape(b, n, c))

    class Transformer(nn.Module):
        """GroupNorm, proj_in, self-attention, cross-attention on the text context, a GEGLU feed-forward."""

        def __init__(self, c):
            super().__init__()
            self.norm, self.proj_in, self.proj_out = nn.GroupNorm(8, c), nn.Conv2d(c, c, 1), nn.Conv2d(c, c, 1)
            self.n1, self.a1 = nn.LayerNorm(c), Attention(c, c)
            self.n2, self.a2 = nn.LayerNorm(c), Attention(c, ctx_dim)
            self.n3, self.ff1, self.ff2 = nn.LayerNorm(c), nn.Linear(c, 8 * c), nn.Linear(4 * c, c)

        def forward(self, x, ctx):
            b, c, h, w = x.shape
            y = self.proj_in(self.norm(x)).reshape(b, c, h * w).transpose(1, 2)
            z = self.n1(y)
            y = y + self.a1(z, z)
            y = y + self.a2(self.n2(y), ctx)
            u, gate = self.ff1(self.n3(y)).chunk(2, dim=-1)
            y = y + self.ff2(u * F.gelu(gate))
            return x + self.proj_out(y.transpose(1, 2).reshape(b, c, h, w))

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            tdim = 4 * ch
            self.temb = nn.Sequential(nn.Linear(ch, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
            self.conv_in = nn.Conv2d(4, ch, 3, padding=1)
            self.d1, self.t1 = ResBlock(ch, ch, tdim), Transformer(ch)
            self.down1 = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
            self.d2, self.t2 = ResBlock(ch, 2 * ch, tdim), Transformer(2 * ch)
            self.down2 = nn.Conv2d(2 * ch, 2 * ch, 3, stride=2, padding=1)
            self.mid1, self.tm, self.mid2 = ResBlock(2 * ch, 2 * ch, tdim), Transformer(2 * ch), \
                ResBlock(2 * ch, 2 * ch, tdim)
            self.up2 = nn.ConvTranspose2d(2 * ch, 2 * ch, 4, stride=2, padding=1)       # learned upsampling
            self.u2, self.tu2 = ResBlock(4 * ch, 2 * ch, tdim), Transformer(2 * ch)
            self.up1 = nn.Conv2d(2 * ch, ch, 3, padding=1)                              # after nearest Resize
            self.u1, self.tu1 = ResBlock(2 * ch, ch, tdim), Transformer(ch)
            self.norm_out, self.conv_out = nn.GroupNorm(8, ch), nn.Conv2d(ch, 4, 3, padding=1)

        def forward(self, sample, timestep, encoder_hidden_states):
            ctx = encoder_hidden_states
            temb = self.temb(timestep_embedding(timestep, ch))
            h0 = self.conv_in(sample)
            h1 = self.t1(self.d1(h0, temb), ctx)
            h2 = self.t2(self.d2(self.down1(h1), temb), ctx)
            m = self.mid2(self.tm(self.mid1(self.down2(h2), temb), ctx), temb)
            u = self.tu2(self.u2(torch.cat([self.up2(m), h2], 1), temb), ctx)
            u = self.up1(F.interpolate(u, scale_factor=2.0, mode="nearest"))
            u = self.tu1(self.u1(torch.cat([u, h1], 1), temb), ctx)
            return self.conv_out(F.silu(self.norm_out(u)))

    return _seeded(UNet)


@arch("unet", "diffusion")
def unet(ch=32):
    """A diffusion-style UNet (Stable Diffusion's blocks, small): sinusoidal timestep embedding, ResBlocks with
    GroupNorm + SiLU, self- and cross-attention transformer blocks with GEGLU, strided-conv downsampling,
    ConvTranspose and nearest-Resize upsampling, skip concatenations."""
    names = {"sample": {0: "batch"}, "timestep": {0: "batch"}, "encoder_hidden_states": {0: "batch", 1: "tokens"}}

    def make(rng, d):
        b = d["batch"]
        return {"sample": rng.standard_normal((b, 4, 16, 16)).astype(np.float32),
                "timestep": rng.uniform(0, 1000, size=(b,)).astype(np.float32),
                "encoder_hidden_states": rng.standard_normal((b, d["seq"] // 2, 32)).astype(np.float32)}
    return Built(_Wrap(_unet(ch), list(names), lambda m, **kw: m(**kw)), names, ["out_sample"], make)


# ---------------------------------------------------------------------------------- the committed test fixtures
def _fixture(name, base, exporters=EXPORTERS, **kw):
    FIXTURES[name] = Arch(name, ARCHS[base].family, ARCHS[base].build, kw, exporters)


_fixture("bert_1layer", "bert", layers=1, hidden=32, vocab=100)
_fixture("gpt2_1layer_past", "gpt2_past", layers=1, hidden=32, vocab=100)
_fixture("llama_1layer_past", "llama_past", layers=1, hidden=32, vocab=100)
_fixture("resnet_tiny", "resnet_torch", ("dynamo",), width=8, blocks=(1, 1), size=32)
_fixture("unet_tiny", "unet", ("dynamo",), ch=8)
_fixture("deit_1layer", "deit", ("dynamo",), layers=1, hidden=32)
_fixture("efficientnet_tiny", "efficientnet", ("dynamo",), width=0.1, depth=0.1, size=32)
_fixture("whisper_1layer_past", "whisper_decoder_past", ("dynamo",), layers=1, hidden=32, vocab=100)


# ------------------------------------------------------------------------------ the models at their real sizes
#: the published configs of eight architectures users run (random weights, seeded), batch 1, text at 128 tokens,
#: images at 224 px, decoders one token after 128 of past: what issue 29's bf16 figure is about, where the zoo's
#: small configs are dispatch-bound (``--full``; ~2.2 GB in ~/.cache/onnxep/zoo-full)
FULL: dict[str, Arch] = {}
FULL_DIMS = dict(batch=1, seq=128, past=128, step=1)
FULL_OUT = DEFAULT_OUT.parent / (DEFAULT_OUT.name + "-full")


def _full(name, fn, doc, **kw):
    def build(**k):
        return fn(**k)
    build.__doc__ = doc
    FULL[name] = Arch(name, "full-size", build, kw, ("dynamo",))


def _bert_base():
    return _encoder("BertModel", "BertConfig", 30522, True, ("last_hidden_state", "pooler_output"))


_full("bert_base", _bert_base, "BERT-base: 12 layers, hidden 768, 12 heads, vocab 30522")
_full("minilm_l6", minilm_sentence, "all-MiniLM-L6-v2's shape: 6 layers, hidden 384, 12 heads, mean pooling",
      layers=6, hidden=384, heads=12, vocab=30522, positions=512)
_full("vit_base", lambda: _vision("ViTModel", "ViTConfig", 224, ("last_hidden_state", "pooler_output")),
      "ViT-B/16 at 224 px")
_full("convnext_tiny", lambda: _vision("ConvNextModel", "ConvNextConfig", 224, ("last_hidden_state", "pooler_output"),
                                       lively=True), "ConvNeXt-T at 224 px")
_full("resnet50", lambda: _vision("ResNetForImageClassification", "ResNetConfig", 224, ("logits",), lively=True),
      "ResNet-50 (transformers' layout) at 224 px, 1000 classes")
_full("mobilenet_v2_100", lambda: _vision("MobileNetV2ForImageClassification", "MobileNetV2Config", 224, ("logits",),
                                          lively=True), "MobileNetV2 1.0 at 224 px, 1000 classes")
_full("gpt2_past", lambda: _causal_lm("GPT2LMHeadModel", "GPT2Config", past=True, vocab=50257, n_embd=768, n_layer=12,
                                      n_head=12, n_positions=1024),
      "GPT-2 small (124M): one decoding step after 128 tokens of past")
_full("whisper_base_decoder_past", lambda: _whisper_step(_whisper_sized(**WHISPER_BASE)),
      "Whisper-base's decoder: one step with its self-attention cache after 128 tokens, 1500 encoder frames")
_full("whisper_base_encoder", lambda: _whisper_encoder(_whisper_sized(**WHISPER_BASE)),
      "Whisper-base's encoder: 30 s of 80-bin log-mel frames (3000) -> 1500 states")
_full("smollm_135m_past", lambda: _causal_lm("LlamaForCausalLM", "LlamaConfig", past=True, vocab=49152,
                                             hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                                             num_key_value_heads=3, intermediate_size=1536,
                                             max_position_embeddings=2048, rms_norm_eps=1e-5,
                                             tie_word_embeddings=True),
      "SmolLM-135M's shape (LLaMA blocks, 3 key/value heads for 9): one decoding step after 128 tokens of past")


# ------------------------------------------------------------------------------------------------------ export
def _short(e: BaseException, limit=400) -> str:
    """One line: the exception's first line and, for torch's wrapped export errors, the cause's."""
    import re
    first = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(e).__name__}: {e}".strip()).splitlines()[0]
    cause = e.__cause__ or e.__context__
    while cause is not None and (cause.__cause__ or cause.__context__) is not None:
        cause = cause.__cause__ or cause.__context__
    if cause is not None:
        line = re.sub(r"\x1b\[[0-9;]*m", "", f"{type(cause).__name__}: {cause}".strip()).splitlines()[0]
        if line not in first:
            first = f"{first.split('.')[0]} <- {line}"
    return first[:limit]


def _to_torch(feeds):
    torch = _torch()
    return tuple(torch.from_numpy(np.ascontiguousarray(v)) for v in feeds.values())


def _export_one(built: Built, exporter: str, path: Path, dynamic: bool):
    torch = _torch()
    args = _to_torch(built.make(np.random.default_rng(SEED), EXPORT_DIMS))
    kwargs = dict(input_names=list(built.inputs), output_names=list(built.outputs),
                  dynamic_axes=built.inputs if dynamic else None)
    if exporter == "dynamo":
        kwargs.update(dynamo=True, external_data=False, verbose=False)
    else:
        kwargs.update(dynamo=False, do_constant_folding=True)
    with torch.no_grad(), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(built.module, args, str(path), **kwargs)


def _ort_session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _rel_err(got, want):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return float("inf")
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    diff = float(np.max(np.abs(got - want))) if want.size else 0.0
    return diff / scale if scale > 0 else diff


def _strip_metadata(path: Path):
    """Drop the per-node metadata (the dynamo exporter's stack traces and name scopes) and doc strings: they do not
    change what the model computes and make up most of a tiny model's file."""
    import onnx
    model = onnx.load(str(path))

    def strip(graph):
        graph.doc_string = ""
        for n in graph.node:
            del n.metadata_props[:]
            n.doc_string = ""
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    strip(a.g)
    strip(model.graph)
    for f in model.functions:
        for n in f.node:
            del n.metadata_props[:]
            n.doc_string = ""
    onnx.save(model, str(path))


def export_arch(a: Arch, exporter: str, out: Path, dims=None, strip=False) -> dict:
    """Export one (arch, exporter); write the .onnx and .npz; return its index entry (status ok or failed).
    dims: the reference inputs' sizes (REF_DIMS); strip: drop node metadata (the committed fixtures)."""
    ref_dims = dims or REF_DIMS
    import onnx
    torch = _torch()
    stem = f"{a.name}.{exporter}"
    entry = dict(name=stem, arch=a.name, family=a.family, exporter=exporter, status="failed", error="",
                 file=f"{stem}.onnx", data=f"{stem}.npz", torch=torch.__version__)
    t0 = time.perf_counter()
    path, data = out / entry["file"], out / entry["data"]
    for p in (path, data):
        p.unlink(missing_ok=True)
    try:
        built = a.build(**a.kw)
    except Exception as e:  # noqa: BLE001 -- a config this transformers does not take: recorded, not fatal
        entry.update(stage="build", error=_short(e))
        return entry
    if built.max_positions is not None:
        entry["max_positions"] = built.max_positions
    entry.update(tolerance=built.tolerance, note=built.note,
                 doc=(a.build.__doc__ or "").strip().split("\n\n")[0].replace("\n", " "))
    dynamic = True
    try:
        _export_one(built, exporter, path, True)
    except Exception as e:  # noqa: BLE001
        first = _short(e)
        try:            # dynamic axes the exporter could not keep: a static export still gives a model to check
            _export_one(built, exporter, path, False)
            dynamic = False
            entry["note"] = f"static shapes only (dynamic export failed: {first})"
        except Exception as e2:  # noqa: BLE001
            entry.update(stage="export", error=first if _short(e2) == first else f"{first} || static: {_short(e2)}")
            entry["seconds"] = round(time.perf_counter() - t0, 1)
            return entry
    entry["export_seconds"] = round(time.perf_counter() - t0, 1)
    if strip:
        _strip_metadata(path)
        entry["note"] = (entry.get("note", "") + " node metadata stripped").strip()
    model = onnx.load(str(path))
    entry.update(opset=next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None),
                 nodes=len(model.graph.node), bytes=path.stat().st_size, dynamic=dynamic,
                 op_types=sorted({n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}.{n.op_type}"
                                  for n in model.graph.node}),
                 functions=len(model.functions))
    # reference inputs at other sizes than the export's (the dynamic axes at work); back to the export's sizes when
    # the export kept them static or onnxruntime refuses the others
    try:
        sess = _ort_session(path)
    except Exception as e:  # noqa: BLE001
        entry.update(stage="onnxruntime", error=_short(e))
        return entry
    names = [o.name for o in sess.get_outputs()]
    attempts = [("ref", ref_dims), ("export", EXPORT_DIMS)] if dynamic else [("export", EXPORT_DIMS)]
    err = None
    for label, dims in attempts:
        feeds = built.make(np.random.default_rng(SEED + 1), dims)
        try:
            outs = sess.run(None, feeds)
        except Exception as e:  # noqa: BLE001
            err = _short(e)
            continue
        if label != attempts[0][0]:
            entry["note"] = (entry.get("note", "") + f" onnxruntime failed at the reference sizes ({err}); "
                             f"inputs at the export sizes").strip()
        break
    else:
        entry.update(stage="onnxruntime", error=err)
        return entry
    with torch.no_grad():
        want = built.module(*_to_torch(feeds))
    entry["torch_vs_ort"] = float(max(_rel_err(o, w.detach().numpy()) for o, w in zip(outs, want)))
    # a random model whose outputs are (nearly) constant checks nothing: how varied is the least varied output
    floats = [np.asarray(o) for o in outs if np.asarray(o).dtype.kind == "f" and np.asarray(o).size > 1]
    entry["min_distinct"] = round(min((len(np.unique(o.astype(np.float32))) / o.size for o in floats),
                                      default=1.0), 3)
    if entry["min_distinct"] < 0.2 or any(float(np.max(np.abs(o))) < 1e-6 for o in floats):
        entry["note"] = (entry.get("note", "") + " outputs nearly constant: a weak check").strip()
    arrays = {f"input:{k}": v for k, v in feeds.items()}
    arrays.update({f"output:{n}": v for n, v in zip(names, outs)})
    np.savez_compressed(data, **arrays)
    entry.update(status="ok", inputs={k: dict(shape=list(v.shape), dtype=str(v.dtype)) for k, v in feeds.items()},
                 outputs={n: dict(shape=list(np.shape(v)), dtype=str(np.asarray(v).dtype)) for n, v in
                          zip(names, outs)},
                 seconds=round(time.perf_counter() - t0, 1))
    return entry


def load_index(out: Path) -> dict:
    p = out / "index.json"
    if p.exists():
        return {e["name"]: e for e in json.loads(p.read_text())["models"]}
    return {}


def save_index(out: Path, entries: dict):
    import onnxruntime
    torch = _torch()
    import transformers
    doc = dict(torch=torch.__version__, transformers=transformers.__version__, onnxruntime=onnxruntime.__version__,
               export_dims=EXPORT_DIMS, ref_dims=REF_DIMS, seed=SEED,
               models=sorted(entries.values(), key=lambda e: e["name"]))
    tmp = out / "index.json.tmp"
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(out / "index.json")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help=f"cache folder (default {DEFAULT_OUT})")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="these architectures only")
    ap.add_argument("--exporter", choices=EXPORTERS, action="append", help="one exporter only (repeatable)")
    ap.add_argument("--list", action="store_true", help="list the architectures and exit")
    ap.add_argument("--fixtures", type=Path, metavar="DIR",
                    help="write the tiny test fixtures (" + ", ".join(FIXTURES) + ") to DIR instead")
    ap.add_argument("--full", action="store_true",
                    help=f"the real-size models ({', '.join(FULL)}) instead, batch 1, into {FULL_OUT} by default")
    args = ap.parse_args(argv)
    table = FIXTURES if args.fixtures else FULL if args.full else ARCHS
    if args.list:
        for a in table.values():
            doc = (a.build.__doc__ or "").strip().splitlines()
            print(f"{a.name:18} {a.family:13} {doc[0] if doc else ''}")
        return 0
    out = (args.fixtures or args.out or (FULL_OUT if args.full else DEFAULT_OUT)).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    names = args.only or list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        ap.error(f"unknown architecture(s) {unknown}; --list shows them")
    logging.disable(logging.WARNING)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    torch = _torch()
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    entries = load_index(out)
    t_all = time.perf_counter()
    for name in names:
        a = table[name]
        for exporter in args.exporter or a.exporters:
            t0 = time.perf_counter()
            try:
                dims = FIXTURE_DIMS if args.fixtures else FULL_DIMS if args.full else None
                entry = export_arch(a, exporter, out, dims, strip=bool(args.fixtures))
            except Exception as e:  # noqa: BLE001 -- never lose the rest of the zoo to one model
                entry = dict(name=f"{name}.{exporter}", arch=name, family=a.family, exporter=exporter,
                             status="failed", stage="internal", error=_short(e),
                             trace=traceback.format_exc()[-1500:])
            entries[entry["name"]] = entry
            save_index(out, entries)
            what = (f"ok  opset {entry['opset']} nodes {entry['nodes']:4d} torch-vs-ort {entry['torch_vs_ort']:.1e}"
                    if entry["status"] == "ok" else f"FAILED ({entry.get('stage')}): {entry['error'][:150]}")
            print(f"{entry['name']:28} {time.perf_counter() - t0:6.1f}s  {what}", flush=True)
    ok = sum(1 for e in entries.values() if e["status"] == "ok")
    print(f"{ok}/{len(entries)} exported in {out} ({time.perf_counter() - t_all:.0f}s this run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
