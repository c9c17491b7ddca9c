"""Transpose kernel (transpose_copy): oracle numpy `x.transpose(perm)`, bit-exact, for every ISA variant in
onnxep._kernels.AVAILABLE, every perm of ranks 1..5, every element size, 1 vs 2 threads, hypothesis-drawn shapes, and
the wrapper's checks."""
import importlib
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}

# int8, float16, float32, int64, bool: itemsizes 1, 2, 4, 8, 1
DTYPES = [np.int8, np.float16, np.float32, np.int64, np.bool_]
# per rank: a small shape of odd sizes, with a 1 in it from rank 3 on (dropped by the kernel's collapse)
SMALL = {1: (5,), 2: (3, 7), 3: (3, 1, 5), 4: (2, 3, 1, 5), 5: (3, 1, 2, 5, 3)}


def _data(shape, dtype, seed=0):
    """Random bits for every dtype (all byte patterns, so NaN payloads in float16/float32 must survive bit-exactly);
    bool stays 0/1."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape, dtype=np.int64))
    if dtype is np.bool_:
        return rng.integers(0, 2, n).astype(np.bool_).reshape(shape)
    return rng.integers(0, 256, n * np.dtype(dtype).itemsize, dtype=np.uint8).view(dtype).reshape(shape)


def _run(mod, x, perm, nthreads=1):
    y = np.empty([x.shape[p] for p in perm], x.dtype)
    mod.transpose_copy(x.reshape(-1).view(np.uint8), x.shape, perm, x.itemsize, y.reshape(-1).view(np.uint8),
                       nthreads)
    return y


def _check(x, perm, threads=(1, 2)):
    """Oracle: numpy x.transpose(perm), compared as raw bytes (bit-exact), every variant and thread count."""
    want = x.transpose(perm).copy()   # C order (ascontiguousarray would make a 0-d array 1-d)
    for isa, mod in VARIANTS.items():
        for nt in threads:
            got = _run(mod, x, perm, nt)
            assert got.shape == want.shape and got.dtype == want.dtype
            assert got.tobytes() == want.tobytes(), f"{isa}, {nt} threads, shape {x.shape}, perm {perm}"


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_every_perm_small(rank, dtype):
    x = _data(SMALL[rank], dtype, rank)
    for perm in itertools.permutations(range(rank)):
        _check(x, perm, threads=(1,))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(3, 17, 33, 9), (2, 35, 31, 16), (1, 40, 1, 65)])
def test_every_perm_rank4_off_block(shape, dtype):
    """Sizes just off the register-transpose (4/8/16) and tile (16/32/64/128 elements) sizes, so full blocks and
    ragged edges meet in one call."""
    x = _data(shape, dtype, 1)
    for perm in itertools.permutations(range(4)):
        _check(x, perm, threads=(1,))


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape,perm", [((1, 64, 112, 112), (0, 2, 3, 1)), ((1, 64, 112, 112), (0, 3, 1, 2)),
                                        ((1, 256, 56, 56), (0, 2, 3, 1)), ((1, 56, 56, 256), (0, 3, 1, 2)),
                                        ((2, 3, 224, 224), (0, 2, 3, 1)), ((1, 224, 224, 3), (0, 3, 1, 2)),
                                        ((4, 300, 257), (0, 2, 1)), ((4, 300, 2570), (1, 0, 2)),
                                        ((1000, 1001), (0, 1)), ((1, 20, 150, 170), (0, 2, 3, 1)),
                                        ((1, 150, 170, 20), (0, 3, 1, 2)), ((8, 200, 12, 64), (0, 2, 1, 3)),
                                        ((3, 50000, 4), (1, 0, 2))])
def test_big_layout_changes_threads(shape, perm, dtype):
    """NCHW <-> NHWC at activation sizes (above the single-thread threshold): 1 and 2 threads give identical bytes."""
    if np.dtype(dtype).itemsize == 8 and np.prod(shape) > 1e6:
        shape = (shape[0], shape[1] // 2) + shape[2:]   # keep the int64 copies small
    _check(_data(shape, dtype, 2), perm)


@pytest.mark.parametrize("shape,perm", [((1, 3, 300, 301), (0, 2, 3, 1)), ((5, 2, 999), (0, 2, 1)),
                                        ((7, 4, 50, 60), (0, 2, 3, 1)), ((1, 8, 130, 130), (0, 2, 3, 1)),
                                        ((9000, 3), (1, 0)), ((2, 5, 80, 80), (0, 2, 3, 1))])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_few_groups_to_last_axis(shape, perm, dtype):
    """(pixels, G, Cg) -> (pixels, Cg, G) with G = 2, 3, 4 or 8 and 4-byte elements runs channel_shuffle_4b's loop
    inside transpose_copy (G = 5 and other sizes the tiles), 1 and 2 threads, above and below the serial size."""
    _check(_data(shape, dtype, 3), perm)


@pytest.mark.parametrize("isa", list(VARIANTS))
def test_unaligned_buffers_take_the_general_path(isa):
    """x and y at odd byte addresses (raw bytes, as the wrapper allows; the 4-byte shuffle loop is taken only for
    4-aligned buffers): the bytes still match numpy's."""
    x = _data((1, 3, 40, 41), np.float32, 4)
    want = x.transpose(0, 2, 3, 1).copy()
    xb = np.empty(x.nbytes + 1, np.uint8)[1:]
    xb[:] = x.reshape(-1).view(np.uint8)
    yb = np.empty(x.nbytes + 1, np.uint8)[1:]
    VARIANTS[isa].transpose_copy(xb, x.shape, (0, 2, 3, 1), 4, yb, 1)
    assert yb.tobytes() == want.tobytes()


dims = st.one_of(st.sampled_from([0, 1, 2, 3, 5, 7, 8, 9, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 129]),
                 st.integers(0, 40))


@st.composite
def shape_perm(draw):
    rank = draw(st.integers(1, 6))
    shape = tuple(draw(dims) for _ in range(rank))
    while np.prod(shape, dtype=np.int64) > 400_000:
        shape = tuple(max(1, s // 2) for s in shape)
    return shape, tuple(draw(st.permutations(range(rank))))


@settings(max_examples=60, deadline=None)
@given(sp=shape_perm(), dtype=st.sampled_from(DTYPES), seed=st.integers(0, 2**16))
def test_hypothesis_shapes(sp, dtype, seed):
    """Drawn shapes with 0 and 1 dims, primes and sizes next to the block sizes; every variant, 1 and 2 threads."""
    shape, perm = sp
    _check(_data(shape, dtype, seed), perm)


def test_scalar_and_all_ones():
    for shape in [(), (1,), (1, 1, 1)]:
        x = _data(shape, np.float32, 3)
        _check(x, tuple(range(len(shape)))[::-1])


def test_read_only_input():
    """Read-only inputs (mmapped weights) are accepted: the input view is const."""
    x = _data((3, 40, 50), np.float32, 4)
    x.setflags(write=False)
    _check(x, (2, 0, 1))


def test_errors():
    mod = VARIANTS["generic"]
    x = np.zeros(24, np.uint8)
    y = np.zeros(24, np.uint8)
    with pytest.raises(ValueError, match="itemsize must be 1, 2, 4 or 8"):
        mod.transpose_copy(x, (2, 3), (1, 0), 3, y)
    with pytest.raises(ValueError, match="not a permutation"):
        mod.transpose_copy(x, (2, 3, 4), (0, 0, 1), 1, y)
    with pytest.raises(ValueError, match="not a permutation"):
        mod.transpose_copy(x, (2, 3, 4), (0, 1, 3), 1, y)
    with pytest.raises(ValueError, match="same length as shape"):
        mod.transpose_copy(x, (2, 3, 4), (0, 1), 1, y)
    with pytest.raises(ValueError, match="needs 48 bytes, x has 24 and y has 24"):
        mod.transpose_copy(x, (2, 3, 4), (2, 1, 0), 2, y)
    with pytest.raises(ValueError, match="needs 24 bytes, x has 24 and y has 12"):
        mod.transpose_copy(x, (2, 3, 4), (2, 1, 0), 1, y[:12])
    with pytest.raises(ValueError, match="negative dim"):
        mod.transpose_copy(x, (-2, 3, 4), (2, 1, 0), 1, y)
    with pytest.raises(ValueError, match="at most 32 dims"):
        mod.transpose_copy(x[:1], (1,) * 33, tuple(range(33)), 1, y[:1])


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("shape_axis", [((2, 3, 4), 1), ((1, 55, 55, 64), 3), ((300, 7), 0), ((5, 1, 3), 2),
                                        ((1, 128, 28, 28), 1)])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_copy_rows_is_concat(isa, shape_axis, nthreads):
    """Oracle: numpy.concatenate. copy_rows places each input's slabs at its offset in the joined output (what the
    Concat op does with it); sizes above the threading threshold run on 2 threads."""
    mod = VARIANTS[isa]
    shape, axis = shape_axis
    rng = np.random.default_rng(len(shape) + axis)
    xs = [rng.standard_normal(shape[:axis] + (n,) + shape[axis + 1:]).astype(np.float32) for n in (shape[axis], 3, 1)]
    ref = np.concatenate(xs, axis)
    y = np.full(ref.shape, np.nan, np.float32)
    inner = int(np.prod(shape[axis + 1:]))
    rows = int(np.prod(shape[:axis]))
    o = 0
    for x in xs:
        n = x.shape[axis]
        mod.copy_rows(x.reshape(-1).view(np.uint8), rows, n * inner * 4, y.reshape(-1).view(np.uint8),
                      ref.shape[axis] * inner * 4, o * inner * 4, nthreads)
        o += n
    np.testing.assert_array_equal(y, ref)


def test_copy_rows_errors():
    """Sizes that do not fit raise ValueError before any byte is written (no oracle: error behaviour)."""
    x = np.zeros(12, np.uint8)
    y = np.zeros(20, np.uint8)
    with pytest.raises(ValueError, match="x has"):
        _kernels.copy_rows(x, 4, 4, y, 5, 0)
    with pytest.raises(ValueError, match="y has"):
        _kernels.copy_rows(x, 3, 4, y, 9, 0)
    with pytest.raises(ValueError, match="y has"):
        _kernels.copy_rows(x, 3, 4, y, 8, 1)
    with pytest.raises(ValueError, match="bad geometry"):
        _kernels.copy_rows(x, 3, 4, y, 2, 0)
    _kernels.copy_rows(x, 3, 4, y, 8, 0)


@pytest.mark.parametrize("isa", list(VARIANTS))
@pytest.mark.parametrize("P,G,Cg", [(1, 1, 5), (3, 2, 17), (5, 3, 33), (784, 4, 68), (49, 4, 272), (7, 8, 9),
                                    (6, 5, 13), (2, 9, 1), (0, 4, 3), (1, 3, 50176), (1, 2, 70001), (1, 5, 30011)])
@pytest.mark.parametrize("nthreads", [1, 2])
def test_channel_shuffle_4b_is_the_transpose(isa, P, G, Cg, nthreads):
    """channel_shuffle_4b against numpy's x.reshape(P, G, Cg).transpose(0, 2, 1) (oracle), bit-exact on random bit
    patterns (NaN payloads included: the bits are moved, never computed on), the G cases with a constant inner loop
    (2, 3, 4, 8) and others, 1 and 2 threads (784 x 4 x 68 floats is above the serial threshold; so are the single
    pixels of 150k-560k floats, an NCHW -> NHWC transpose of one image, whose channels split over the threads)."""
    x = _data((P, G * Cg), np.uint32, P + G + Cg)
    y = np.zeros_like(x)
    VARIANTS[isa].channel_shuffle_4b(x.reshape(-1).view(np.float32), P, G, Cg, y.reshape(-1).view(np.float32),
                                     nthreads)
    np.testing.assert_array_equal(y, x.reshape(P, G, Cg).transpose(0, 2, 1).reshape(P, G * Cg))


def test_channel_shuffle_4b_errors():
    """Wrong sizes, bad geometry and y overlapping x raise ValueError naming the kernel; nothing is written."""
    x = np.arange(24, dtype=np.float32)
    y = np.zeros(24, np.float32)
    with pytest.raises(ValueError, match="channel_shuffle_4b: P=2, G=4, Cg=4 needs 32"):
        _kernels.channel_shuffle_4b(x, 2, 4, 4, y)
    with pytest.raises(ValueError, match="bad geometry"):
        _kernels.channel_shuffle_4b(x, 2, 0, 12, y)
    with pytest.raises(ValueError, match="overlaps"):
        _kernels.channel_shuffle_4b(x, 2, 3, 4, x)
    assert not y.any()
