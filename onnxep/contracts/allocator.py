"""User allocators bound to streams (seed 004_addf7aa1a7373ebc.txt, Ascend ACL aclrtAllocatorRegister).

An allocator is a descriptor: an opaque object plus three callbacks, set one by one as with
aclrtAllocatorSetObjToDesc / SetAllocFuncToDesc / SetGetAddrFromBlockFuncToDesc / SetFreeFuncToDesc:

    alloc_func(obj, size) -> block              any Python object standing for the allocation
    get_addr_from_block_func(obj, block) -> int the address of the first byte of `block`
    free_func(obj, block) -> None               return the block

`register_allocator(stream, desc)` routes every buffer of that stream through the descriptor. The rules the seed
states, and how onnxep keeps them:
  - the stream cannot be null -> InvalidArgument; an incomplete descriptor -> InvalidArgument.
  - several registrations on one stream: the last one is used.
  - one allocator shared by several streams must not run them concurrently: `Stream.running()` takes the
    allocator for the stream; a second stream trying to run on the same allocator meanwhile raises
    `Fail` (a clear error, never silent corruption). Synchronize the first stream, then run the next.
  - a buffer goes back to the allocator only after its stream is synchronized: `Stream.free_block` calls
    `synchronize()` first.
The default (no registration) is an aligned host allocator backed by numpy.
"""
from __future__ import annotations

import bisect
import ctypes
import sys
import threading
from collections import deque

import numpy as np

from onnxep._kernels import address_of
from onnxep.errors import Fail, InvalidArgument

#: Alignment of every host buffer onnxep allocates (a cache line; also an AVX-512 vector).
HOST_ALIGNMENT = 64


class AllocatorDesc:
    """aclrtAllocatorDesc: an allocator object and its alloc / free / get-address-from-block callbacks."""

    def __init__(self, obj=None, alloc_func=None, free_func=None, get_addr_from_block_func=None, name=None):
        self.obj = obj
        self.alloc_func = alloc_func
        self.free_func = free_func
        self.get_addr_from_block_func = get_addr_from_block_func
        self.name = name or f"allocator@{id(self):x}"
        self._lock = threading.Lock()
        self._running_stream = None   # the stream currently running on this allocator, if any
        self._running_depth = 0

    # The four setters of the ACL API, for symmetry with it; plain attribute assignment works too.
    def set_obj(self, obj):
        self.obj = obj

    def set_alloc_func(self, fn):
        self.alloc_func = fn

    def set_free_func(self, fn):
        self.free_func = fn

    def set_get_addr_from_block_func(self, fn):
        self.get_addr_from_block_func = fn

    def missing(self):
        """Names of the callbacks not set yet (empty when the descriptor is complete)."""
        return [n for n in ("alloc_func", "free_func", "get_addr_from_block_func") if getattr(self, n) is None]

    def __repr__(self):
        return f"AllocatorDesc({self.name})"


def host_bytes(size: int) -> np.ndarray:
    """`size` uninitialised bytes of host memory, HOST_ALIGNMENT-aligned: a numpy block over-allocated by the alignment
    and sliced at the first aligned address (numpy frees it when the last view is gone)."""
    return _aligned_view(np.empty(size + HOST_ALIGNMENT, dtype=np.uint8), size)


class HostBlockPool:
    """Host blocks kept across runs of one session and handed out again once nothing references them (CPython's
    reference count of the block is the proof: every array carved from a block holds a reference to it). Without it,
    every run's large activations are fresh mmaps whose pages the kernel faults in and zeroes again (measured ~4% of
    a ResNet-50 run). A request takes a free block of its exact size, else the smallest free block of up to
    BEST_FIT times its size (models with many activation sizes -- DenseNet, Inception -- would otherwise keep a block
    per size), else a new block (of size_class(size) bytes); static-shape models then make the same choices every
    run. A new block drops the free blocks it has outgrown (within BEST_FIT below its size): a growing tensor -- a
    decoder's key / value cache -- would otherwise leave a block behind at every size class it passes. At most
    `limit` bytes are pooled, beyond that blocks are plain allocations."""

    BEST_FIT = 2.0

    def __init__(self, limit: int = 1 << 30):
        self.limit = limit
        self.pooled = 0
        self._free = {}                    # size -> [(block, aligned start)]
        self._sizes = []                   # the sizes of _free, sorted
        self._lock = threading.Lock()

    def take(self, size: int) -> np.ndarray:
        """`size` uninitialised HOST_ALIGNMENT-aligned bytes (as host_bytes)."""
        with self._lock:
            entries = self._free.get(size)
            if entries:
                for block, start in entries:
                    if sys.getrefcount(block) == 3:    # the entry, `block`, getrefcount's argument: no view alive
                        return block[start:start + size]
            sizes = self._sizes
            i = bisect.bisect_right(sizes, size)
            while i < len(sizes) and sizes[i] <= size * self.BEST_FIT:
                for block, start in self._free[sizes[i]]:
                    if sys.getrefcount(block) == 3:
                        return block[start:start + size]
                i += 1
            self._drop_outgrown(size)
            cls = size_class(size)
            block = np.empty(cls + HOST_ALIGNMENT, dtype=np.uint8)
            start = -address_of(block) % HOST_ALIGNMENT
            if self.pooled + block.nbytes <= self.limit:
                if cls not in self._free:
                    bisect.insort(sizes, cls)
                    self._free[cls] = []
                self._free[cls].append((block, start))
                self.pooled += block.nbytes
            return block[start:start + size]

    def _drop_outgrown(self, size: int) -> None:
        """Forget the free blocks of size/BEST_FIT .. size bytes (a request of `size` found none big enough)."""
        sizes = self._sizes
        i = bisect.bisect_left(sizes, size / self.BEST_FIT)
        while i < len(sizes) and sizes[i] < size:
            keep = []
            for entry in self._free[sizes[i]]:
                block = entry[0]
                if sys.getrefcount(block) == 3:    # as in take: no view alive
                    self.pooled -= block.nbytes
                else:
                    keep.append(entry)
            if keep:
                self._free[sizes[i]] = keep
                i += 1
            else:
                del self._free[sizes[i]]
                del sizes[i]


def size_class(size: int) -> int:
    """`size` rounded up to its first three significant bits (classes 1/8 of a power of two apart, as the size
    classes of jemalloc / tcmalloc): a pooled block then serves the requests up to 12.5% larger than the one that
    made it -- a decoder's key / value cache grows a row a step -- and the tail a request does not use is never
    touched, so it costs address space, not memory."""
    if size <= 16:
        return size
    step = 1 << (size.bit_length() - 4)
    return -(-size // step) * step


def _load_malloc_trim():
    try:
        libc = ctypes.CDLL(None)
        fn = libc.malloc_trim          # glibc only
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


_MALLOC_TRIM = _load_malloc_trim()


def trim_host_heap() -> None:
    """Hand the heap pages freed so far back to the OS (glibc's malloc_trim; nothing elsewhere). Called once a
    session is built and once a run has been recorded: both leave many freed transients (shape inference, folded and
    unpacked weights, the recorded run's tensors) that glibc would otherwise keep mapped for reuse."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)


def _aligned_view(block, size):
    start = -address_of(block) % HOST_ALIGNMENT
    return block[start:start + size]


class _NumpyHostAllocator:
    """The default allocator: numpy blocks over-allocated by HOST_ALIGNMENT and offset to an aligned address."""

    @staticmethod
    def alloc(obj, size):
        return np.empty(int(size) + HOST_ALIGNMENT, dtype=np.uint8)

    @staticmethod
    def get_addr(obj, block):
        addr = address_of(block)
        return addr + (-addr) % HOST_ALIGNMENT

    @staticmethod
    def free(obj, block):
        pass  # numpy frees the block when the last view of it is gone


def default_allocator() -> AllocatorDesc:
    """The aligned host allocator used by streams with no registration."""
    return _DEFAULT


_DEFAULT = AllocatorDesc(None, _NumpyHostAllocator.alloc, _NumpyHostAllocator.free, _NumpyHostAllocator.get_addr,
                         name="onnxep-host-aligned")


class _Lease:
    """Owns one block while any view of it lives; returns it to its allocator (after syncing the stream) on drop."""

    __slots__ = ("desc", "block", "stream", "__weakref__")

    def __init__(self, desc, block, stream):
        self.desc, self.block, self.stream = desc, block, stream

    def __del__(self):
        block, self.block = self.block, None
        if block is not None:
            self.stream.free_block(self.desc, block)


def _memory_view(desc, block, size, stream) -> np.ndarray:
    """A uint8 array of `size` bytes over `block`; returns the block to `desc` when no view of it remains."""
    if desc is _DEFAULT:
        start = desc.get_addr_from_block_func(desc.obj, block) - address_of(block)
        return block[start:start + size]
    addr = int(desc.get_addr_from_block_func(desc.obj, block))
    lease = _Lease(desc, block, stream)
    if size == 0 or addr == 0:
        raw = (ctypes.c_uint8 * 1)()
        raw._lease = lease
        return np.frombuffer(raw, dtype=np.uint8)[:0]
    raw = (ctypes.c_uint8 * size).from_address(addr)
    raw._lease = lease  # the ctypes object keeps the lease, every numpy view keeps the ctypes object
    return np.frombuffer(raw, dtype=np.uint8)


class Stream:
    """An ordered queue of work on one device (aclrtStream). onnxep's CPU work is synchronous, so a stream holds
    only deferred host copies (set/get_tensor_async) until `synchronize()`, plus the allocator registered on it."""

    def __init__(self, name=None):
        self.name = name or f"stream@{id(self):x}"
        self._allocator = None
        self._pending = deque()
        self._lock = threading.Lock()

    @property
    def allocator(self) -> AllocatorDesc:
        return self._allocator if self._allocator is not None else _DEFAULT

    @property
    def uses_default_allocator(self) -> bool:
        return self._allocator is None

    # --------------------------------------------------------------- work queue
    def enqueue(self, fn):
        """Defer `fn()` until the next synchronize()."""
        with self._lock:
            self._pending.append(fn)

    def synchronize(self):
        """Run every deferred task, in order (aclrtSynchronizeStream)."""
        while True:
            with self._lock:
                if not self._pending:
                    return
                fn = self._pending.popleft()
            fn()

    # --------------------------------------------------------------- memory
    def alloc(self, size: int) -> np.ndarray:
        """`size` bytes from this stream's allocator, as an aligned uint8 array; freed when no view remains."""
        size = int(size)
        if size < 0:
            raise InvalidArgument(f"stream {self.name}: cannot allocate {size} bytes")
        if self._allocator is None:
            return host_bytes(size)
        desc = self._allocator
        block = desc.alloc_func(desc.obj, size)
        if block is None:
            raise Fail(f"allocator {desc.name} returned no block for {size} bytes (out of memory?)")
        return _memory_view(desc, block, size, self)

    def free_block(self, desc, block):
        """Return `block` to `desc`, after the stream is synchronized (seed 004: synchronize before release)."""
        self.synchronize()
        desc.free_func(desc.obj, block)

    # --------------------------------------------------------------- exclusivity
    def running(self):
        """Context manager held while this stream runs work: one allocator runs one stream at a time."""
        return _Running(self)

    def __repr__(self):
        return f"Stream({self.name}, allocator={self.allocator.name})"


class _Running:
    __slots__ = ("stream", "desc")

    def __init__(self, stream):
        self.stream = stream
        self.desc = stream.allocator

    def __enter__(self):
        desc = self.desc
        if desc is _DEFAULT:
            return self  # the default allocator is thread-safe and per-stream exclusive by construction
        with desc._lock:
            other = desc._running_stream
            if other is not None and other is not self.stream:
                raise Fail(
                    f"allocator {desc.name} is in use by {other.name}; streams sharing one allocator must not run "
                    f"concurrently: synchronize {other.name} before running {self.stream.name}")
            desc._running_stream = self.stream
            desc._running_depth += 1
        return self

    def __exit__(self, *exc):
        desc = self.desc
        if desc is _DEFAULT:
            return False
        self.stream.synchronize()
        with desc._lock:
            desc._running_depth -= 1
            if desc._running_depth == 0:
                desc._running_stream = None
        return False


def register_allocator(stream, desc):
    """aclrtAllocatorRegister: route `stream`'s allocations through `desc`. The last registration wins."""
    if stream is None:
        raise InvalidArgument("register_allocator: stream must not be None")
    if not isinstance(stream, Stream):
        raise InvalidArgument(f"register_allocator: expected an onnxep Stream, got {type(stream).__name__}")
    if desc is None:
        raise InvalidArgument("register_allocator: allocator descriptor must not be None")
    missing = desc.missing()
    if missing:
        raise InvalidArgument(f"register_allocator: descriptor {desc.name} is incomplete, missing {', '.join(missing)}")
    stream._allocator = desc
    return 0
