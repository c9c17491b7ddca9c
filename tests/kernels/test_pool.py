"""Pooling kernels: every ISA variant in onnxep._kernels.AVAILABLE against the generic one (bit-identical: the loops
are the same scalar code per variant, only auto-vectorisation may differ, so a small tolerance is kept for averages),
a numpy oracle for the window semantics, one thread vs many, and the wrappers' shape checks."""
import importlib
import itertools

import numpy as np
import pytest

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
GENERIC = VARIANTS["generic"]


def geom(in3, k3, s3, pb3, pe3, d3):
    out = [(n + b + e - ((k - 1) * d + 1)) // s + 1 for n, k, s, b, e, d in zip(in3, k3, s3, pb3, pe3, d3)]
    return out, np.array(list(in3) + out + list(k3) + list(s3) + list(pb3) + list(pe3) + list(d3), np.int64)


def numpy_pool(x, nc, in3, out3, k3, s3, pb3, pe3, d3, mode, cip):
    """Oracle: direct loops over windows in numpy (float64)."""
    xs = x.reshape(nc, *in3).astype(np.float64)
    y = np.empty((nc, *out3))
    for o in itertools.product(*[range(n) for n in out3]):
        taps = [[o[i] * s3[i] - pb3[i] + t * d3[i] for t in range(k3[i])] for i in range(3)]
        inside = [[t for t in tt if 0 <= t < in3[i]] for i, tt in enumerate(taps)]
        vals = xs[(slice(None),) + np.ix_(*inside)].reshape(nc, -1)
        if mode == "max":
            y[(slice(None),) + o] = vals.max(axis=1)
        else:
            cnt = np.prod([sum(-pb3[i] <= t < in3[i] + pe3[i] for t in taps[i]) for i in range(3)]) if cip \
                else vals.shape[1]
            y[(slice(None),) + o] = vals.sum(axis=1) / cnt
    return y.reshape(-1).astype(np.float32)


GEOMS = [
    ((1, 1, 9), (1, 1, 3), (1, 1, 2), (0, 0, 1), (0, 0, 1), (1, 1, 1)),
    ((1, 7, 9), (1, 3, 3), (1, 2, 2), (0, 1, 0), (0, 1, 2), (1, 1, 1)),
    ((1, 8, 8), (1, 2, 3), (1, 1, 3), (0, 0, 2), (0, 1, 2), (1, 2, 1)),
    ((5, 6, 7), (2, 3, 2), (2, 1, 3), (1, 0, 1), (0, 2, 1), (2, 1, 3)),
    ((1, 1, 1), (1, 1, 1), (1, 1, 1), (0, 0, 0), (0, 0, 0), (1, 1, 1)),
    ((1, 40, 41), (1, 3, 3), (1, 2, 2), (0, 1, 1), (0, 1, 1), (1, 1, 1)),   # large enough to go parallel
]


@pytest.mark.parametrize("g", GEOMS)
@pytest.mark.parametrize("nc", [1, 3, 16])
def test_pool_kernels_numpy_and_variants(g, nc):
    in3, k3, s3, pb3, pe3, d3 = g
    out3, gv = geom(*g)
    x = np.random.default_rng(nc).standard_normal((nc, *in3)).astype(np.float32).reshape(-1)
    n_out = nc * int(np.prod(out3))
    want_max = numpy_pool(x, nc, in3, out3, k3, s3, pb3, pe3, d3, "max", 0)
    for isa, mod in VARIANTS.items():
        for nthreads in (1, 0):
            y = np.empty(n_out, np.float32)
            ind = np.empty(n_out, np.int64)
            mod.maxpool_f32(x, y, ind, nc, gv, 0, nthreads)
            np.testing.assert_array_equal(y, want_max, err_msg=isa)
            np.testing.assert_array_equal(x[ind], y, err_msg=isa)  # row-major indices point at the max
            for cip in (0, 1):
                ya = np.empty(n_out, np.float32)
                mod.avgpool_f32(x, ya, nc, gv, cip, nthreads)
                np.testing.assert_allclose(ya, numpy_pool(x, nc, in3, out3, k3, s3, pb3, pe3, d3, "avg", cip),
                                           rtol=1e-5, atol=1e-6, err_msg=isa)
                yg = np.empty(n_out, np.float32)
                GENERIC.avgpool_f32(x, yg, nc, gv, cip, 1)
                np.testing.assert_allclose(ya, yg, rtol=1e-6, atol=1e-7, err_msg=isa)


@pytest.mark.parametrize("is_max", [False, True])
@pytest.mark.parametrize("nc,s", [(1, 1), (3, 7), (5, 1000), (64, 1600)])
def test_global_pool_kernel(is_max, nc, s):
    x = np.random.default_rng(s).standard_normal((nc, s)).astype(np.float32)
    want = x.max(axis=1) if is_max else x.astype(np.float64).mean(axis=1).astype(np.float32)
    for isa, mod in VARIANTS.items():
        y = np.empty(nc, np.float32)
        mod.global_pool_f32(x, y, is_max, 0)
        np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-7, err_msg=isa)


def test_pool_wrappers_check_shapes():
    _, gv = geom((1, 4, 4), (1, 2, 2), (1, 2, 2), (0, 0, 0), (0, 0, 0), (1, 1, 1))
    x = np.zeros(2 * 16, np.float32)
    with pytest.raises(ValueError, match="maxpool_f32"):
        _kernels.maxpool_f32(x, np.zeros(7, np.float32), None, 2, gv)
    with pytest.raises(ValueError, match="indices"):
        _kernels.maxpool_f32(x, np.zeros(8, np.float32), np.zeros(3, np.int64), 2, gv)
    with pytest.raises(ValueError, match="avgpool_f32"):
        _kernels.avgpool_f32(x[:-1], np.zeros(8, np.float32), 2, gv)
    with pytest.raises(ValueError, match="geometry"):
        _kernels.avgpool_f32(x, np.zeros(8, np.float32), 2, gv[:20])
    bad = gv.copy()
    bad[9] = 0  # stride 0
    with pytest.raises(ValueError, match="geometry"):
        _kernels.avgpool_f32(x, np.zeros(8, np.float32), 2, bad)
    with pytest.raises(ValueError, match="global_pool_f32"):
        _kernels.global_pool_f32(np.zeros((3, 4), np.float32), np.zeros(2, np.float32), True)
