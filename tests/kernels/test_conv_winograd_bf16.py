"""The bf16 Winograd paths of the channel-last conv (conv_nhwc_f32(..., path="winograd-bf16" / "winograd4-bf16"),
_k_winograd.pxi): transforms in fp32, the plane GEMMs on bf16 operands with fp32 accumulation (bgemm.h's micro-kernel).

Oracle: the float64 numpy direct convolution (tests/kernels/test_conv.py), on every SIMD variant (the generic one has
no Winograd path) and every bgemm micro-kernel this CPU runs (vdpbf16ps where it has AVX512_BF16; the generic C one,
same bf16 operands, everywhere).

Error bound, derived per output element: Y = A^T [sum_c U_c (.) V_c] A with U = G g G^T (the weight, rounded to fp32
then bf16) and V = B^T d B (the input patch, transformed in fp32 then rounded to bf16). Rounding both to bf16 (unit
roundoff u = 2^-8, round to nearest even) turns each product U V into U V (1 + e), |e| <= 2u + u^2, so with exact
arithmetic elsewhere output q is off by at most (2u + u^2) * |A^T (x) A^T| (sum_c |U_c| |V_c|), and |V_c| <=
|B^T (x) B^T| |d|: computed here in float64 from the matrices, tile by tile. The fp32 work (transforms, accumulation,
epilogue) adds at most the fp32 path's bound (tests/kernels/test_conv_winograd.py _tol) with operands up to (1 + u)
larger. F(4x4)'s larger A^T and B^T entries make its bound (and error) several times F(2x2)'s: the model rule
(ops/onnxep/nhwc_conv.py, before BF16_WINOGRAD_F2_MIN_CHANNELS) weighs that error at the models' outputs."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.kernels.test_conv_winograd import MATRICES, SIMD, _setup, _tol

U_BF16 = 2.0 ** -8
PATHS = {2: "winograd-bf16", 4: "winograd4-bf16"}


def _pack(mod, w, m):
    wp = np.full(mod.conv_wino_pack_weight_bf16_size(w.shape[0], w.shape[1], m), np.nan, np.float32)
    mod.conv_wino_pack_weight_bf16(w, wp, m)
    return wp


def _bound(x, w, pads, outs, m):
    """(2u + u^2) |A^T (x) A^T| sum_c |U_c| (|B^T (x) B^T| |d|)_c per output element (NHWC, float64), plus the
    fp32 path's bound; x (N, C, H, W), w (cout, C, 3, 3)."""
    bt, g, at = (np.array(a, np.float64) for a in MATRICES[m])
    N, C, H, W = x.shape
    Ho, Wo = outs
    al, th, tw = m + 2, -(-Ho // m), -(-Wo // m)
    xp = np.zeros((N, C, th * m + 2, tw * m + 2))
    hi, wi = min(H, th * m + 2 - pads[0]), min(W, tw * m + 2 - pads[1])
    xp[:, :, pads[0]:pads[0] + hi, pads[1]:pads[1] + wi] = np.abs(x[:, :, :hi, :wi])
    # the tiles' al x al patches: (N, C, th, tw, al, al)
    idx_h = (np.arange(th)[:, None] * m + np.arange(al)[None])
    idx_w = (np.arange(tw)[:, None] * m + np.arange(al)[None])
    patches = xp[:, :, idx_h[:, None, :, None], idx_w[None, :, None, :]]
    v = np.einsum("ia,jb,nctwab->ntwijc", np.abs(bt), np.abs(bt), patches)
    u = np.abs(np.einsum("ia,kcab,jb->ijck", g, w.astype(np.float64), g))
    mabs = np.einsum("ntwijc,ijck->ntwijk", v, u)
    yabs = np.einsum("pi,qj,ntwijk->ntpwqk", np.abs(at), np.abs(at), mabs)
    yabs = yabs.reshape(N, th * m, tw * m, -1)[:, :Ho, :Wo]
    fp32 = _tol(C, m) * (1 + U_BF16) ** 2        # x, w in [-1, 1] (_setup)
    return (2 * U_BF16 + U_BF16 ** 2) * yabs + fp32


def _run(mod, xh, wp, cout, pads, outs, b, res, nthreads, act=None, m=2, ldy=0, y=None):
    N = xh.shape[0]
    if y is None:
        y = np.full((N,) + tuple(outs) + (cout,), np.nan, np.float32)
    mod.conv_nhwc_f32(xh.reshape(-1), xh.shape, wp, cout, 1, (3, 3), (1, 1), (1, 1), pads, outs, b,
                      None if res is None else res.reshape(-1), y.reshape(-1), False, nthreads, act, PATHS[m], ldy)
    return y


def test_bound_is_tight_enough_to_fail():
    """The bound is not vacuous: the kernel stays within it, and losing the half-filled last bf16 pair of an odd
    channel count (the kind of K-tail bug it must catch: here the weight of that channel zeroed) breaks it."""
    mod = next(iter(SIMD.values()), None)
    if mod is None:
        pytest.skip("no SIMD variant on this machine (no Winograd path)")
    x, w, b, res, xh, ref = _setup((1, 65, 12, 12), 48, (1, 1), (12, 12), 5)
    bound = _bound(x, w, (1, 1), (12, 12), 2)
    y = _run(mod, xh, _pack(mod, w, 2), 48, (1, 1), (12, 12), None, None, 1)
    assert np.all(np.abs(y - ref) <= bound)
    lost = w.copy()
    lost[:, -1] = 0
    yl = _run(mod, xh, _pack(mod, lost, 2), 48, (1, 1), (12, 12), None, None, 1)
    assert np.any(np.abs(yl - ref) > bound)


@st.composite
def cases(draw):
    N = draw(st.integers(1, 2))
    cin = draw(st.sampled_from([1, 2, 3, 13, 16, 31, 33, 64]))
    cout = draw(st.sampled_from([1, 5, 16, 31, 32, 33, 64]))
    H, W = draw(st.integers(1, 11)), draw(st.integers(1, 11))
    ph, pw = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    eh, ew = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    Ho, Wo = H + ph + eh - 2, W + pw + ew - 2
    if Ho < 1 or Wo < 1:
        ph = pw = 1
        Ho, Wo = H, W
    return (N, cin, H, W), cout, (ph, pw), (Ho, Wo), draw(st.booleans()), draw(st.booleans()), \
        draw(st.sampled_from([None, "Relu", ("Clip", -0.5, 0.5)])), draw(st.sampled_from([2, 4]))


def _act(y, act):
    if act == "Relu":
        return np.maximum(y, 0)
    if act is not None:
        return np.clip(y, act[1], act[2])
    return y


@pytest.mark.skipif(not SIMD, reason="no SIMD variant on this machine (no Winograd path)")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=cases())     # (bg_kernel only forces a micro-kernel: nothing to reset between examples)
def test_bf16_winograd_within_bound_every_simd_isa(bg_kernel, case):
    """Oracle: float64 direct conv (+ bias, residual, then the activation, which only shrinks the error); within
    the bound above on every element; 1 and 2 threads bit-identical; odd channel counts (a half-filled last bf16
    pair), output channels off the 32-column panels, half-filled last tiles."""
    xs, cout, pads, outs, with_bias, with_res, act, m = case
    x, w, b, res, xh, ref = _setup(xs, cout, pads, outs, sum(xs) + cout + sum(pads) + m)
    b = b if with_bias else None
    res = res if with_res else None
    ref = _act(ref + (b if with_bias else 0) + (res if with_res else 0), act)
    bound = _bound(x, w, pads, outs, m) + 4 * np.finfo(np.float32).eps * (1 + np.abs(ref))
    for isa, mod in SIMD.items():
        wp = _pack(mod, w, m)
        y1 = _run(mod, xh, wp, cout, pads, outs, b, res, 1, act, m)
        y2 = _run(mod, xh, wp, cout, pads, outs, b, res, 2, act, m)
        np.testing.assert_array_equal(y1, y2, err_msg=isa)
        assert np.all(np.abs(y1 - ref) <= bound), (isa, float(np.max(np.abs(y1 - ref) / bound)))


@pytest.mark.skipif(not SIMD, reason="no SIMD variant on this machine (no Winograd path)")
@pytest.mark.parametrize("m", [2, 4])
@pytest.mark.parametrize("shape", [(1, 64, 28, 28, 64), (1, 300, 9, 11, 40), (2, 260, 5, 4, 70)],
                         ids=lambda s: "x".join(map(str, s)))
def test_bf16_winograd_model_shapes(bg_kernel, shape, m):
    """A light model's 28x28x64, and Cin across one and two bf16 K blocks (BG_KC = 256: 260, 300): oracle float64
    direct conv, within the bound; the residual taken in place (Y is Z's memory) and a channel slice (ldy) give the
    same bits; F(4x4)'s error several times F(2x2)'s (relative to the output's size)."""
    N, cin, H, W, cout = shape
    x, w, b, res, xh, ref = _setup((N, cin, H, W), cout, (1, 1), (H, W), cin + cout)
    ref = np.maximum(ref + b + res, 0)
    bound = _bound(x, w, (1, 1), (H, W), m) + 4 * np.finfo(np.float32).eps * (1 + np.abs(ref))
    for isa, mod in SIMD.items():
        wp = _pack(mod, w, m)
        y = _run(mod, xh, wp, cout, (1, 1), (H, W), b, res, 2, "Relu", m)
        assert np.all(np.abs(y - ref) <= bound), (isa, float(np.max(np.abs(y - ref) / bound)))
        yr = res.copy()
        _run(mod, xh, wp, cout, (1, 1), (H, W), b, yr, 2, "Relu", m, y=yr)
        np.testing.assert_array_equal(yr, y, err_msg=isa)
        wide = np.full((N, H, W, cout + 7), np.nan, np.float32)
        flat = wide.reshape(-1)[:(N * H * W - 1) * (cout + 7) + cout]
        _run(mod, xh, wp, cout, (1, 1), (H, W), b, None, 2, "Relu", m, ldy=cout + 7, y=flat)
        y0 = _run(mod, xh, wp, cout, (1, 1), (H, W), b, None, 2, "Relu", m)
        np.testing.assert_array_equal(wide[..., :cout], y0, err_msg=isa)


@pytest.mark.skipif(not SIMD, reason="no SIMD variant on this machine (no Winograd path)")
@pytest.mark.parametrize("m", [2, 4])
def test_bf16_winograd_panel_prefetch_keeps_bits(bg_kernel, m):
    """The plane GEMMs' next-panel prefetch (conv_panel_prefetch, on by default: the next plane's panel, after the
    last plane the next panel's first) changes no bit: three 32-column panels and two K blocks (Cin 300), 1 and 2
    threads, against the same conv with the prefetch off and within the float64 oracle's bound."""
    x, w, b, res, xh, ref = _setup((1, 300, 9, 10), 70, (1, 1), (9, 10), 300 + 70 + m)
    ref = np.maximum(ref + b, 0)
    bound = _bound(x, w, (1, 1), (9, 10), m) + 4 * np.finfo(np.float32).eps * (1 + np.abs(ref))
    for isa, mod in SIMD.items():
        wp = _pack(mod, w, m)
        before = mod.conv_panel_prefetch()
        try:
            ys = {}
            for on in (True, False):
                mod.conv_panel_prefetch(on)
                for nth in (1, 2):
                    ys[on, nth] = _run(mod, xh, wp, 70, (1, 1), (9, 10), b, None, nth, "Relu", m)
        finally:
            mod.conv_panel_prefetch(before)
        for key, y in ys.items():
            np.testing.assert_array_equal(y, ys[True, 1], err_msg=f"{isa} {key}")
        assert np.all(np.abs(ys[True, 1] - ref) <= bound), isa

@pytest.mark.skipif(not SIMD, reason="no SIMD variant on this machine (no Winograd path)")
def test_bf16_f4_error_exceeds_f2():
    """Why the model rule keeps F(4x4) off bf16: on the same conv, F(4x4)'s rms error is several times F(2x2)'s
    (oracle float64 direct conv)."""
    mod = next(iter(SIMD.values()))
    x, w, b, res, xh, ref = _setup((1, 64, 16, 16), 64, (1, 1), (16, 16), 9)
    err = {m: np.sqrt(np.mean((_run(mod, xh, _pack(mod, w, m), 64, (1, 1), (16, 16), None, None, 1, None, m)
                                - ref) ** 2)) for m in (2, 4)}
    assert err[4] > 3 * err[2], err


@pytest.mark.skipif(not SIMD, reason="no SIMD variant on this machine (no Winograd path)")
def test_bf16_pack_is_bf16_of_the_fp32_transform():
    """conv_wino_pack_weight_bf16 is conv_wino_pack_weight's U_xi, each rounded to bf16 and laid out by
    bgemm_pack_b (oracle: unpacking the fp32 packing through the fp32 GEMM with an identity A, then packing it with
    bgemm_pack_b, plane after plane; bad sizes refused by name."""
    mod = next(iter(SIMD.values()))
    rng = np.random.default_rng(3)
    for m in (2, 4):
        cout, cin = 37, 19
        w = rng.uniform(-1, 1, (cout, cin, 3, 3)).astype(np.float32)
        planes = (m + 2) ** 2
        fp = np.empty(mod.conv_wino_pack_weight_size(cout, cin, m), np.float32)
        mod.conv_wino_pack_weight(w, fp, m)
        bf = _pack(mod, w, m)
        assert bf.size == planes * mod.bgemm_pack_b_size(cin, cout)
        blen, one = fp.size // planes, bf.size // planes
        eye = np.eye(cin, dtype=np.float32)
        for xi in range(planes):
            u = np.empty((cin, cout), np.float32)           # U_xi = I @ U_xi through the fp32 packed GEMM
            mod.sgemm_packed_f32(False, 1.0, eye, fp[xi * blen:(xi + 1) * blen], cout, 0.0, u)
            want = np.empty(one, np.float32)
            mod.bgemm_pack_b(np.ascontiguousarray(u), False, want)
            np.testing.assert_array_equal(bf[xi * one:(xi + 1) * one].view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="conv_wino_pack_weight_bf16: out has"):
        mod.conv_wino_pack_weight_bf16(w, np.empty(3, np.float32), 2)
    with pytest.raises(ValueError, match="expected .*winograd-bf16"):
        mod.ConvNhwc((1, 5, 5, cin), fp, cout, 1, (3, 3), (1, 1), (1, 1), (1, 1), (5, 5), False, None,
                     "winograd-bf16")
