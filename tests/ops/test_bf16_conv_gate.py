"""The gate of bf16 convs without AMX (ops/_bf16.py bf16_conv_path): a dense conv of a bf16 session takes the
vdpbf16ps path where the probe (_kernels.bgemm_dp_ratio, bgemm.h bg_dp_ratio) finds vdpbf16ps giving clearly more
products per second than the fp32 FMA (DP_CONV_MIN_RATIO), the AMX path where the CPU has AMX-BF16, fp32 elsewhere;
tests force it on and off (force_bf16_convs).

Oracles:
- the probe: a ratio of two instruction throughputs of one core, so positive and finite where AVX512_BF16 runs
  (between 1/4 and 4 on any CPU: 32 products per vdpbf16ps against 16 per FMA, issue rates within 2x of each
  other), 0 where it does not, the same value on a second call (timed once per process), in every ISA variant;
- forced on: a float64 numpy conv, within the bf16 bound of tests/ops/test_bconv_nhwc.py, and the output differs
  from the fp32 session's (the bf16 path ran); forced off: the fp32 session's bits;
- the rule itself: the path it names follows from the CPU's AMX bit and the probe's value; on the vdpbf16ps path a
  conv fp32 runs on Winograd stays fp32 (the fp32 session's bits), on the AMX path it takes bf16 (bits differ)."""
from __future__ import annotations

import io
import math

import numpy as np
import pytest

import onnxep
from onnxep import _kernels
from onnxep.ops import _bf16
from tests.ops.test_bconv_nhwc import _bound, _conv64, _model, _session

needs_bf16 = pytest.mark.skipif(not _kernels.bgemm_hw(), reason="bf16 runs in fp32 without AVX512_BF16")


@pytest.fixture
def force():
    before = _bf16._conv_force
    yield _bf16.force_bf16_convs
    _bf16.force_bf16_convs(before)


@pytest.mark.parametrize("variant", _kernels.AVAILABLE)
def test_probe_is_sane_in_every_variant(variant):
    mod = __import__(f"onnxep._kernels_{variant}", fromlist=["x"])
    r = mod.bgemm_dp_ratio()
    if not mod.bgemm_hw():
        assert r == 0.0
        return
    assert math.isfinite(r) and 0.25 <= r <= 4.0, r
    assert mod.bgemm_dp_ratio() == r            # cached: one probe per process


def test_rule_follows_probe_and_amx(force):
    force(None)
    if not _kernels.bgemm_hw():
        assert _bf16.bf16_conv_path() is None
    elif _kernels.bgemm_have("amx"):
        assert _bf16.bf16_conv_path() == "amx"
    else:
        want = "avx512bf16" if _kernels.bgemm_dp_ratio() >= _bf16.DP_CONV_MIN_RATIO else None
        assert _bf16.bf16_conv_path() == want
    force(False)
    assert _bf16.bf16_conv_path() is None
    force(True)
    assert _bf16.bf16_conv_path() == (None if not _kernels.bgemm_hw() else
                                      "amx" if _kernels.bgemm_have("amx") else "avx512bf16")


def test_show_config_names_the_conv_path(force):
    force(None)
    out = io.StringIO()
    onnxep.show_config(out)
    text = out.getvalue()
    assert "bf16 precision" in text
    if _kernels.bgemm_hw():
        assert f"convs: {_bf16.bf16_conv_path() or 'fp32'}" in text, text


@needs_bf16
@pytest.mark.parametrize("on", [True, False], ids=["forced_on", "forced_off"])
@pytest.mark.parametrize("geo", [(64, 48, 3, 2, 1, 1, 12, 13), (128, 40, 1, 2, 0, 1, 9, 9)], ids=["3x3s2", "1x1s2"])
def test_forced_path_within_bound(force, on, geo):
    force(on)
    stride, pad, dil = geo[3:6]
    rng = np.random.default_rng(sum(geo) + on)
    model, x, inits = _model(*geo, rng)
    r = _session(model, "bf16").run(None, {"x": x})[0]
    x64, w0, b0 = x.astype(np.float64), inits["w0"].astype(np.float64), inits["b0"].astype(np.float64)
    ref = np.maximum(_conv64(x64, w0, b0, stride, pad, dil), 0)
    bound = _bound(x64, w0, b0, None, stride, pad, dil)
    assert np.all(np.abs(r - ref) <= bound), float(np.max(np.abs(r - ref) / bound))
    fp = _session(model, "fp32").run(None, {"x": x})[0]
    assert np.array_equal(r, fp) != on          # forced on: bf16 ran; forced off: the fp32 conv's bits


@needs_bf16
def test_vdpbf16ps_path_leaves_winograd_convs_fp32(force):
    force(True)
    geo = (64, 64, 3, 1, 1, 1, 15, 17)                       # 3x3 stride 1 on 64 channels: fp32 runs Winograd
    model, x, _ = _model(*geo, np.random.default_rng(7))
    r = _session(model, "bf16").run(None, {"x": x})[0]
    fp = _session(model, "fp32").run(None, {"x": x})[0]
    assert np.array_equal(r, fp) == (_bf16.bf16_conv_path() == "avx512bf16")
