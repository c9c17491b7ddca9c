"""The bf16 GEMM's epilogue activations (bgemm.h bg_act_row, one vectorizable loop per kind) through BConvNhwc, a 1x1
conv with bias, on every SIMD variant (the epilogue is compiled in each) and every bgemm micro-kernel this CPU runs.

Oracles:
- the same variant's conv without activation, then the activation in numpy (tests/kernels/test_conv_winograd.py
  _act, onnxep_act1's formulas) on its float32 output: equal within a few float32 ulps (the C code may fuse a
  multiply-add the numpy expression rounds twice), so a wrong constant or a swapped branch fails;
- the float64 numpy conv with the activation applied: within the bf16 bound of tests/ops/test_bconv_nhwc.py times the
  activation's Lipschitz constant (HardSwish 1.5, LeakyRelu max(1, |alpha|), HardSigmoid |alpha|, the others 1).
Inputs are scaled to +-4 so that the outputs cross every kink (HardSwish's -3 and 3, Clip's bounds)."""
import numpy as np
import pytest

from tests.kernels.test_conv import VARIANTS
from tests.kernels.test_gemm import gelu64
from tests.kernels.test_conv_winograd import ACTS, _act
from tests.ops.test_bconv_nhwc import _bound, _conv64

LIPSCHITZ = {"": 1.0, "Relu": 1.0, "Clip": 1.0, "LeakyRelu": None, "Sigmoid": 0.25, "HardSigmoid": None, "Tanh": 1.0,
             "HardSwish": 1.5}


def _run(mod, xh, bp, b, shape, cout, act):
    N, H, W, _ = shape
    conv = mod.BConvNhwc(shape, bp, cout, (1, 1), (1, 1), (1, 1), (0, 0), (H, W), act)
    y = np.full(N * H * W * cout, np.nan, np.float32)
    conv.run(xh, b, None, y, 1)
    return y.reshape(N, H, W, cout)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("act", ACTS, ids=lambda a: a[0] or "none")
@pytest.mark.parametrize("cout", [7, 40, 96])
def test_bgemm_epilogue_activation_every_variant(bg_kernel, isa, act, cout):
    mod = VARIANTS[isa]
    N, H, W, C = 2, 5, 7, 48
    rng = np.random.default_rng(cout + len(act[0]))
    x = rng.uniform(-4, 4, (N, H, W, C)).astype(np.float32)
    w = (rng.standard_normal((cout, C)) / np.sqrt(C)).astype(np.float32)
    b = rng.uniform(-1, 1, cout).astype(np.float32)
    bp = np.full(mod.bgemm_pack_b_size(C, cout), np.nan, np.float32)
    mod.bgemm_pack_b(np.ascontiguousarray(w.T), False, bp)
    xh = x.reshape(-1)
    bare = _run(mod, xh, bp, b, (N, H, W, C), cout, ("",))
    got = _run(mod, xh, bp, b, (N, H, W, C), cout, act)
    f = _act(*act)
    want = f(bare.astype(np.float32)).astype(np.float32)
    ulp = np.spacing(np.maximum(np.abs(want), np.abs(bare)).astype(np.float32))
    assert np.all(np.abs(got - want) <= 4 * ulp), float(np.max(np.abs(got - want) / ulp))
    x64 = x.transpose(0, 3, 1, 2).astype(np.float64)
    w64 = w.astype(np.float64)[:, :, None, None]
    ref = f(_conv64(x64, w64, b.astype(np.float64), 1, 0, 1)).transpose(0, 2, 3, 1)
    lip = LIPSCHITZ[act[0]]
    if lip is None:
        lip = max(1.0, abs(act[1])) if act[0] == "LeakyRelu" else abs(act[1])
    bound = lip * _bound(x64, w64, b, None, 1, 0, 1).transpose(0, 2, 3, 1) + 1e-6 * np.abs(ref)
    assert np.all(np.abs(got - ref) <= bound), float(np.max(np.abs(got - ref) / bound))


@pytest.mark.parametrize("M,K,N", [(1, 3, 5), (13, 64, 40), (50, 129, 96), (97, 256, 130), (49, 257, 33), (61, 700, 75)])
@pytest.mark.parametrize("epilogue", [b + r + a or "none" for a in ("", "relu", "clip") for r in ("", "res_")
                                      for b in ("", "bias_")] + ["res_in_place", "bias_gelu", "bias_res_gelu"])
def test_bgemm_register_epilogue_keeps_bits(bg_kernel, M, K, N, epilogue):
    """The epilogue applied in the registers of the last K block's tiles (bgemm_epilogue_in_regs, on by default: one
    K block up to 256, 257 and 700 add the earlier blocks' sums from the buffer) against the buffered epilogue, every
    variant: the same bits, bias,
    residual (also read from Y's own memory), Relu / Clip in the registers, each of the register epilogue's twelve
    combinations of bias, residual and none / Relu / Clip (bgemm.h bg_tile_store), Gelu over the stored tile; and the
    float64 oracle within the bf16 bound of tests/kernels/test_bgemm.py (Gelu: times its slope, at most 1.13, plus
    its own error 3e-7 max(1, |x|))."""
    rng = np.random.default_rng(M * 31 + K * 7 + N)
    a = (4 * rng.standard_normal((M, K))).astype(np.float32)
    b = rng.standard_normal((K, N)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32) if "bias" in epilogue else None
    r = rng.standard_normal((M, N)).astype(np.float32) if "res" in epilogue else None
    act = ("Clip", -0.5, 0.5) if "clip" in epilogue else ("Relu" if "relu" in epilogue else None)
    act = "Gelu" if "gelu" in epilogue else act
    s = np.abs(a).astype(np.float64) @ np.abs(b)
    ref = a.astype(np.float64) @ b + (0 if bias is None else bias) + (0 if r is None else r)
    bound = (2 ** -7 + 2 ** -16 + K * 2 ** -23) * s + 2 ** -21 * (s + (0 if bias is None else np.abs(bias))
                                                                 + (0 if r is None else np.abs(r)))
    if act == "Gelu":
        bound = 1.13 * bound + 3e-7 * np.maximum(1.0, np.abs(ref))
        ref = gelu64(ref)
    else:
        ref = np.maximum(ref, 0) if act == "Relu" else (np.clip(ref, -0.5, 0.5) if act else ref)
    for isa, mod in VARIANTS.items():
        bp = np.empty(mod.bgemm_pack_b_size(K, N), np.float32)
        mod.bgemm_pack_b(b, False, bp)
        before = mod.bgemm_epilogue_in_regs()
        ys = {}
        try:
            for on in (True, False):
                mod.bgemm_epilogue_in_regs(on)
                y = r.copy() if epilogue == "res_in_place" else np.full((M, N), np.nan, np.float32)
                mod.bgemm_f32(a, bp, N, y, bias, y if epilogue == "res_in_place" else r, 1.0, act, False, 2)
                ys[on] = y
        finally:
            mod.bgemm_epilogue_in_regs(before)
        np.testing.assert_array_equal(ys[True], ys[False], err_msg=isa)
        assert np.all(np.abs(ys[True] - ref) <= bound), (isa, float(np.max(np.abs(ys[True] - ref) / bound)))
