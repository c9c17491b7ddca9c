"""The decoder kernels of the compiled run loop's block in onnxep/_native/rl_ops.h (rms_norm_f32, rotary_f32): every ISA
variant in onnxep._kernels.AVAILABLE against numpy oracles (float64 RMS statistics; the rotate-half / interleaved
formulas of ops/onnxep/rotary_*.py written with np.concatenate / np.stack), odd sizes and tails, one thread vs
several (row chunks on the pool above the parallel threshold)."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels
from onnxep.ops import _c_steps

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
RNG = np.random.default_rng(41)


def _rms_oracle(x, scale, eps):
    x64 = x.astype(np.float64)
    ms = np.mean(x64 * x64, axis=-1, keepdims=True)
    return (x64 / np.sqrt(ms + eps) * scale).astype(np.float32)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("R,C", [(1, 1), (3, 7), (33, 64), (5, 17), (2, 1000), (700, 96)])
@pytest.mark.parametrize("nt", [1, 2])
def test_rms_norm_f32(isa, R, C, nt):
    x = RNG.standard_normal((R, C)).astype(np.float32) * 3
    scale = RNG.standard_normal(C).astype(np.float32)
    y = np.full_like(x, np.nan)
    VARIANTS[isa].rms_norm_f32(x, scale, y, 1e-6, nt)
    np.testing.assert_allclose(y, _rms_oracle(x, scale, 1e-6), rtol=2e-6, atol=2e-6)
    # in place (y is x)
    z = x.copy()
    VARIANTS[isa].rms_norm_f32(z, scale, z, 1e-6, nt)
    np.testing.assert_array_equal(z, y)


def test_rms_norm_f32_checks_shapes():
    with pytest.raises(ValueError):
        _kernels.rms_norm_f32(np.zeros((2, 3), np.float32), np.zeros(4, np.float32), np.zeros((2, 3), np.float32),
                              1e-5)


def _rot_oracle(x, cos, sin, inter):
    x64, c64, s64 = (t.astype(np.float64) for t in (x, cos, sin))
    h = x.shape[-1] // 2
    if inter:
        rot = np.stack([-x64[..., 1::2], x64[..., 0::2]], axis=-1).reshape(x.shape)
    else:
        rot = np.concatenate([-x64[..., h:], x64[..., :h]], axis=-1)
    return (x64 * c64 + rot * s64).astype(np.float32)


def _rot_call(mod, x, cos, sin, inter, nt, inplace=False):
    y = x.copy() if inplace else np.full_like(x, np.nan)
    if inplace:
        x = y
    d = x.shape[-1]
    sc = np.broadcast_to(cos, x.shape).strides[:-1]
    ss = np.broadcast_to(sin, x.shape).strides[:-1]
    nd, shape, csts, ssts = _c_steps.collapse(x.shape[:-1], sc, ss)
    mod.rotary_f32(x.reshape(-1), cos.reshape(-1), sin.reshape(-1), y.reshape(-1), d, shape[:nd], csts[:nd],
                   ssts[:nd], int(cos.shape[-1] != 1), int(sin.shape[-1] != 1), inter, nt)
    return y


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("inter", [False, True])
@pytest.mark.parametrize("xs,cs,ss", [
    ((3, 4, 11, 16), (3, 1, 11, 16), (3, 1, 11, 16)),      # llama: cos / sin per batch and position
    ((2, 5, 3, 6), (5, 1, 6), (5, 1, 6)),                  # GPT-J: (b, s, h, d), cos per position
    ((1, 2, 7, 10), (7, 10), (1, 1, 7, 1)),                # sin one value per row (last dim 1)
    ((4, 2), (4, 2), (2,)),                                 # 2-D, sin one row for all
    ((6,), (6,), (6,)),                                     # one row
    ((8, 64, 130), (1, 64, 130), (8, 64, 130)),             # above the parallel threshold
])
@pytest.mark.parametrize("nt", [1, 2])
def test_rotary_f32(isa, inter, xs, cs, ss, nt):
    x = RNG.standard_normal(xs).astype(np.float32)
    cos = RNG.standard_normal(cs).astype(np.float32)
    sin = RNG.standard_normal(ss).astype(np.float32)
    y = _rot_call(VARIANTS[isa], x, cos, sin, inter, nt)
    np.testing.assert_allclose(y, _rot_oracle(x, cos, sin, inter), rtol=1e-5, atol=1e-6)
    z = _rot_call(VARIANTS[isa], x, cos, sin, inter, nt, inplace=True)      # y is x
    np.testing.assert_array_equal(z, y)


def test_rotary_f32_checks_arguments():
    x = np.zeros(12, np.float32)
    with pytest.raises(ValueError):      # odd head size
        _kernels.rotary_f32(x, x, x, x.copy(), 3, (4,), (12,), (12,), 1, 1, False)
    with pytest.raises(ValueError):      # rows do not cover x
        _kernels.rotary_f32(x, x, x, x.copy(), 4, (2,), (16,), (16,), 1, 1, False)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("dt,t", [(np.float32, 0), (np.int64, 2), (np.int32, 3)])
@pytest.mark.parametrize("shape,axis", [((3, 11), 1), ((4, 5, 6), 1), ((7,), 0), ((2, 9, 1), 0)])
@pytest.mark.parametrize("excl,rev", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_run(isa, dt, t, shape, axis, excl, rev):
    x = (RNG.standard_normal(shape) * 10).astype(dt)
    want = np.flip(x, axis) if rev else x
    want = np.add.accumulate(want, axis=axis, dtype=dt)          # oracle: numpy's accumulate
    if excl:
        want = np.concatenate([np.zeros_like(np.take(want, [0], axis)), np.take(want, range(shape[axis] - 1), axis)],
                              axis)
    if rev:
        want = np.flip(want, axis)
    y = np.empty_like(x)
    outer, n = int(np.prod(shape[:axis])), shape[axis]
    VARIANTS[isa].cumsum_run(x, y, outer, n, x.size // (outer * n), t, excl, rev)
    np.testing.assert_array_equal(y, want)
