"""The GEMM family's measured break-even (SGEMM_MT_FLOPS, set by par_calibrate in _k_gemm.pxi with the convs' one):
sgemm_threads, the batched GEMM's whole items per thread and the attention kernel split from it. The transformer
kernels run on the zoo's tiny transformers' shapes (3 x 11 tokens, hidden 64 / 256, 12 heads of 11 x 16) with the
break-even forced to 0 (every call that can split does), to 1e30 (none does) and measured, on every ISA variant.
Oracles: numpy in float64 (test_transformer.py's bounds); and 2 threads give the same bits as 1 thread (each output
is computed by one thread in the same order whatever the thread count)."""
import numpy as np
import pytest

from tests.kernels import test_transformer as tt
from tests.kernels.test_transformer import VARIANTS

THRESHOLDS = {"split": 0.0, "serial": 1e30, "measured": None}


@pytest.fixture(params=list(THRESHOLDS))
def breakeven(request):
    """Sets every variant's GEMM break-even (None: measured now, par_costs); puts the previous settings back."""
    flops = THRESHOLDS[request.param]
    before = {}
    for isa, m in VARIANTS.items():
        before[isa] = m._set_par_thresholds()
        if flops is None:
            m.par_costs(True)
        else:
            m._set_par_thresholds(flops)
    yield request.param
    for isa, m in VARIANTS.items():
        m._set_par_thresholds(*before[isa])


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_gemm_breakeven_is_the_measured_one(isa):
    """par_costs(True) sets the GEMM break-even to the convs' measured 2 * call cost * rate; a break-even set by hand
    is kept by the calibration at the first parallel call (not measured over)."""
    m = VARIANTS[isa]
    before = m._set_par_thresholds()
    try:
        call_ns, flop_ns, conv_flops = m.par_costs(True)
        assert m._set_par_thresholds()[0] == conv_flops == pytest.approx(2 * call_ns * flop_ns)
        m._set_par_thresholds(12345.0)
        rng = np.random.default_rng(0)
        A, B = rng.uniform(-1, 1, (33, 64)).astype(np.float32), rng.uniform(-1, 1, (64, 256)).astype(np.float32)
        bp = np.empty(m.sgemm_pack_b_size(64, 256), np.float32)
        m.sgemm_pack_b(B, False, bp)
        m.sgemm_packed_f32(False, 1.0, A, bp, 256, 0.0, np.empty((33, 256), np.float32), nthreads=2)
        assert m._set_par_thresholds()[0] == 12345.0
    finally:
        m._set_par_thresholds(*before)


@pytest.mark.parametrize("m,n,k", [(33, 256, 64), (33, 64, 256), (33, 64, 64), (33, 384, 128), (3, 64, 64)])
@pytest.mark.parametrize("act", [None, "Gelu"])
def test_sgemm_packed_res_small(m, n, k, act, breakeven):
    """FusedMatMul's kernel (bias, residual, activation) at 2 threads: within the GEMM bound of numpy float64, and the
    bits of 1 thread."""
    A, B, bias, R, want, tol = tt.res_gemm_case(m, n, k, act)
    for isa, mod in VARIANTS.items():
        bp = np.empty(mod.sgemm_pack_b_size(k, n), np.float32)
        mod.sgemm_pack_b(B, False, bp)
        C = {}
        for nt in (1, 2):
            C[nt] = np.full((m, n), np.nan, np.float32)
            mod.sgemm_packed_res_f32(A, bp, n, C[nt], bias, R, False, nt, act)
        assert np.all(np.abs(C[2] - want) <= tol), (isa, float(np.max(np.abs(C[2] - want) / tol)))
        np.testing.assert_array_equal(C[2], C[1], err_msg=isa)


@pytest.mark.parametrize("t,m,n,k", [(12, 11, 11, 16), (12, 11, 16, 11), (3, 11, 64, 64), (2, 33, 33, 32)])
def test_sgemm_batched_small(t, m, n, k, breakeven):
    tt.test_sgemm_batched_kernel(t, m, n, k)


@pytest.mark.parametrize("masked", [None, "cols", "row_value"])
def test_attention_small(masked, breakeven):
    """12 heads of 11 queries x 11 keys, K = D = 16 (albert / minilm / mpnet of the zoo), 2 threads against numpy and
    against 1 thread (test_transformer's oracle; its thread counts 1 and 0 = all)."""
    tt.test_attention_kernel_transposed_layouts(12, 11, 11, 16, 16, masked)
    tt.test_attention_kernel(11, 11, 12, 16, "row")
