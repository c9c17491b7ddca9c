"""Shared pre-packed weights (seed 000_410c6350a087f106.txt, SharedPrePackedWeightCache_StoreWeightData).

`SharedPrePackedWeightCache` is what a kernel's prepack_weight gets in sharing mode: one cache per call, one weight.
`store_weight_data(buffers)`:
  - ownership of the buffers moves to the cache on success;
  - on error (an exception) the caller keeps ownership and the buffers are untouched;
  - a second call on the same cache releases the old data and replaces it.
The buffers MUST come from the allocator given to prepack_weight (checked: Buffer.buft is that allocator).

`PrePackedWeightsContainer` owns the shared data after the call. Key: (the kernel's packing format, a 64-bit content
hash of the original weight, dtype, shape); on a key hit the packings are compared byte for byte -- the one held and
the one the new kernel just made --, so a hash collision can never hand out the wrong packed weight (same format and
same packed bytes: interchangeable). The container keeps no original weight: once packed, the original can go (the
kernel contract), so a process holds each shared weight once, packed, not also unpacked. Kernels in one session --
and sessions given the same container -- that pack the same weight into the same format get the same buffers.

Constants a kernel reads unpacked (biases, folded per-channel scales, shapes) are weights too: `share_constant` holds
each once per process in the same container (key: "constant", content hash, dtype, shape; hits verified byte for
byte), as a read-only array every session computes with.

The small immutable objects every kernel keeps of its node (tuples of value names, tuples of ValueTypes) are held
once per container too (`share_immutable`): equal ones from the sessions of one model are one object.

Packed weights loaded from an EPContext blob (graph/epcontext.py) come without their original: `share_packed` files
them under the key the blob recorded at export (format, content hash, dtype, shape) -- no hashing at load --, and
hits are verified on the packed bytes as for any entry.
"""
from __future__ import annotations

import threading

import numpy as np

from onnxep import _kernels
from onnxep.contracts.backend import Buffer
from onnxep.errors import InvalidArgument


def content_hash(weight: np.ndarray) -> int:
    """64-bit content hash of a weight's bytes (the hash half of the cache key): XXH64, seed 0, of the C-order bytes,
    hashed in place (nogil) for C-contiguous arrays, read-only ones included; other layouts are copied once."""
    data = np.ascontiguousarray(weight).reshape(-1).view(np.uint8)
    return _kernels.xxh64(data)


#: share_constant keys a constant up to this many bytes by its bytes themselves
SMALL_CONSTANT_BYTES = 256


class SharedPrePackedWeightCache:
    """OrtSharedPrePackedWeightCache: the packed buffers of one shared weight, handed over by one kernel."""

    def __init__(self, allocator):
        self.allocator = allocator  # the BufferType given to prepack_weight alongside this cache
        self._buffers: tuple[Buffer, ...] | None = None

    def store_weight_data(self, buffers) -> None:
        """Take ownership of `buffers` (a sequence of Buffer). Raises InvalidArgument -- leaving ownership with the
        caller -- if the list is empty or a buffer was not allocated with this cache's allocator or was freed."""
        try:
            buffers = tuple(buffers)
        except TypeError:
            raise InvalidArgument(f"store_weight_data: expected a sequence of Buffer, got {type(buffers).__name__}")
        if not buffers:
            raise InvalidArgument("store_weight_data: num_buffers must be at least 1")
        for i, b in enumerate(buffers):
            if not isinstance(b, Buffer):
                raise InvalidArgument(f"store_weight_data: buffer {i} is a {type(b).__name__}, not a Buffer")
            if b.buft is not self.allocator:
                raise InvalidArgument(f"store_weight_data: buffer {i} was not allocated with the allocator passed to "
                                      f"prepack_weight ({b.buft.get_name()} vs {self.allocator.get_name()})")
            if b.is_freed:
                raise InvalidArgument(f"store_weight_data: buffer {i} was already freed")
        old, self._buffers = self._buffers, buffers
        if old is not None:  # "subsequent calls ... release and replace the old data"
            for b in old:
                if all(b is not n for n in buffers):
                    b.free_buffer()

    def has_data(self) -> bool:
        return self._buffers is not None

    def take(self) -> tuple[Buffer, ...]:
        """Hand the stored buffers on (to the container); the cache is empty afterwards."""
        buffers, self._buffers = self._buffers, None
        return buffers

    def release(self) -> None:
        """Free whatever the cache still owns."""
        buffers, self._buffers = self._buffers, None
        for b in buffers or ():
            b.free_buffer()


class _Entry:
    __slots__ = ("format", "buffers", "users")

    def __init__(self, fmt, buffers):
        self.format, self.buffers, self.users = fmt, buffers, 0


class PrePackedWeightsContainer:
    """Owns shared pre-packed weights, keyed by (format, content hash, dtype, shape), hits verified byte for byte
    on the packings.

    Thread-safe. One per session by default; pass one container to several sessions to pack and hold each identical
    weight once per process."""

    hash_function = staticmethod(content_hash)

    def __init__(self):
        self._entries: dict[tuple, list[_Entry]] = {}
        self._constants: dict[tuple, list[np.ndarray]] = {}
        self._small: dict[tuple, np.ndarray] = {}      # constants up to SMALL_CONSTANT_BYTES, keyed by their bytes
        self._immutable: dict = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.constant_hits = 0
        self.constant_misses = 0

    def share(self, fmt: str, weight: np.ndarray, cache: SharedPrePackedWeightCache) -> tuple[Buffer, ...]:
        """Take the buffers `cache` holds for `weight` packed as `fmt`; return the buffers every user of this
        (format, weight) pair shares -- the ones just stored, or an earlier kernel's (then the new ones are freed)."""
        weight = np.asarray(weight)
        key = (fmt, self.hash_function(weight), weight.dtype.str, weight.shape)
        new = cache.take()
        with self._lock:
            chain = self._entries.setdefault(key, [])
            for e in chain:
                # a hash hit is only a candidate: compare the packings (the held one and the one just made), which
                # keeps no original weight alive for the comparison
                if _same_buffers(e.buffers, new):
                    return self._hit(e, new)
            return self._add(chain, fmt, new)

    def share_packed(self, fmt: str, key_hash: int, dtype: str, shape: tuple, buffers) -> tuple[Buffer, ...]:
        """Share `buffers`, a packing loaded from an EPContext blob, whose original weight (not at hand) had content
        hash `key_hash`, `dtype` (numpy dtype str) and `shape`. Ownership of `buffers` moves to the container; the
        return value is what the kernel uses (an identical packing already held, or `buffers`)."""
        key = (fmt, int(key_hash), np.dtype(dtype).str, tuple(int(d) for d in shape))
        new = tuple(buffers)
        with self._lock:
            chain = self._entries.setdefault(key, [])
            for e in chain:
                if _same_buffers(e.buffers, new):
                    # not freed: views of one blob, which other kernels of the blob may still be handing over (the
                    # blob's memory goes when its last view does)
                    return self._hit(e, ())
            return self._add(chain, fmt, new)

    def share_constant(self, value: np.ndarray) -> np.ndarray:
        """A constant a kernel reads unpacked (a bias, a per-channel scale, a shape), held once per process: returns
        the container's read-only array of the same dtype, shape and bytes -- one an earlier session filed, or else
        a read-only view of `value`, filed for the next ones. Key ("constant", content hash, dtype, shape); a hash
        hit is only a candidate, the bytes are compared. Object (string) arrays are returned as they are."""
        value = np.asarray(value)
        if value.dtype.hasobject:
            return value
        if value.nbytes <= SMALL_CONSTANT_BYTES:
            # (a model reads hundreds of scalars and shapes: their bytes are the key, no hash and no compare)
            key = (value.dtype.str, value.shape, value.tobytes())
            with self._lock:
                held = self._small.get(key)
                if held is not None:
                    self.constant_hits += 1
                    return held
                held = value.view()
                held.flags.writeable = False
                self._small[key] = held
                self.constant_misses += 1
                return held
        key = ("constant", self.hash_function(value), value.dtype.str, value.shape)
        raw = np.ascontiguousarray(value).reshape(-1).view(np.uint8)
        with self._lock:
            chain = self._constants.setdefault(key, [])
            for held in chain:
                if _equal_u8(held.reshape(-1).view(np.uint8), raw):
                    self.constant_hits += 1
                    return held
            held = value.view()
            held.flags.writeable = False      # shared: no session may write it (its kernels read constants only)
            chain.append(held)
            self.constant_misses += 1
            return held

    def share_immutable(self, obj):
        """An immutable, hashable object every kernel of the sessions on this container may hold -- a tuple of value
        names, a ValueType, a tuple of them --, held once: returns the equal one filed earlier, else files `obj`. The
        sessions of one model build the same such objects for every node; this keeps one of each per container
        instead of one per session (and per node, where nodes repeat them)."""
        return self._immutable.setdefault(obj, obj)

    @property
    def constant_nbytes(self) -> int:
        """Bytes of the unpacked constants held (share_constant)."""
        return sum(a.nbytes for c in self._constants.values() for a in c) + sum(a.nbytes for a in self._small.values())

    def _hit(self, e, free):
        e.users += 1
        self.hits += 1
        for b in free:
            if all(b is not o for o in e.buffers):
                b.free_buffer()
        return e.buffers

    def _add(self, chain, fmt, new):
        e = _Entry(fmt, new)
        e.users = 1
        chain.append(e)
        self.misses += 1
        return e.buffers

    def __len__(self) -> int:
        return sum(len(c) for c in self._entries.values())

    @property
    def nbytes(self) -> int:
        """Bytes of packed data held."""
        return sum(b.get_size() for c in self._entries.values() for e in c for b in e.buffers)

    def clear(self) -> None:
        with self._lock:
            for chain in self._entries.values():
                for e in chain:
                    for b in e.buffers:
                        b.free_buffer()
            self._entries.clear()
            self._constants.clear()
            self._small.clear()
            self._immutable.clear()


def _equal_u8(a: np.ndarray, b: np.ndarray, chunk: int = 1 << 22) -> bool:
    """Byte-for-byte equality in 4 MiB chunks (np.array_equal on the whole would allocate a bool array as large)."""
    if a.size != b.size:
        return False
    for i in range(0, a.size, chunk):
        if not np.array_equal(a[i:i + chunk], b[i:i + chunk]):
            return False
    return True


def _same_buffers(a, b) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is y:
            continue
        if x.get_size() != y.get_size() or not _equal_u8(x.memory()[:x.get_size()], y.memory()[:y.get_size()]):
            return False
    return True
