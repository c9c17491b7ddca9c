"""bf16 channel-last convs: onnxep.compute_precision=bf16 runs a dense or grouped NhwcConv (not depthwise, constant W,
enough products per output; ops/onnxep/nhwc_conv.py BF16_CONV_*, _BF16_CONV_RULES) on the bf16 GEMM where the CPU has
AMX-BF16 or a vdpbf16ps that pays (ops/_bf16.py bf16_conv_path; the session tests force it on): onnxep/_k_bgemm.pxi
BConvNhwc, im2col rows gathered and rounded to bf16 while A is packed; onnxep/_native/bgemm.h.
The kernel is tested alone on every geometry, with every bf16 micro-kernel this CPU runs forced in turn (generic C,
avx512bf16 vdpbf16ps, amx AMX-BF16 tiles); sessions where the routing rule sends a conv to it.

Oracles:
- a float64 numpy conv of the fp32 inputs, within the bf16 bound tests/kernels/test_bgemm.py derives: per element
  |err| <= (2**-7 + 2**-16 + K * 2**-23) * S + 2**-21 * (S + |bias| + |residual|), S the conv of |x| and |w| and K the
  taps (kh * kw * C); Relu is 1-Lipschitz, so the bound carries over;
- grouped: the float64 conv of each group's channels with its filters, concatenated, within the same bound (K of
  one group); the grouped kernel on every ISA variant (generic, avx2, avx512 builds) and bf16 micro-kernel this CPU
  runs;
- the same bf16 session through the Python loop (compiled runs off): the RL_BCONV_NHWC step gives the same bits;
- the fp32 session: the outputs differ (the bf16 path ran); below the routing rule, the same bits (fp32 ran)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

import onnxep
from onnxep import _kernels
from onnxep.backends.cpu import device
from onnxep.ops import _bf16
from onnxep.ops.onnxep import nhwc_conv
from tests._util import make_model
from tests.graph.test_runloop import _programs

pytestmark = pytest.mark.skipif(not _kernels.bgemm_hw(), reason="bf16 runs in fp32 without AVX512_BF16")


@pytest.fixture
def _convs_on(monkeypatch):
    """Sends the convs the routing rule admits to bf16 on every AVX512_BF16 CPU: AMX where the CPU has it, vdpbf16ps
    elsewhere, also where its probe would keep them fp32; with the AMX path's rule on both (the vdpbf16ps one leaves
    Winograd convs fp32: tests/ops/test_bf16_conv_gate.py tests that gate and that rule)."""
    monkeypatch.setitem(nhwc_conv._BF16_CONV_RULES, "avx512bf16", nhwc_conv._BF16_CONV_RULES["amx"])
    before = _bf16._conv_force
    _bf16.force_bf16_convs(True)
    yield
    _bf16.force_bf16_convs(before)


convs_on = pytest.mark.usefixtures("_convs_on")

KERNELS = [k for k in _kernels.BGEMM_KERNELS if _kernels.bgemm_have(k)]
# (C, cout, kernel, stride, pad, dilation, H, W): 3x3 same, strided, a plain 1x1 (X is A), a strided 1x1, a 7x7 stem
# on 3 channels (odd K), dilation 2, odd channel counts and a tail of rows
GEOMETRIES = [(16, 32, 3, 1, 1, 1, 9, 10), (8, 24, 3, 2, 1, 1, 11, 12), (32, 40, 1, 1, 0, 1, 7, 9),
              (24, 16, 1, 2, 0, 1, 9, 9), (3, 16, 7, 2, 3, 1, 17, 15), (5, 33, 3, 1, 2, 2, 8, 8),
              (6, 40, 3, 1, 1, 1, 21, 19), (5, 24, 3, 1, 1, 1, 20, 20), (3, 16, 7, 2, 3, 1, 40, 36),
              (6, 40, 3, 1, 1, 1, 14, 14), (5, 24, 3, 1, 1, 1, 14, 14)]
# (the last five have enough pixels for the per-item packing at 1 and 2 threads -- even and odd C; the smaller ones
# pack the whole A first, at 2 threads always: the 1 = 2 threads check compares the two ways; 2 x 14 x 14 = 392
# pixels are 8 items, the last of 56 rows: bgemm.h bg_nmb)
# the same kinds, with the channels the routing rule sends to bf16
ROUTED = [(64, 32, 3, 1, 1, 1, 9, 10), (64, 24, 3, 2, 1, 1, 11, 12), (128, 40, 1, 1, 0, 1, 7, 9),
          (128, 16, 1, 2, 0, 1, 9, 9), (65, 33, 3, 1, 2, 2, 8, 8)]


@pytest.fixture(params=KERNELS)
def kernel(request):
    _kernels.bgemm_force(request.param)
    assert _kernels.bgemm_kernel() == request.param
    yield request.param
    _kernels.bgemm_force(None)


def _conv64(x, w, b, stride, pad, dil):
    N, C, H, W = x.shape
    O, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    Ho = (H + 2 * pad - dil * (kh - 1) - 1) // stride + 1
    Wo = (W + 2 * pad - dil * (kw - 1) - 1) // stride + 1
    y = np.zeros((N, O, Ho, Wo))
    for ky in range(kh):
        for kx in range(kw):
            patch = xp[:, :, ky * dil:ky * dil + stride * (Ho - 1) + 1:stride,
                       kx * dil:kx * dil + stride * (Wo - 1) + 1:stride]
            y += np.einsum("nchw,oc->nohw", patch, w[:, :, ky, kx])
    return y + (0 if b is None else b[None, :, None, None])


def _bound(x, w, b, res, stride, pad, dil):
    s = _conv64(np.abs(x), np.abs(w), None, stride, pad, dil)
    K = w.shape[1] * w.shape[2] * w.shape[3]
    extra = (0 if b is None else np.abs(b)[None, :, None, None]) + (0 if res is None else np.abs(res))
    return (2 ** -7 + 2 ** -16 + K * 2 ** -23) * s + 2 ** -21 * (s + extra)


def _model(C, cout, k, stride, pad, dil, H, W, rng):
    inits = {"w0": (rng.standard_normal((cout, C, k, k)) / np.sqrt(C * k * k)).astype(np.float32),
             "b0": rng.standard_normal(cout).astype(np.float32),
             "w1": (rng.standard_normal((cout, cout, 1, 1)) / np.sqrt(cout)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[k, k], strides=[stride] * 2,
                              pads=[pad] * 4, dilations=[dil] * 2),
             helper.make_node("Relu", ["c0"], ["r"]),
             helper.make_node("Conv", ["r", "w1"], ["c1"]),
             helper.make_node("Add", ["c1", "r"], ["s"])]           # NhwcConv with a residual input
    x = rng.standard_normal((2, C, H, W)).astype(np.float32)
    return make_model(nodes, {"x": x}, ["r", "s"], initializers=inits, opset=17), x, inits


def _session(model, precision, threads=2):
    so = onnxep.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("onnxep.compute_precision", precision)
    return onnxep.InferenceSession(model.SerializeToString(), so)


def _ids(g):
    return "C{}-o{}-k{}-s{}-p{}-d{}-{}x{}".format(*g)


@pytest.mark.parametrize("geo", GEOMETRIES, ids=_ids)
@pytest.mark.parametrize("act", [None, "Relu", ("Clip", -0.5, 0.5)], ids=["none", "relu", "clip"])
def test_bconv_kernel_within_bound(kernel, geo, act):
    """BConvNhwc alone: bias, residual and the epilogue activation; NHWC arrays; 1 and 2 threads give the same bits."""
    C, cout, k, stride, pad, dil, H, W = geo
    rng = np.random.default_rng(sum(geo))
    x = rng.standard_normal((2, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((cout, C, k, k)) / np.sqrt(C * k * k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    ref = _conv64(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), stride, pad, dil)
    res = rng.standard_normal(ref.shape).astype(np.float32)
    bound = _bound(x.astype(np.float64), w.astype(np.float64), b, res, stride, pad, dil)
    ref = ref + res
    if act == "Relu":
        ref = np.maximum(ref, 0)
    elif act is not None:
        ref = np.clip(ref, act[1], act[2])
    bt = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k * k * C, cout))
    bp = np.full(_kernels.bgemm_pack_b_size(k * k * C, cout), np.nan, np.float32)
    _kernels.bgemm_pack_b(bt, False, bp)
    Ho, Wo = ref.shape[2:]
    conv = _kernels.BConvNhwc((2, H, W, C), bp, cout, (k, k), (stride, stride), (dil, dil), (pad, pad), (Ho, Wo),
                              act)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1)
    rh = np.ascontiguousarray(res.transpose(0, 2, 3, 1)).reshape(-1)
    outs = []
    for nt in (1, 2):
        y = np.full(2 * Ho * Wo * cout, np.nan, np.float32)
        conv.run(xh, b, rh, y, nt)
        outs.append(y.reshape(2, Ho, Wo, cout).transpose(0, 3, 1, 2))
    np.testing.assert_array_equal(outs[0], outs[1])
    yr = rh.copy()                       # the residual taken in place (NhwcConv.inplace): Y is Z's memory
    conv.run(xh, b, yr, yr, 2)
    np.testing.assert_array_equal(yr.reshape(2, Ho, Wo, cout).transpose(0, 3, 1, 2), outs[0])
    assert np.all(np.abs(outs[0] - ref) <= bound), float(np.max(np.abs(outs[0] - ref) / bound))


def test_bconv_kernel_checks_sizes():
    bp = np.zeros(_kernels.bgemm_pack_b_size(9 * 8, 4), np.float32)
    with pytest.raises(ValueError, match="packed weight"):
        _kernels.BConvNhwc((1, 5, 5, 8), bp[:-1], 4, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5))
    conv = _kernels.BConvNhwc((1, 5, 5, 8), bp, 4, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5))
    with pytest.raises(ValueError, match="x has"):
        conv.run(np.zeros(199, np.float32), None, None, np.zeros(100, np.float32))
    with pytest.raises(ValueError, match="residual"):
        conv.run(np.zeros(200, np.float32), None, np.zeros(99, np.float32), np.zeros(100, np.float32))


@convs_on
@pytest.mark.parametrize("geo", ROUTED, ids=_ids)
def test_bf16_conv_within_bound(kernel, geo):
    C, cout, k, stride, pad, dil, H, W = geo
    rng = np.random.default_rng(sum(geo))
    model, x, inits = _model(*geo, rng)
    sess = _session(model, "bf16")
    feeds = [{"x": x}, {"x": rng.standard_normal(x.shape).astype(np.float32)}]
    for f in feeds + feeds:                                   # the second pass runs the compiled program
        r, s = sess.run(None, f)
        x64 = f["x"].astype(np.float64)
        w0, b0, w1 = (inits[n].astype(np.float64) for n in ("w0", "b0", "w1"))
        ref_c0 = _conv64(x64, w0, b0, stride, pad, dil)
        bound = _bound(x64, w0, b0, None, stride, pad, dil)
        assert np.all(np.abs(r - np.maximum(ref_c0, 0)) <= bound), float(np.max(np.abs(r - np.maximum(ref_c0, 0))
                                                                                 / bound))
        r64 = r.astype(np.float64)                            # the 1x1 + residual, from the session's own r
        ref_s = _conv64(r64, w1, None, 1, 0, 1) + r64
        bound_s = _bound(r64, w1, None, r64, 1, 0, 1)
        assert np.all(np.abs(s - ref_s) <= bound_s), float(np.max(np.abs(s - ref_s) / bound_s))
    progs = _programs(sess)
    assert progs and all(p.n_py == 0 for p in progs), [(p.n_c, p.n_py) for p in progs]
    assert not np.array_equal(r, _session(model, "fp32").run(None, feeds[-1])[0])     # bf16 ran


@convs_on
def test_bf16_conv_compiled_matches_python_loop():
    rng = np.random.default_rng(3)
    model, x, _ = _model(*ROUTED[1], rng)
    feeds = [{"x": rng.standard_normal(x.shape).astype(np.float32)} for _ in range(3)]
    got = [_session(model, "bf16").run(None, f) for f in feeds]
    sess = _session(model, "bf16")
    got = [sess.run(None, f) for f in feeds + feeds][len(feeds):]
    device.COMPILED_RUNS = False
    try:
        ref = _session(model, "bf16")
        want = [ref.run(None, f) for f in feeds]
        assert not _programs(ref)
    finally:
        device.COMPILED_RUNS = True
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            np.testing.assert_array_equal(a, b)


@convs_on
def test_bf16_conv_threads_agree():
    """The rows are split between threads, never a row's sum: 1 and 2 threads give the same bits."""
    rng = np.random.default_rng(4)
    model, x, _ = _model(*ROUTED[0], rng)
    a = _session(model, "bf16", 1).run(None, {"x": x})
    b = _session(model, "bf16", 2).run(None, {"x": x})
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


@convs_on
def test_bf16_conv_residual_that_broadcasts_at_run_time():
    """A residual Add folded into a bf16 conv whose shapes the pass could not prove equal (independent symbolic
    dims): where they differ at run time the conv runs without it (a BConvNhwc of its own), then Add's broadcast and
    the activation. Oracle: the fp32 session (tested against onnxruntime in tests/graph/test_layout_passes.py),
    within bf16's rounding (2**-6 of the output's magnitude)."""
    import onnx

    c = 64
    rng = np.random.default_rng(5)
    f = onnx.TensorProto.FLOAT
    w = {n: (rng.standard_normal(s) / np.sqrt(np.prod(s[1:]))).astype(np.float32)
         for n, s in (("w1", (c, c, 1, 1)), ("w2", (c, c, 3, 3)), ("w3", (c, c, 1, 1)))}
    nodes = [helper.make_node("Conv", ["x1", "w1"], ["c1"]),
             helper.make_node("Conv", ["x2", "w2"], ["c2"], pads=[1] * 4),
             helper.make_node("Add", ["c1", "c2"], ["s"]),
             helper.make_node("Relu", ["s"], ["a"]),
             helper.make_node("Conv", ["a", "w3"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x1", f, ["n1", c, "h1", "w1"]),
                                       helper.make_tensor_value_info("x2", f, ["n2", c, "h2", "w2"])],
                          [helper.make_tensor_value_info("y", f, None)],
                          [onnx.numpy_helper.from_array(v, n) for n, v in w.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    bf, fp = _session(model, "bf16"), _session(model, "fp32")
    for s1, s2 in (((2, c, 5, 6), (2, c, 1, 1)), ((2, c, 5, 6), (2, c, 5, 6)), ((1, c, 4, 3), (3, c, 4, 3))):
        feeds = {"x1": rng.standard_normal(s1).astype(np.float32), "x2": rng.standard_normal(s2).astype(np.float32)}
        want = fp.run(None, feeds)[0]
        for _ in range(3):
            got = bf.run(None, feeds)[0]
            assert got.shape == want.shape
            assert np.max(np.abs(got - want)) <= 2 ** -6 * np.max(np.abs(want))
        assert not np.array_equal(got, want)


# grouped convs (C, cout, kernel, stride, pad, dilation, H, W, group): the groups run one after the other, each on
# its channels of X (pixel stride C) into its columns of Y (row stride cout), weight group g packed at g * its size.
# 3x3 same on 2 groups; 3 groups of 3 (odd) channels, strided, enough pixels for the per-item packing; plain 1x1 on
# 4 groups (X is A, lda C) with few pixels and with many; 5x5 of 2 groups of 5 (odd) -> 33 (a tail of columns);
# a residual on every one. With overlapping taps, an even channel count per group and at least 4 * BG_MB pixels, X is
# rounded to bf16 once and the rows copied from it (bg_conv.xb): 3x3 on 2 groups of 8, a strided 3x3 on one group of
# 8 (the padded edges), a group of 6 ((6, 40, ...) in GEOMETRIES too); odd channel counts keep converting per tap.
# Dense (group 1) convs with dilation 1 gather a kernel row's in-image taps as one run of X (bgemm.h bg_conv_kx_range):
# a 7x7 stride-2 stem on 3 (odd) channels with enough pixels for the per-item packing, an 11x11 stride-4 one, a 7x7
# wider than its 5x4 image (runs clipped on both sides, even C), a 5x5 on a 3x2 image (odd C), a 5x5 on 16 channels
# (runs copied from X rounded once, or converted), and dilation 2 on an even count (tap by tap)
GROUPED = [(3, 16, 7, 2, 3, 1, 30, 29, 1), (3, 8, 11, 4, 2, 1, 35, 35, 1), (4, 8, 7, 1, 3, 1, 5, 4, 1),
           (5, 8, 5, 1, 2, 1, 3, 2, 1), (16, 32, 5, 1, 2, 1, 16, 14, 1), (6, 16, 3, 1, 2, 2, 9, 9, 1),
           (8, 12, 3, 1, 1, 1, 9, 10, 2), (9, 6, 3, 2, 1, 1, 30, 31, 3), (8, 12, 1, 1, 0, 1, 5, 5, 4),
           (16, 40, 1, 1, 0, 1, 20, 21, 4), (10, 66, 5, 1, 2, 1, 15, 16, 2), (12, 8, 3, 1, 2, 2, 8, 8, 2),
           (16, 24, 3, 1, 1, 1, 14, 15, 2), (8, 16, 3, 2, 1, 1, 30, 29, 1), (12, 36, 5, 1, 2, 1, 13, 14, 2),
           # plain 1x1 convs of many pixels (items of packed rows: a pass over contiguous pixels), odd channels
           (7, 10, 1, 1, 0, 1, 14, 15, 1), (15, 12, 1, 1, 0, 1, 14, 15, 3),
           # odd channels rounded once (bg_conv.xh) or per run: a stride-1 3x3 with border rows on every side, a
           # dilated 3x3 (taps one by one), 3 groups of 3 channels at stride 2; a patchify conv (stride = kernel, no
           # overlap: converted per run)
           (3, 8, 3, 1, 1, 1, 20, 21, 1), (5, 16, 3, 1, 2, 2, 20, 20, 1), (9, 6, 5, 2, 2, 1, 31, 30, 3),
           (3, 24, 4, 4, 0, 1, 48, 44, 1)]
VARIANT_KERNELS = [(v, k) for v in _kernels.AVAILABLE
                   for k in __import__(f"onnxep._kernels_{v}", fromlist=["x"]).BGEMM_KERNELS
                   if __import__(f"onnxep._kernels_{v}", fromlist=["x"]).bgemm_have(k)]


def _gconv64(x, w, b, stride, pad, dil, group):
    cg, og = x.shape[1] // group, w.shape[0] // group
    return np.concatenate([_conv64(x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og],
                                   None if b is None else b[g * og:(g + 1) * og], stride, pad, dil)
                           for g in range(group)], axis=1)


def _gbound(x, w, b, res, stride, pad, dil, group):
    s = _gconv64(np.abs(x), np.abs(w), None, stride, pad, dil, group)
    K = w.shape[1] * w.shape[2] * w.shape[3]
    extra = (0 if b is None else np.abs(b)[None, :, None, None]) + (0 if res is None else np.abs(res))
    return (2 ** -7 + 2 ** -16 + K * 2 ** -23) * s + 2 ** -21 * (s + extra)


@pytest.mark.parametrize("vk", VARIANT_KERNELS, ids=["-".join(p) for p in VARIANT_KERNELS])
@pytest.mark.parametrize("geo", GROUPED, ids=lambda g: _ids(g[:8]) + f"-g{g[8]}")
def test_bconv_grouped_kernel_within_bound(vk, geo):
    """BConvNhwc of a grouped conv on every ISA variant and bf16 micro-kernel this CPU runs: the float64 per-group
    oracle within the bound; 1 and 2 threads the same bits; the residual taken in place the same bits; X rounded to
    bf16 once (bconv_xb(1)) or per tap (bconv_xb(0)) the same bits."""
    import importlib
    mod = importlib.import_module(f"onnxep._kernels_{vk[0]}")
    C, cout, k, stride, pad, dil, H, W, group = geo
    rng = np.random.default_rng(sum(geo))
    x = rng.standard_normal((2, C, H, W)).astype(np.float32)
    w = (rng.standard_normal((cout, C // group, k, k)) / np.sqrt(C // group * k * k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = _gconv64(x64, w64, b.astype(np.float64), stride, pad, dil, group)
    res = rng.standard_normal(ref.shape).astype(np.float32)
    bound = _gbound(x64, w64, b, res, stride, pad, dil, group)
    ref = np.maximum(ref + res, 0)
    bp = np.full(mod.bconv_pack_weight_size(cout, C // group, k, k, group), np.nan, np.float32)
    mod.bconv_pack_weight(w, group, bp)
    assert not np.isnan(bp).any()                         # every slot written
    Ho, Wo = ref.shape[2:]
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).reshape(-1)
    rh = np.ascontiguousarray(res.transpose(0, 2, 3, 1)).reshape(-1)
    mod.bgemm_force(vk[1])
    try:
        conv = mod.BConvNhwc((2, H, W, C), bp, cout, (k, k), (stride, stride), (dil, dil), (pad, pad), (Ho, Wo),
                             "Relu", group)
        outs = []
        for nt in (1, 2):
            y = np.full(2 * Ho * Wo * cout, np.nan, np.float32)
            conv.run(xh, b, rh, y, nt)
            outs.append(y.reshape(2, Ho, Wo, cout).transpose(0, 3, 1, 2))
        yr = rh.copy()
        conv.run(xh, b, yr, yr, 2)
        for mode in (0, 1):         # X rounded to bf16 once or per tap: the same rounding, the same bits
            mod.bconv_xb(mode)
            y = np.full(2 * Ho * Wo * cout, np.nan, np.float32)
            conv.run(xh, b, rh, y, 2)
            np.testing.assert_array_equal(y.reshape(2, Ho, Wo, cout).transpose(0, 3, 1, 2), outs[0])
        # into a channel slice of a wider output (a Concat's): pixels ldy floats apart, the other channels untouched
        ldy, off = cout + 7, 3
        yc = np.full(2 * Ho * Wo * cout, np.nan, np.float32)
        conv.run(xh, b, None, yc, 2)
        wide = np.full(2 * Ho * Wo * ldy, np.nan, np.float32)
        conv.run(xh, b, None, wide[off:off + (2 * Ho * Wo - 1) * ldy + cout], 2, ldy)
        wide = wide.reshape(-1, ldy)
        np.testing.assert_array_equal(wide[:, off:off + cout], yc.reshape(-1, cout))
        assert np.isnan(wide[:, :off]).all() and np.isnan(wide[:, off + cout:]).all()
    finally:
        mod.bgemm_force(None)
        mod.bconv_xb(None)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(yr.reshape(2, Ho, Wo, cout).transpose(0, 3, 1, 2), outs[0])
    assert np.all(np.abs(outs[0] - ref) <= bound), float(np.max(np.abs(outs[0] - ref) / bound))


def test_bconv_ldy_checks_sizes():
    bp = np.zeros(_kernels.bconv_pack_weight_size(8, 4, 1, 1, 1), np.float32)
    conv = _kernels.BConvNhwc((1, 5, 5, 4), bp, 8, (1, 1), (1, 1), (1, 1), (0, 0), (5, 5), None, 1)
    x = np.zeros(100, np.float32)
    with pytest.raises(ValueError, match="ldy=7 must be at least cout=8"):
        conv.run(x, None, None, np.zeros(24 * 7 + 8, np.float32), 1, 7)
    with pytest.raises(ValueError, match="without a residual"):
        conv.run(x, None, np.zeros(200, np.float32), np.zeros(24 * 12 + 8, np.float32), 1, 12)
    with pytest.raises(ValueError, match="y 200"):
        conv.run(x, None, None, np.zeros(200, np.float32), 1, 12)


@convs_on
@pytest.mark.parametrize("threads", [1, 2])
def test_bf16_convs_write_concat_slices(threads):
    """bf16 convs feeding a channel Concat write their slices in place (BConvNhwc's ldy; RL_BCONV_NHWC_LDY in the
    compiled run loop) and the Concat does not run: SqueezeNet's fire module twice with channels the rule sends to
    bf16. Oracles: the session's own Python loop (its first run, the slices written by compute) gives the same bits
    as the compiled runs; onnxruntime fp32 within bf16's rounding (2**-6 of the output's magnitude); the fp32
    session's output differs (bf16 ran)."""
    from tests._util import run_ort
    from tests.graph.test_runloop_concat_slots import _fire_model
    model, feeds = _fire_model(1, 13, 13, 128, 128, 64, 64)
    want = run_ort(model, feeds)[0]
    sess = _session(model, "bf16", threads)
    first = sess.run(None, feeds)[0]
    for _ in range(3):
        np.testing.assert_array_equal(sess.run(None, feeds)[0], first)
    plan = sess.plans[0]
    assert plan.slots
    py = [plan.run_list()[seg[1]][6] for p in _programs(sess) for seg in p.segments if not seg[0]]
    assert _programs(sess) and "Concat" not in py and not any("Conv" in op for op in py), py
    assert np.max(np.abs(first - want)) <= 2 ** -6 * np.max(np.abs(want))
    assert not np.array_equal(first, _session(model, "fp32", threads).run(None, feeds)[0])


def test_bconv_grouped_checks_sizes():
    with pytest.raises(ValueError, match="group"):
        _kernels.bconv_pack_weight_size(6, 4, 3, 3, 4)
    bp = np.zeros(_kernels.bconv_pack_weight_size(8, 4, 3, 3, 2), np.float32)
    with pytest.raises(ValueError, match="packed weight"):       # one group's packing for two
        _kernels.BConvNhwc((1, 5, 5, 8), bp[:len(bp) // 2], 8, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5), None, 2)
    with pytest.raises(ValueError, match="group"):
        _kernels.BConvNhwc((1, 5, 5, 9), bp, 8, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5), None, 2)
    with pytest.raises(ValueError, match="out has"):
        _kernels.bconv_pack_weight(np.zeros((8, 4, 3, 3), np.float32), 2, bp[:-1])


def _gmodel(C, cout, k, stride, pad, dil, H, W, group, rng):
    w0 = (rng.standard_normal((cout, C // group, k, k)) / np.sqrt(C // group * k * k)).astype(np.float32)
    b0 = rng.standard_normal(cout).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], kernel_shape=[k, k], strides=[stride] * 2,
                              pads=[pad] * 4, dilations=[dil] * 2, group=group),
             helper.make_node("Relu", ["c0"], ["r"])]
    x = rng.standard_normal((1, C, H, W)).astype(np.float32)
    return make_model(nodes, {"x": x}, ["r"], initializers={"w0": w0, "b0": b0}, opset=17), x, w0, b0


# convs the routing rule sends to bf16 since grouped convs and the wide rule (BF16_CONV_WIDE_*): AlexNet's grouped
# 5x5 (2 groups of 48 -> 128), a grouped 3x3 of 2 groups of 64 -> 64, 5x5 24 -> 64 and 3x3 32 -> 128 (fewer than 64
# channels in), an 11x11 stride-4 stem on 3 channels -> 96 (K 363, AlexNet's), a 7x7 stride-2 one -> 96 (K 147,
# cout 96: ZFNet-512's), 3x3 16 -> 96 (K 144), from 64 outputs (BF16_CONV_WIDER_MIN_COUT) 3x3 16 -> 64 (K 144), the
# 3-channel 7x7 stem -> 64 (K 147, ResNet's: enough pixels for X rounded once, bg_conv.xh) and -> 80; and ones it keeps
# fp32: 3x3 32 -> 32 (cout), 5x5 16 -> 32, a 3-channel 9x9 -> 32 (K 243, cout), the 3-channel 7x7 stem -> 48 (K 147,
# cout under 64). Direct convs of at most 16 output channels per group run the bf16 k-pair kernel
# (onnxep_dconv_kpb): a grouped 3x3 of 4 groups of 16 -> 16, the 3-channel 7x7 stem -> 16, 3x3 16 -> 12, 3x3 8 -> 8
ROUTED_NEW = [(3, 96, 11, 4, 2, 1, 39, 43, 1), (3, 96, 7, 2, 3, 1, 24, 22, 1), (16, 96, 3, 1, 1, 1, 12, 11, 1), (96, 256, 5, 1, 2, 1, 13, 13, 2), (128, 128, 3, 1, 1, 1, 9, 10, 2), (24, 64, 5, 1, 2, 1, 13, 13, 1),
              (32, 128, 3, 2, 1, 1, 15, 14, 1), (128, 128, 3, 1, 1, 1, 16, 16, 2), (64, 64, 3, 1, 1, 1, 15, 17, 1),
              (64, 64, 3, 1, 1, 1, 11, 11, 4), (3, 16, 7, 2, 3, 1, 30, 30, 1), (16, 12, 3, 1, 1, 1, 11, 11, 1),
              (8, 8, 3, 1, 1, 1, 11, 11, 1), (16, 64, 3, 1, 1, 1, 11, 11, 1), (3, 64, 7, 2, 3, 1, 30, 30, 1),
              (3, 64, 7, 2, 3, 1, 56, 54, 1), (3, 80, 7, 2, 3, 1, 20, 20, 1)]
KEPT_FP32 = [(32, 32, 3, 1, 1, 1, 11, 11, 1), (16, 32, 5, 1, 2, 1, 11, 11, 1), (3, 32, 9, 1, 4, 1, 12, 12, 1),
             (3, 48, 7, 2, 3, 1, 30, 30, 1)]


@convs_on
@pytest.mark.parametrize("geo", ROUTED_NEW, ids=lambda g: _ids(g[:8]) + f"-g{g[8]}")
def test_bf16_grouped_and_wide_convs_within_bound(geo):
    """Sessions: the conv runs on bf16 (the fp32 session's output differs), within the bound of the float64 oracle,
    in the compiled run loop (no Python step), which gives the same bits as the Python loop."""
    C, cout, k, stride, pad, dil, H, W, group = geo
    rng = np.random.default_rng(sum(geo))
    model, x, w0, b0 = _gmodel(*geo, rng)
    feeds = [{"x": rng.standard_normal(x.shape).astype(np.float32)} for _ in range(2)]
    sess = _session(model, "bf16")
    got = [sess.run(None, f)[0] for f in feeds + feeds][len(feeds):]
    progs = _programs(sess)
    assert progs and all(p.n_py == 0 for p in progs), [(p.n_c, p.n_py) for p in progs]
    for f, r in zip(feeds, got):
        x64 = f["x"].astype(np.float64)
        ref = np.maximum(_gconv64(x64, w0.astype(np.float64), b0.astype(np.float64), stride, pad, dil, group), 0)
        bound = _gbound(x64, w0.astype(np.float64), b0, None, stride, pad, dil, group)
        assert np.all(np.abs(r - ref) <= bound), float(np.max(np.abs(r - ref) / bound))
    assert not np.array_equal(got[-1], _session(model, "fp32").run(None, feeds[-1])[0])      # bf16 ran
    device.COMPILED_RUNS = False
    try:
        ref_sess = _session(model, "bf16")
        want = [ref_sess.run(None, f)[0] for f in feeds]
        assert not _programs(ref_sess)
    finally:
        device.COMPILED_RUNS = True
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@convs_on
@pytest.mark.parametrize("geo", KEPT_FP32, ids=lambda g: _ids(g[:8]) + f"-g{g[8]}")
def test_bf16_session_keeps_small_convs_fp32(geo):
    """Below the routing rule the bf16 session runs the fp32 conv: the same bits as the fp32 session."""
    rng = np.random.default_rng(sum(geo))
    model, x, _, _ = _gmodel(*geo, rng)
    np.testing.assert_array_equal(_session(model, "bf16").run(None, {"x": x})[0],
                                  _session(model, "fp32").run(None, {"x": x})[0])
