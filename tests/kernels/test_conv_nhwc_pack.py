"""conv_nhwc_pack_weight (the channel-last conv's weight packing, run once per conv at session creation).

Oracle: numpy reorders each group's W (Coutg, Cg, kh, kw) to (Coutg, kh, kw, Cg), the rows k = (b*kw + e)*Cg + c the
kernel documents, and sgemm_pack_b of that matrix as a transposed B (trans_b) packs it; the kernel's packing must be
bit-identical to it, on every ISA variant the machine runs. Shapes: 1x1 kernels (packed straight from W) and larger
ones (reordered first), groups, output channels off the NR panel width, and Kc past one KC block (256)."""
import numpy as np
import pytest

from tests.kernels.test_conv import VARIANTS

CASES = [
    # (cout, Cg, kh, kw, group)
    (1, 1, 1, 1, 1),
    (7, 3, 1, 1, 1),
    (33, 17, 1, 1, 1),
    (64, 300, 1, 1, 1),      # Kc 300: two K blocks
    (40, 5, 1, 1, 4),        # grouped 1x1 (ShuffleNet), Coutg 10
    (96, 24, 1, 1, 3),
    (5, 3, 3, 3, 1),
    (33, 31, 3, 3, 1),       # Kc 279
    (12, 4, 3, 3, 2),
    (8, 3, 7, 7, 1),
    (6, 2, 1, 3, 3),         # a 1x3 kernel: kh*kw > 1 with kh == 1
    (17, 29, 5, 2, 1),
]


def _oracle(mod, w, group):
    cout, cg, kh, kw = w.shape
    coutg, kc = cout // group, cg * kh * kw
    parts = []
    for g in range(group):
        bt = np.ascontiguousarray(w[g * coutg:(g + 1) * coutg].transpose(0, 2, 3, 1).reshape(coutg, kc))
        out = np.empty(mod.sgemm_pack_b_size(kc, coutg), np.float32)
        mod.sgemm_pack_b(bt, True, out)
        parts.append(out)
    return np.concatenate(parts)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("case", CASES)
def test_conv_nhwc_pack_weight_matches_reordered_pack_b(isa, case):
    mod = VARIANTS[isa]
    cout, cg, kh, kw, group = case
    rng = np.random.default_rng(sum(case))
    w = rng.uniform(-1, 1, (cout, cg, kh, kw)).astype(np.float32)
    n = mod.conv_nhwc_pack_weight_size(cout, cg * kh * kw, group)
    got = np.full(n, np.nan, np.float32)
    mod.conv_nhwc_pack_weight(w, group, got)
    np.testing.assert_array_equal(got, _oracle(mod, w, group))
