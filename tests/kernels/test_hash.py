"""XXH64 kernel (content hash of the pre-packed weight cache).

Oracle: the `xxhash` package (xxhash.xxh64_intdigest), bit for bit; every ISA variant also equals the generic one.
"""
import importlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import xxhash

from onnxep import _kernels

VARIANTS = {isa: importlib.import_module(f"onnxep._kernels_{isa}") for isa in _kernels.AVAILABLE}
GENERIC = importlib.import_module("onnxep._kernels_generic")
SEEDS = [0, 1, 2**32 + 7, 2**64 - 1]
MAXLEN = 4097

_BUF = np.random.default_rng(2024).integers(0, 256, MAXLEN + 8, dtype=np.uint8)


def _first_mismatch(fn, want_fn, buf, lengths, seed):
    for n in lengths:
        if fn(buf[:n], seed) != want_fn(buf[:n], seed):
            return n
    return None


def test_variants_present():
    """The generic variant is always built; the default module is one of the built variants."""
    assert "generic" in VARIANTS and _kernels.ISA in VARIANTS
    assert _kernels.xxh64 is VARIANTS[_kernels.ISA].xxh64


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("seed", SEEDS)
def test_every_length_vs_xxhash(isa, seed):
    """Oracle: xxhash.xxh64_intdigest on every length 0..4097 (all tail paths: 8/4/1-byte steps, with and without
    32-byte stripes)."""
    fn = VARIANTS[isa].xxh64
    assert _first_mismatch(fn, xxhash.xxh64_intdigest, _BUF, range(MAXLEN + 1), seed) is None


@pytest.mark.parametrize("isa", sorted(set(VARIANTS) - {"generic"}))   # empty set -> pytest reports a skip
@pytest.mark.parametrize("seed", SEEDS)
def test_variant_equals_generic(isa, seed):
    """Oracle: the generic variant (each ISA build of the same source must agree with it on every length)."""
    assert _first_mismatch(VARIANTS[isa].xxh64, GENERIC.xxh64, _BUF, range(MAXLEN + 1), seed) is None


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("offset", range(1, 8))
def test_unaligned_slices(isa, offset):
    """Oracle: xxhash. Views starting 1..7 bytes into an (aligned) buffer: every load is unaligned."""
    fn = VARIANTS[isa].xxh64
    buf = _BUF[offset:]
    assert buf.ctypes.data % 8 != 0 or offset % 8 == 0
    lengths = list(range(0, 200)) + [255, 256, 257, 1023, 1024, 1025, 4000, MAXLEN]
    for seed in SEEDS:
        assert _first_mismatch(fn, xxhash.xxh64_intdigest, buf, lengths, seed) is None, seed


@pytest.mark.parametrize("isa", sorted(VARIANTS))
def test_read_only_inputs(isa):
    """Oracle: xxhash. Read-only arrays (as mmapped / frozen weights are) and bytes objects are accepted."""
    fn = VARIANTS[isa].xxh64
    ro = _BUF[3:3001].copy()
    ro.flags.writeable = False
    assert fn(ro) == xxhash.xxh64_intdigest(ro)
    assert fn(ro, 2**64 - 1) == xxhash.xxh64_intdigest(ro, 2**64 - 1)
    b = ro.tobytes()
    assert fn(b) == xxhash.xxh64_intdigest(b)
    assert fn(memoryview(b)[5:]) == xxhash.xxh64_intdigest(b[5:])
    assert fn(b"") == xxhash.xxh64_intdigest(b"") == 0xEF46DB3751D8E999   # spec's XXH64("", 0)


@pytest.mark.parametrize("isa", sorted(VARIANTS))
@pytest.mark.parametrize("n", [65535, 65536, 65537, (1 << 20) + 13])
def test_large_inputs_release_gil(isa, n):
    """Oracle: xxhash. Sizes around the GIL-release threshold (64 KB) and over 1 MB, hashed from 4 threads at
    once over one shared read-only buffer."""
    fn = VARIANTS[isa].xxh64
    data = np.random.default_rng(n).integers(0, 256, n + 5, dtype=np.uint8)[5:]
    data.flags.writeable = False
    want = [xxhash.xxh64_intdigest(data, s) for s in SEEDS]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda s: fn(data, s), SEEDS * 3))
    assert got == want * 3


def test_result_is_python_int_in_range():
    """Oracle: xxhash (a hash with the top bit set round-trips as a non-negative int, not a negative int64)."""
    seen_top = False
    for n in range(64):
        h = _kernels.xxh64(_BUF[:n])
        assert type(h) is int and 0 <= h < 2**64
        seen_top |= h >= 2**63
    assert seen_top


def test_bad_arguments():
    """Oracle: the wrapper's contract -- non-contiguous or non-byte buffers and out-of-range seeds are errors,
    not silently hashed."""
    with pytest.raises(ValueError):
        _kernels.xxh64(_BUF[::2])
    with pytest.raises(ValueError):
        _kernels.xxh64(np.zeros(4, np.float32))
    with pytest.raises(OverflowError):
        _kernels.xxh64(_BUF[:8], -1)
    with pytest.raises(OverflowError):
        _kernels.xxh64(_BUF[:8], 2**64)


# ---------------------------------------------------------------------------------------------------------------
# The weight cache's content_hash is XXH64 (seed 0) of the weight's C-order bytes.

@pytest.mark.parametrize("make", [
    lambda: np.arange(24, dtype=np.float32).reshape(2, 3, 4),
    lambda: np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(2, 0, 1),   # copied to C order
    lambda: np.arange(40, dtype=np.int64)[::3],                                    # strided
    lambda: np.float32(3.5).reshape(()),                                           # 0-d
    lambda: np.zeros((0, 7), np.float32),                                          # empty
    lambda: np.array([[True, False, True]]),
    lambda: np.arange(10, dtype=">f4"),                                            # bytes as stored
], ids=["c", "transposed", "strided", "0d", "empty", "bool", "big-endian"])
def test_content_hash_is_xxh64_of_c_order_bytes(make):
    """Oracle: xxhash.xxh64_intdigest(weight.tobytes()) (tobytes is C order)."""
    from onnxep.contracts.weight_cache import content_hash
    w = make()
    assert content_hash(w) == xxhash.xxh64_intdigest(w.tobytes())
    w2 = np.array(w)   # the same content elsewhere in memory
    w2.flags.writeable = False
    assert content_hash(w2) == content_hash(w)


def test_content_hash_hashes_c_contiguous_weights_in_place(monkeypatch):
    """Oracle: numpy.shares_memory -- a C-contiguous (here read-only) weight reaches xxh64 without a copy."""
    from onnxep.contracts import weight_cache
    w = np.random.default_rng(0).standard_normal((64, 33)).astype(np.float32)
    w.flags.writeable = False
    seen = []
    real = _kernels.xxh64
    monkeypatch.setattr(weight_cache._kernels, "xxh64", lambda data, seed=0: seen.append(data) or real(data, seed))
    h = weight_cache.content_hash(w)
    assert h == xxhash.xxh64_intdigest(w)
    assert len(seen) == 1 and np.shares_memory(seen[0], w) and seen[0].nbytes == w.nbytes
