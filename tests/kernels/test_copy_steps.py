"""The compiled run loop's copy steps (RL_STRIDED, RL_CONCAT, RL_SPLIT; _k_runloop.pxi _rl_copy_split): rows split
over the threads from COPY_PAR_BYTES (256 KiB) in items of about RL_COPY_ITEM (32 KiB), on one thread below that or
at nthreads 1. Each case runs one step of a Program of every ISA variant, at 1 and 2 threads, with the threshold as
it is, forced to 0 (every copy split) and off, on tensors below and above it (row counts that do not divide into
items, rows wider than an item). Oracle: numpy (the same copy through slicing / concatenate / split / a strided
view), bit for bit."""
import importlib

import numpy as np
import pytest

from onnxep import _kernels
from onnxep.ops import _c_steps

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
RNG = np.random.default_rng(7)
# (rows, columns) of float32: 16 KiB (one thread), 1.2 MiB in 40 KiB rows (wider than an item), 300 KiB in rows
# of 1 KiB (items of 32 rows: 300 rows, the last item short)
SHAPES = [(16, 256), (30, 10240), (300, 256)]


@pytest.fixture(params=["default", "forced", "off"])
def par(request):
    """The copy steps' break-even: as it is, 0 (the parallel path for any size) or never."""
    mods = list(VARIANTS.values())
    old = [m._set_par_thresholds()[3] for m in mods]
    for m in mods:
        m._set_par_thresholds(copy_bytes={"default": old[0], "forced": 0, "off": 1e18}[request.param])
    yield request.param
    for m, v in zip(mods, old):
        m._set_par_thresholds(copy_bytes=v)


def _run(mod, fn, arrays, ints, nthreads):
    prog = mod.Program(1, len(arrays) + 1)
    prog.set_step(0, mod.RUNLOOP_FNS[fn], list(range(1, len(arrays) + 1)), ints, [], nthreads)
    for i, a in enumerate(arrays):
        prog.set_ptr(i + 1, a)
    assert prog.run(0, 1) == -1


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_split_rows(isa, nthreads, shape, par):
    rows, cols = shape
    x = RNG.standard_normal(shape).astype(np.float32)
    cuts = [cols // 4, cols // 2, cols - cols // 4 - cols // 2]
    ys = [np.full((rows, c), np.nan, np.float32) for c in cuts]
    _run(VARIANTS[isa], "split", [x] + ys, [3, rows, cols * 4] + [c * 4 for c in cuts], nthreads)
    for y, want in zip(ys, np.split(x, np.cumsum(cuts)[:-1], axis=1)):
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("shape", SHAPES)
def test_concat_rows(isa, nthreads, shape, par):
    rows, cols = shape
    cuts = [cols // 2, cols - cols // 2]
    xs = [RNG.standard_normal((rows, c)).astype(np.float32) for c in cuts]
    y = np.full(shape, np.nan, np.float32)
    _run(VARIANTS[isa], "concat", xs + [y], [2, rows, cols * 4] + [c * 4 for c in cuts], nthreads)
    np.testing.assert_array_equal(y, np.concatenate(xs, axis=1))


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("nthreads", [1, 2])
@pytest.mark.parametrize("case", ["transpose", "reversed_slice", "broadcast", "small"])
def test_strided_rows(isa, nthreads, case, par):
    """A strided view copied out: the rows' odometer starts mid-tensor in each item (outer dims of odd sizes,
    negative and zero strides)."""
    if case == "transpose":
        x = RNG.standard_normal((7, 61, 3, 97)).astype(np.float32)
        view = x.transpose(1, 3, 0, 2)
    elif case == "reversed_slice":
        x = RNG.standard_normal((5, 260, 520)).astype(np.float32)
        view = x[::-1, 1::2, ::-3]
    elif case == "broadcast":
        x = RNG.standard_normal((1, 83, 1, 67)).astype(np.float32)
        view = np.broadcast_to(x, (9, 83, 11, 67))
    else:
        x = RNG.standard_normal((6, 5, 4)).astype(np.float32)
        view = x.transpose(2, 0, 1)
    y = np.full(view.shape, np.nan, np.float32)
    spec = _c_steps.strided(x, view, y)
    assert spec is not None and spec[0] == "strided"
    _run(VARIANTS[isa], "strided", [x, y], spec[2], nthreads)
    np.testing.assert_array_equal(y, view)
