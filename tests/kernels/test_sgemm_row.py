"""The SIMD SGEMM's one-row tiles (sgemm.h onnxep_sgemm_row, switch sgemm_row_path): batch-1 GEMMs run each K block's
panels through one call instead of a micro-kernel call per panel.

Oracle: numpy in float64, within test_gemm.py's forward error bound (then the activation); and the row path must give
the per-panel path's bits (the same one-row body, products in the same order, the same epilogue), with the next-panel
fetch (tiles on two threads) and without it (one thread). Sizes: N at the panel edges (one vector of a panel, a
masked second one, a full panel, past the 4096-column slab cap), K in one and in several K blocks; alpha, beta,
column and row bias, every epilogue activation, and the residual of sgemm_packed_res_f32."""
import numpy as np
import pytest

from tests.kernels.test_gemm import EPS, VARIANTS, _bound

SIMD = [i for i in VARIANTS if i != "generic"]
ACTS = [None, "Relu", ("Clip", -0.25, 0.5), ("LeakyRelu", 0.1), "Sigmoid", ("HardSigmoid", 0.2, 0.5), "Tanh",
        "HardSwish", "Gelu"]


def _act(r, act):
    name, p = (act, ()) if act is None or isinstance(act, str) else (act[0], act[1:])
    if name is None:
        return r
    import math
    erf = np.vectorize(math.erf)
    return {"Relu": lambda: np.maximum(r, 0), "Clip": lambda: np.clip(r, *p),
            "LeakyRelu": lambda: np.where(r < 0, p[0] * r, r), "Sigmoid": lambda: 1 / (1 + np.exp(-r)),
            "HardSigmoid": lambda: np.clip(p[0] * r + p[1], 0, 1), "Tanh": lambda: np.tanh(r),
            "HardSwish": lambda: r * np.clip(r / 6 + 0.5, 0, 1),
            "Gelu": lambda: 0.5 * r * (1 + erf(r / np.sqrt(2)))}[name]()


def _both(mod, fn):
    """fn() with the row path on, then off; the switch restored."""
    before = mod.sgemm_row_path(True)
    try:
        on = fn()
        mod.sgemm_row_path(False)
        off = fn()
    finally:
        mod.sgemm_row_path(before)
    return on, off


@pytest.mark.parametrize("isa", SIMD)
@pytest.mark.parametrize("N", [1, 15, 16, 17, 31, 32, 33, 100, 4200])
@pytest.mark.parametrize("K", [1, 255, 700])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_row_path_matches_per_panel_and_numpy(isa, N, K, nthreads):
    mod = VARIANTS[isa]
    rng = np.random.default_rng(N * 1000 + K)
    A = rng.uniform(-1, 1, (1, K)).astype(np.float32)
    B = rng.uniform(-1, 1, (K, N)).astype(np.float32)
    C0 = rng.uniform(-1, 1, (1, N)).astype(np.float32)
    bias_col = rng.uniform(-1, 1, N).astype(np.float32)
    bias_row = rng.uniform(-1, 1, 1).astype(np.float32)
    bp = np.empty(mod.sgemm_pack_b_size(K, N), np.float32)
    mod.sgemm_pack_b(B, False, bp)
    for alpha, beta, bc, br in [(1.0, 0.0, None, None), (0.5, 1.5, bias_col, None), (-2.0, 0.0, None, bias_row)]:
        def run():
            C = C0.copy()
            mod.sgemm_packed_f32(False, alpha, A, bp, N, beta, C, bias_col=bc, bias_row=br, nthreads=nthreads)
            return C
        on, off = _both(mod, run)
        assert np.array_equal(on, off), (alpha, beta)
        ref = alpha * (A.astype(np.float64) @ B) + beta * C0
        ref = ref + (bc if bc is not None else 0.0) + (br[:, None] if br is not None else 0.0)
        assert np.abs(on - ref).max() <= _bound(K, A, B, alpha) + 80 * EPS * abs(beta), (alpha, beta)


@pytest.mark.parametrize("isa", SIMD)
@pytest.mark.parametrize("act", ACTS, ids=lambda a: str(a if a is None or isinstance(a, str) else a[0]))
@pytest.mark.parametrize("nthreads", [1, 2])
def test_row_path_epilogue_residual(isa, act, nthreads):
    """The fused epilogue on one row: bias, residual (sgemm_packed_res_f32), every activation; a B big enough that
    two threads split it (sgemm_threads: a few rows against 512 KB of B or more)."""
    mod = VARIANTS[isa]
    K, N = 600, 1000
    rng = np.random.default_rng(7)
    A = rng.uniform(-1, 1, (1, K)).astype(np.float32)
    B = rng.uniform(-0.1, 0.1, (K, N)).astype(np.float32)
    bias = rng.uniform(-1, 1, N).astype(np.float32)
    res = rng.uniform(-1, 1, (1, N)).astype(np.float32)
    bp = np.empty(mod.sgemm_pack_b_size(K, N), np.float32)
    mod.sgemm_pack_b(B, False, bp)

    def run():
        C = np.full((1, N), np.nan, np.float32)
        mod.sgemm_packed_res_f32(A, bp, N, C, bias, res, nthreads=nthreads, activation=act)
        return C
    on, off = _both(mod, run)
    assert np.array_equal(on, off)
    pre = A.astype(np.float64) @ B + bias + res
    # the activations are 1-Lipschitz (HardSwish: 1.5) and computed to a few float32 ulps of their output
    assert np.abs(on - _act(pre, act)).max() <= 1.5 * _bound(K, A, B, 1.0) + 64 * EPS * (1 + np.abs(pre).max())


def test_row_path_switch():
    """sgemm_row_path reads and sets the switch (on by default) in every variant, the generic one included (where
    no SIMD tile runs)."""
    for mod in VARIANTS.values():
        assert mod.sgemm_row_path() is True
        assert mod.sgemm_row_path(False) is True
        assert mod.sgemm_row_path(True) is False
        assert mod.sgemm_row_path() is True
