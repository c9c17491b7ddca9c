"""SharedPrePackedWeightCache and PrePackedWeightsContainer against seed 000_410c6350a087f106.txt.

Oracle: the seed's sentences (quoted per test) and numpy byte comparison."""
import numpy as np
import pytest

from onnxep.contracts import PrePackedWeightsContainer, SharedPrePackedWeightCache, Stream
from onnxep.contracts.backend import BufferType
from onnxep.errors import InvalidArgument


@pytest.fixture
def buft():
    return BufferType("weights", Stream("w"))


def _buf(buft, values):
    values = np.asarray(values, dtype=np.float32)
    b = buft.alloc_buffer(values.nbytes)
    b.view(np.float32, values.shape)[...] = values
    return b


def test_ownership_moves_to_cache_on_success(buft):
    # seed 000: "Ownership of weight data transfers to the OrtSharedPrePackedWeightCache instance on success."
    cache = SharedPrePackedWeightCache(buft)
    b = _buf(buft, [1, 2, 3])
    cache.store_weight_data([b])
    assert cache.has_data()
    cache.release()  # the cache, now the owner, frees it
    assert b.is_freed


def test_caller_keeps_ownership_on_error(buft):
    # seed 000: "If this function returns an error status, the caller retains ownership of the weight data."
    # seed 000: "The buffer data MUST be allocated with the OrtAllocator provided to OrtKernelImpl::PrePack."
    cache = SharedPrePackedWeightCache(buft)
    foreign = _buf(BufferType("other", Stream("o")), [4, 5])
    with pytest.raises(InvalidArgument, match="not allocated with the allocator"):
        cache.store_weight_data([foreign])
    assert not cache.has_data()
    assert not foreign.is_freed
    np.testing.assert_array_equal(foreign.view(np.float32, (2,)), [4, 5])
    cache.release()
    assert not foreign.is_freed  # still the caller's


@pytest.mark.parametrize("bad", [[], None, ["not a buffer"]])
def test_invalid_buffer_lists_are_errors(buft, bad):
    # seed 000: num_buffers "Specifies the number of elements in the buffer_data_ptrs and buffer_data_sizes arrays."
    with pytest.raises(InvalidArgument):
        SharedPrePackedWeightCache(buft).store_weight_data(bad)


def test_second_call_releases_and_replaces(buft):
    # seed 000: "Subsequent calls with the same OrtSharedPrePackedWeightCache instance release and replace the old data."
    cache = SharedPrePackedWeightCache(buft)
    old = _buf(buft, [1])
    new = _buf(buft, [2])
    cache.store_weight_data([old])
    cache.store_weight_data([new])
    assert old.is_freed and not new.is_freed
    assert cache.take() == (new,)


def test_multiple_buffers_for_one_weight(buft):
    # seed 000: "sometimes a single weight may have multiple pre-packed buffers and it is up to the kernel
    # implementation to determine how to split the data into multiple buffers"
    cache = SharedPrePackedWeightCache(buft)
    parts = [_buf(buft, [1, 2]), _buf(buft, [3])]
    cache.store_weight_data(parts)
    shared = PrePackedWeightsContainer().share("fmt", np.arange(3, dtype=np.float32), cache)
    assert shared == tuple(parts)
    assert [b.get_size() for b in shared] == [8, 4]


def test_same_weight_same_format_shares_buffers(buft):
    # seed 001 (sharing mode): kernels "share the packed weight with other kernels that use the same weight
    # (compared by content hash)"; the second kernel's freshly stored copy is released.
    container = PrePackedWeightsContainer()
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    c1, c2 = SharedPrePackedWeightCache(buft), SharedPrePackedWeightCache(buft)
    b1, b2 = _buf(buft, w.T), _buf(buft, w.T)
    c1.store_weight_data([b1])
    c2.store_weight_data([b2])
    s1 = container.share("packT", w, c1)
    s2 = container.share("packT", w.copy(), c2)  # same bytes, another array
    assert s1 is s2 and s1[0] is b1
    assert b2.is_freed
    assert (container.hits, container.misses, len(container)) == (1, 1, 1)


def test_different_format_or_weight_does_not_share(buft):
    container = PrePackedWeightsContainer()
    w = np.ones((2, 2), np.float32)
    shared = []
    for fmt, weight in (("a", w), ("b", w), ("a", w * 2)):
        c = SharedPrePackedWeightCache(buft)
        c.store_weight_data([_buf(buft, weight)])
        shared.append(container.share(fmt, weight, c))
    assert len({id(s) for s in shared}) == 3
    assert len(container) == 3


def test_hash_collision_never_shares_wrong_weight(buft, monkeypatch):
    # the key is (format, content hash); a hit is verified byte for byte, so forcing every hash equal must not
    # make two different weights share packed data.
    container = PrePackedWeightsContainer()
    monkeypatch.setattr(container, "hash_function", lambda w: 42)
    a, b = np.zeros(4, np.float32), np.ones(4, np.float32)
    ca, cb = SharedPrePackedWeightCache(buft), SharedPrePackedWeightCache(buft)
    ca.store_weight_data([_buf(buft, a)])
    cb.store_weight_data([_buf(buft, b)])
    sa, sb = container.share("f", a, ca), container.share("f", b, cb)
    assert sa is not sb
    np.testing.assert_array_equal(sb[0].view(np.float32, (4,)), b)
    assert container.misses == 2 and container.hits == 0


def test_content_hash_is_64_bit_and_content_based():
    from onnxep.contracts.weight_cache import content_hash
    a = np.arange(100, dtype=np.float32)
    h = content_hash(a)
    assert 0 <= h < 2 ** 64
    assert content_hash(a.copy()) == h
    b = a.copy()
    b[50] += 1
    assert content_hash(b) != h


@pytest.mark.parametrize("n", [12, 1200])      # keyed by its bytes (SMALL_CONSTANT_BYTES), and by hash + compare
def test_share_constant_holds_equal_constants_once(n):
    # the container holds an unpacked constant (a bias a kernel reads as is) once: equal bytes, dtype and shape give
    # back the first array filed, read-only. Oracle: object identity and numpy.
    c = PrePackedWeightsContainer()
    a = np.arange(n, dtype=np.float32)
    first = c.share_constant(a)
    np.testing.assert_array_equal(first, a)
    assert not first.flags.writeable and np.shares_memory(first, a)       # a read-only view, no copy
    again = c.share_constant(a.copy())
    assert again is first and (c.constant_hits, c.constant_misses) == (1, 1)
    # another dtype, shape or content is another constant
    others = [a.astype(np.float64), a.reshape(3, -1), a + 1]
    shared = [c.share_constant(o) for o in others]
    assert all(s is not first for s in shared) and c.constant_misses == 4
    for o, s in zip(others, shared):
        assert s.dtype == o.dtype and s.shape == o.shape
        np.testing.assert_array_equal(s, o)
    assert c.constant_nbytes == a.nbytes * 2 + a.astype(np.float64).nbytes + a.nbytes
    assert len(c) == 0 and c.nbytes == 0                                   # not packed entries
    strings = np.array(["x"], dtype=object)
    assert c.share_constant(strings) is strings                            # no bytes to hash: not shared
    c.clear()
    assert c.constant_nbytes == 0 and c.share_constant(a) is not first


def test_share_constant_hash_collision_never_shares_wrong_constant(monkeypatch):
    c = PrePackedWeightsContainer()
    monkeypatch.setattr(c, "hash_function", lambda w: 42)                 # every constant collides
    a, b = np.zeros(4, np.float32), np.ones(4, np.float32)
    sa, sb = c.share_constant(a), c.share_constant(b)
    np.testing.assert_array_equal(sa, a)
    np.testing.assert_array_equal(sb, b)
    assert c.share_constant(b.copy()) is sb and c.share_constant(a.copy()) is sa
