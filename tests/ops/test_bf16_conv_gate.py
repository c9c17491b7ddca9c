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
  conv fp32 runs on F(2x2) Winograd takes the bf16 Winograd (bits differ, within its bound against float64; the fp32
  bits when forced off: force_bf16_winograd), one on F(4x4) only from BF16_WINOGRAD_F2_MIN_CHANNELS; on the AMX path
  it takes the bf16 direct conv (bits differ)."""
from __future__ import annotations

import io
import math
import re

import numpy as np
import pytest

import onnxep
from onnxep import _kernels
from onnxep.ops import _bf16
from onnxep.ops.onnxep import nhwc_conv
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


@pytest.fixture
def wino():
    before = _bf16._wino.forced
    yield _bf16.force_bf16_winograd
    _bf16.force_bf16_winograd(before)


def _wino_bound(x64, w64, b64, m=2):
    """The bf16 Winograd bound of tests/kernels/test_conv_winograd_bf16.py for the model's first conv (3x3, pad 1,
    NCHW in / out), scaled for data outside [-1, 1]: per image, (2u + u^2) |A^T (x) A^T| sum_c |U_c||V_c| plus the
    fp32 path's bound."""
    from tests.kernels.test_conv_winograd_bf16 import _bound
    H, W = x64.shape[2:]
    s = np.abs(x64).max() * np.abs(w64).max()
    nb = _bound(x64 / np.abs(x64).max(), w64 / np.abs(w64).max(), (1, 1), (H, W), m) * s
    return nb.transpose(0, 3, 1, 2) + 8 * np.finfo(np.float32).eps * np.abs(b64)[None, :, None, None]


@needs_bf16
@pytest.mark.parametrize("on", [True, False], ids=["wino_bf16_on", "wino_bf16_off"])
def test_vdpbf16ps_path_winograd_convs(force, wino, on):
    """On the vdpbf16ps path a conv fp32 runs on F(2x2) Winograd takes the bf16 Winograd (bits differ from fp32,
    within the bf16 Winograd bound against a float64 numpy conv) unless bf16_winograd is forced off (the fp32
    session's bits); on AMX it takes the bf16 direct conv either way (bits differ)."""
    force(True)
    wino(on)
    geo = (64, 64, 3, 1, 1, 1, 15, 17)                       # 3x3 stride 1 on 64 channels, 255 pixels: F(2x2)
    model, x, inits = _model(*geo, np.random.default_rng(7))
    r = _session(model, "bf16").run(None, {"x": x})[0]
    fp = _session(model, "fp32").run(None, {"x": x})[0]
    taken = _bf16.bf16_conv_path() == "amx" or on
    assert np.array_equal(r, fp) != taken
    if taken and _bf16.bf16_conv_path() == "avx512bf16":
        _check_wino(r, x, inits, 2)


@pytest.fixture
def wino_f4():
    before = _bf16._wino_f4.forced
    yield _bf16.force_bf16_winograd_f4
    _bf16.force_bf16_winograd_f4(before)


def _check_wino(r, x, inits, m):
    x64, w0, b0 = x.astype(np.float64), inits["w0"].astype(np.float64), inits["b0"].astype(np.float64)
    ref = np.maximum(_conv64(x64, w0, b0, 1, 1, 1), 0)
    bound = _wino_bound(x64, w0, b0, m)
    assert np.all(np.abs(r - ref) <= bound), float(np.max(np.abs(r - ref) / bound))


@needs_bf16
@pytest.mark.parametrize("cin,cout,hw,taken", [(64, 64, 28, False), (160, 160, 24, True)],
                         ids=["f4_narrow_stays_fp32", "f4_wide_takes_bf16_f2"])
def test_vdpbf16ps_path_f4_convs_by_channels(force, wino, wino_f4, cin, cout, hw, taken):
    """With the bf16 F(4x4) off (force_bf16_winograd_f4), a conv fp32 runs on F(4x4) (images of 24x24 and more) takes
    the bf16 F(2x2) only from C * K / (C + K) >= BF16_WINOGRAD_F2_MIN_CHANNELS (64 -> 64: 32, stays fp32, the fp32
    session's bits; 160 -> 160: 80, taken: bits differ, within the bf16 F(2x2) bound against a float64 numpy
    conv)."""
    force(True)
    wino(True)
    wino_f4(False)
    if _bf16.bf16_conv_path() != "avx512bf16":
        pytest.skip("the bf16 Winograd is the vdpbf16ps path's (AMX runs these on the bf16 direct conv)")
    assert (cin * cout >= nhwc_conv.BF16_WINOGRAD_F2_MIN_CHANNELS * (cin + cout)) == taken
    model, x, inits = _model(cin, cout, 3, 1, 1, 1, hw, hw, np.random.default_rng(cin))
    r = _session(model, "bf16").run(None, {"x": x})[0]
    fp = _session(model, "fp32").run(None, {"x": x})[0]
    assert np.array_equal(r, fp) != taken
    if taken:
        _check_wino(r, x, inits, 2)


@needs_bf16
@pytest.mark.parametrize("cin,cout,hw", [(64, 64, 28), (160, 160, 24), (16, 64, 25)])
def test_vdpbf16ps_path_f4_convs_take_bf16_f4(force, wino, wino_f4, cin, cout, hw):
    """With the bf16 F(4x4) on (the default, BF16_WINOGRAD_F4), every conv fp32 runs on F(4x4) takes the bf16 F(4x4),
    whatever its channels: it was packed for the bf16 F(4x4) (path winograd4-bf16), its bits differ from the fp32
    session's and from the bf16 F(2x2)'s (the F(4x4)-off session of test_vdpbf16ps_path_f4_convs_by_channels), and
    they are within the bf16 F(4x4) bound against a float64 numpy conv (oracle)."""
    force(True)
    wino(True)
    wino_f4(True)
    if _bf16.bf16_conv_path() != "avx512bf16":
        pytest.skip("the bf16 Winograd is the vdpbf16ps path's (AMX runs these on the bf16 direct conv)")
    model, x, inits = _model(cin, cout, 3, 1, 1, 1, hw, hw, np.random.default_rng(cin))
    sess = _session(model, "bf16")
    r = sess.run(None, {"x": x})[0]
    (conv,) = [st[0] for p in sess.plans for st in p.steps if st[6] == "NhwcConv" and st[0]._wshape[2] == 3]
    assert conv._conv_path(conv._wshape) == "winograd4-bf16"
    fp = _session(model, "fp32").run(None, {"x": x})[0]
    assert not np.array_equal(r, fp)
    wino_f4(False)
    f2 = _session(model, "bf16").run(None, {"x": x})[0]
    assert not np.array_equal(r, f2)
    _check_wino(r, x, inits, 4)


@needs_bf16
@pytest.mark.parametrize("f4", [True, False], ids=["f4_on", "f4_off"])
@pytest.mark.parametrize("geo", [(64, 64, 3, 1, 1, 1, 15, 17), (128, 64, 1, 1, 0, 1, 14, 14)],
                         ids=["winograd_bf16", "direct_bf16"])
def test_epcontext_reloads_bf16_conv_packings(force, wino, wino_f4, tmp_path, geo, f4):
    """An EPContext blob of a bf16 session whose convs took the bf16 Winograd (3x3) or the bf16 GEMM (1x1) reloads
    those packings (oracle: the exporting session's bits; the kernel describes a blob's packing before its buffers
    come, W then counts as constant) and records what decided them (bf16_conv_packings: "avx512bf16+winograd", or
    "avx512bf16+winograd4" with the bf16 F(4x4) on); a process where the bf16 Winograd is off, or the bf16 F(4x4) set
    the other way, refuses the blob by name instead of misreading a packing."""
    force(True)
    wino(True)
    wino_f4(f4)
    name = "avx512bf16+winograd" + ("4" if f4 else "")
    if _bf16.bf16_conv_path() != "avx512bf16":
        pytest.skip("the bf16 Winograd is the vdpbf16ps path's (AMX runs these convs on the bf16 direct conv)")
    model, x, _ = _model(*geo, np.random.default_rng(11))
    out = tmp_path / "ctx.onnx"

    def session(path_or_model, **config):
        so = onnxep.SessionOptions()
        so.add_session_config_entry("onnxep.compute_precision", "bf16")
        for k, v in config.items():
            so.add_session_config_entry(k, v)
        return onnxep.InferenceSession(path_or_model, so)

    want = session(model.SerializeToString(), **{"ep.context_enable": "1", "ep.context_file_path": str(out)}) \
        .run(None, {"x": x})[0]
    fp = _session(model, "fp32").run(None, {"x": x})[0]
    assert not np.array_equal(want, fp)                             # bf16 ran
    assert _bf16.bf16_conv_packings() == name
    assert name.encode() in out.read_bytes() or any(
        p.suffix != ".onnx" and name.encode() in p.read_bytes() for p in tmp_path.iterdir())
    np.testing.assert_array_equal(session(str(out)).run(None, {"x": x})[0], want)
    wino_f4(not f4)
    with pytest.raises(Exception, match=rf"its convs were packed for the bf16 conv path '{re.escape(name)}'"):
        session(str(out))
    wino_f4(f4)
    wino(False)
    with pytest.raises(Exception, match=rf"its convs were packed for the bf16 conv path '{re.escape(name)}'"):
        session(str(out))


@needs_bf16
@pytest.mark.parametrize("hw", [(15, 17), (28, 30)], ids=["f2", "f4"])
def test_bf16_winograd_compiled_run_loop_matches_python_loop(force, wino, hw):
    """The bf16 Winograd conv, F(2x2) (255 pixels) and F(4x4) (840), through the compiled run loop (RL_CONV_NHWC,
    ConvNhwc.wino carrying WINO_BF16) gives the bits of the Python loop (oracle: the same session with
    device.COMPILED_RUNS off), and of 1 and 2 threads."""
    from onnxep.backends.cpu import device
    from tests.ops.test_bconv_nhwc import _programs
    force(True)
    wino(True)
    model, x, _ = _model(64, 64, 3, 1, 1, 1, *hw, np.random.default_rng(5))
    sess = _session(model, "bf16")
    got = [sess.run(None, {"x": x}) for _ in range(2)][1]
    assert _programs(sess) or _bf16.bf16_conv_path() != "avx512bf16"
    if _bf16.bf16_conv_path() == "avx512bf16":
        (conv,) = [st[0] for p in sess.plans for st in p.steps if st[6] == "NhwcConv" and st[0]._wshape[2] == 3]
        assert conv._conv_path(conv._wshape) == ("winograd4-bf16" if hw[0] >= 24 else "winograd-bf16")
    device.COMPILED_RUNS = False
    try:
        ref = _session(model, "bf16")
        want = ref.run(None, {"x": x})
        assert not _programs(ref)
    finally:
        device.COMPILED_RUNS = True
    one = _session(model, "bf16", threads=1).run(None, {"x": x})
    for g, w, o in zip(got, want, one):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(g, o)


# 1x1 convs under BF16_CONV_MIN_K products per output (C, cout, H, W, group): the vdpbf16ps path's pointwise rule
# (BF16_POINTWISE_MIN_K input channels and BF16_POINTWISE_MIN_COUT output channels, per group) takes 64 -> 64,
# 32 -> 128, 48 -> 192, 64 -> 32, 24 -> 112, 16 -> 64, 4 groups of 68 -> 68 and of 34 -> 34; it keeps 8 -> 64, 12 -> 48,
# 8 -> 32 and 4 groups of 12 -> 24 (C per group) fp32. (At 16 outputs or fewer per group the direct conv's k-pair
# kernel runs on bf16 operands instead: ops/_bf16.py bf16_kpair.)
POINTWISE_TAKEN = [(64, 64, 9, 10, 1), (32, 128, 7, 9, 1), (48, 192, 6, 6, 1), (272, 272, 5, 7, 4), (64, 32, 9, 10, 1),
                   (24, 112, 7, 9, 1), (16, 64, 8, 8, 1), (136, 136, 5, 7, 4)]
POINTWISE_KEPT = [(8, 64, 7, 9, 1), (12, 48, 8, 8, 1), (8, 32, 5, 7, 1), (48, 96, 5, 7, 4)]


@needs_bf16
@pytest.mark.parametrize("geo,taken", [(g, True) for g in POINTWISE_TAKEN] + [(g, False) for g in POINTWISE_KEPT],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else ("taken" if v else "kept"))
def test_vdpbf16ps_path_pointwise_rule(force, geo, taken):
    """On the vdpbf16ps path a 1x1 conv under BF16_CONV_MIN_K takes the bf16 GEMM by the pointwise rule: taken, its
    bits differ from the fp32 session's and are within the bf16 bound of tests/ops/test_bconv_nhwc.py against a
    float64 numpy conv (oracle), per group; kept, the fp32 session's bits."""
    from tests.ops.test_bconv_nhwc import _gbound, _gconv64, _gmodel
    force(True)
    if _bf16.bf16_conv_path() != "avx512bf16":
        pytest.skip("the pointwise rule is the vdpbf16ps path's (AMX keeps BF16_CONV_MIN_K)")
    C, cout, H, W, group = geo
    cg, og = C // group, cout // group
    assert (cg < nhwc_conv.BF16_CONV_MIN_K and cg >= nhwc_conv.BF16_POINTWISE_MIN_K
            and og >= nhwc_conv.BF16_POINTWISE_MIN_COUT) == taken
    rng = np.random.default_rng(C + cout)
    model, x, w0, b0 = _gmodel(C, cout, 1, 1, 0, 1, H, W, group, rng)
    r = _session(model, "bf16").run(None, {"x": x})[0]
    fp = _session(model, "fp32").run(None, {"x": x})[0]
    assert np.array_equal(r, fp) != taken
    x64, w64 = x.astype(np.float64), w0.astype(np.float64)
    ref = np.maximum(_gconv64(x64, w64, b0.astype(np.float64), 1, 0, 1, group), 0)
    bound = _gbound(x64, w64, b0, None, 1, 0, 1, group)
    assert np.all(np.abs(r - ref) <= bound), float(np.max(np.abs(r - ref) / bound))
