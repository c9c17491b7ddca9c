"""Backends, buffers and graph plans (seed 002_23061e04fda6a8e4.txt, ggml-backend-impl.h).

    Device      stateless, one per process: name and `supports_op` (ggml moved supports_op off the stateful
                backend onto the device, PR #9707; onnxep starts there).
    BufferType  where a backend's buffers live: alignment, get_alloc_size, alloc_buffer.
    Buffer      ggml_backend_buffer: get_base, get_size, get_alloc_size, init_tensor, free_tensor, free_buffer.
    Tensor      ggml_tensor: a name, dtype and shape placed in one buffer at one offset.
    Backend     ggml_backend: get_name, alloc_buffer, get_alignment, set/get_tensor(_async) + synchronize,
                cpy_tensor_from/to (optional), graph_plan_create / graph_plan_compute / graph_plan_free,
                graph_compute, supports_op (delegates to the device).
    GraphPlan   what graph_plan_create returns: a partition compiled for one backend.
"""
from __future__ import annotations

import numpy as np

from onnxep.contracts.allocator import HOST_ALIGNMENT, Stream
from onnxep.errors import InvalidArgument


class Tensor:
    """ggml_tensor: `shape`/`dtype` placed at byte `offset` of `buffer`."""

    __slots__ = ("name", "dtype", "shape", "buffer", "offset")

    def __init__(self, name, dtype, shape, buffer=None, offset=0):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.shape = tuple(int(d) for d in shape)
        self.buffer = buffer
        self.offset = int(offset)

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        return n

    def array(self) -> np.ndarray:
        """The tensor's memory as a numpy array (a view, no copy)."""
        if self.buffer is None:
            raise InvalidArgument(f"tensor {self.name!r} is not placed in a buffer")
        return self.buffer.view(self.dtype, self.shape, self.offset)

    def __repr__(self):
        return f"Tensor({self.name!r}, {self.dtype}, {self.shape}, offset={self.offset})"


class Buffer:
    """ggml_backend_buffer: `size` bytes from one buffer type (and so from one stream's allocator).

    The memory goes back to the allocator when the buffer and every array viewing it are gone, so a tensor
    returned to a caller never dangles; `free_buffer()` drops the buffer's own hold on it."""

    __slots__ = ("buft", "size", "_mem", "_base")

    def __init__(self, buft, size, mem):
        self.buft = buft
        self.size = int(size)
        self._mem = mem
        self._base = None if size else 0     # (worked out when asked: numpy's .ctypes costs ~3 us, per packed weight)

    def get_base(self) -> int:
        """Address of the first byte."""
        base = self._base
        if base is None:
            base = self._base = self.memory().ctypes.data      # (a freed buffer never asked: InvalidArgument)
        return base

    def get_size(self) -> int:
        return self.size

    def get_alloc_size(self, tensor: Tensor) -> int:
        """Bytes `tensor` needs in this buffer (pre-allocation callback)."""
        return self.buft.get_alloc_size(tensor)

    def init_tensor(self, tensor: Tensor, offset: int = 0) -> Tensor:
        """Place `tensor` at `offset` (post-allocation callback); checks it fits and is aligned."""
        need = self.get_alloc_size(tensor)
        if offset < 0 or offset + need > self.size:
            raise InvalidArgument(f"tensor {tensor.name!r} ({need} bytes at offset {offset}) does not fit in a "
                                  f"{self.size}-byte buffer")
        if offset % self.buft.get_alignment():
            raise InvalidArgument(f"tensor {tensor.name!r}: offset {offset} is not {self.buft.get_alignment()}-aligned")
        tensor.buffer, tensor.offset = self, offset
        return tensor

    def free_tensor(self, tensor: Tensor):
        """Pre-free callback: detach the tensor from this buffer."""
        if tensor.buffer is self:
            tensor.buffer = None

    def view(self, dtype, shape, offset=0) -> np.ndarray:
        dtype = np.dtype(dtype)
        n = 1
        for d in shape:         # (not np.prod: numpy's reduction machinery costs ~10 us a call, and compile views
            n *= int(d)         # every packed weight twice)
        mem = self.memory()
        return mem[offset:offset + n * dtype.itemsize].view(dtype).reshape(shape)

    def memory(self) -> np.ndarray:
        if self._mem is None:
            raise InvalidArgument("buffer was freed")
        return self._mem

    def free_buffer(self):
        """Drop this buffer's hold on its memory (idempotent)."""
        self._mem = None

    @property
    def is_freed(self) -> bool:
        return self._mem is None


class BufferType:
    """Host memory from a stream's allocator, HOST_ALIGNMENT-aligned."""

    def __init__(self, name: str, stream: Stream, alignment: int = HOST_ALIGNMENT):
        self.name = name
        self.stream = stream
        self.alignment = alignment

    is_host = True

    def get_name(self) -> str:
        return self.name

    def get_alignment(self) -> int:
        return self.alignment

    def get_alloc_size(self, tensor: Tensor) -> int:
        """Bytes a tensor takes, rounded up to the alignment so tensors can be packed back to back."""
        a = self.alignment
        return (tensor.nbytes + a - 1) // a * a

    def alloc_buffer(self, size: int) -> Buffer:
        return Buffer(self, size, self.stream.alloc(size))

    def alloc_tensor(self, name, dtype, shape) -> Tensor:
        """A buffer holding exactly one tensor."""
        t = Tensor(name, dtype, shape)
        buf = self.alloc_buffer(self.get_alloc_size(t))
        return buf.init_tensor(t, 0)


class GraphPlan:
    """A partition compiled for one backend (ggml_backend_graph_plan). Holds only copied names and kernels:
    graph objects are never kept past compile (seed 003)."""

    backend_name = "?"

    def __init__(self, inputs, outputs):
        self.inputs = tuple(inputs)    # value names read from outside the partition
        self.outputs = tuple(outputs)  # value names produced for outside the partition

    def describe(self) -> str:
        return f"{type(self).__name__}({len(self.inputs)} in, {len(self.outputs)} out)"

    def free(self):
        """Release kernels and packed data (graph_plan_free)."""


class Device:
    """Stateless, per process: the capability query lives here, not on the stateful backend."""

    name = "?"
    description = ""

    def supports_op(self, op) -> bool:
        """Can this device's backend run `op` (an onnxep.graph.ir.OpInfo)?"""
        raise NotImplementedError

    def init_backend(self, stream: Stream, **options) -> "Backend":
        raise NotImplementedError


class Backend:
    """ggml_backend for host memory. Subclasses implement the graph plan members."""

    #: True when graph_plan_compute reports each kernel's reads and writes to `run_ctx.recorder` itself (the memory
    #: planner then sees lifetimes per kernel); otherwise the executor reports the plan as one step.
    records_steps = False

    def __init__(self, device: Device, stream: Stream):
        self.device = device
        self.stream = stream
        self.buffer_type = BufferType(device.name, stream)

    # ---------------------------------------------------------------- identity
    def get_name(self) -> str:
        return self.device.name

    def free(self):
        self.stream.synchronize()

    # ---------------------------------------------------------------- buffers
    def alloc_buffer(self, size: int) -> Buffer:
        return self.buffer_type.alloc_buffer(size)

    def get_alignment(self) -> int:
        return self.buffer_type.get_alignment()

    # ---------------------------------------------------------------- tensor data access
    def set_tensor_async(self, tensor: Tensor, data, offset: int = 0, size: int | None = None):
        """Copy `size` bytes of `data` into `tensor` at byte `offset`, queued on the stream. `data` must not change
        before synchronize()."""
        src = _bytes_of(data)
        size = src.size if size is None else int(size)
        _check_range(tensor, offset, size, "set_tensor")
        if src.size < size:
            raise InvalidArgument(f"set_tensor {tensor.name!r}: {size} bytes requested, data has {src.size}")
        dst = tensor.buffer.memory()
        start = tensor.offset + offset

        def copy():
            dst[start:start + size] = src[:size]

        self.stream.enqueue(copy)

    def get_tensor_async(self, tensor: Tensor, out, offset: int = 0, size: int | None = None):
        """Copy `size` bytes of `tensor` from byte `offset` into the writable host array `out`, queued."""
        dst = _bytes_of(out)
        size = dst.size if size is None else int(size)
        _check_range(tensor, offset, size, "get_tensor")
        if dst.size < size:
            raise InvalidArgument(f"get_tensor {tensor.name!r}: {size} bytes requested, out has {dst.size}")
        src = tensor.buffer.memory()
        start = tensor.offset + offset

        def copy():
            dst[:size] = src[start:start + size]

        self.stream.enqueue(copy)

    def synchronize(self):
        self.stream.synchronize()

    def set_tensor(self, tensor: Tensor, data, offset: int = 0, size: int | None = None):
        self.set_tensor_async(tensor, data, offset, size)
        self.synchronize()

    def get_tensor(self, tensor: Tensor, out, offset: int = 0, size: int | None = None):
        self.get_tensor_async(tensor, out, offset, size)
        self.synchronize()

    # (optional) single-copy transfers between backends; None means "not offered".
    cpy_tensor_from = None
    cpy_tensor_to = None

    # ---------------------------------------------------------------- graphs
    def graph_plan_create(self, partition, ctx) -> GraphPlan:
        raise NotImplementedError

    def graph_plan_compute(self, plan: GraphPlan, values: dict, run_ctx):
        raise NotImplementedError

    def graph_plan_free(self, plan: GraphPlan):
        plan.free()

    def graph_compute(self, partition, ctx, values: dict, run_ctx):
        """Compute without keeping a plan: create, compute, free."""
        plan = self.graph_plan_create(partition, ctx)
        try:
            self.graph_plan_compute(plan, values, run_ctx)
        finally:
            self.graph_plan_free(plan)

    def supports_op(self, op) -> bool:
        return self.device.supports_op(op)


def cpy_tensor(src_backend: Backend, src: Tensor, dst_backend: Backend, dst: Tensor):
    """Copy `src` into `dst` across backends: the destination's cpy_tensor_from, else the source's cpy_tensor_to,
    else through host memory (get_tensor then set_tensor)."""
    if src.nbytes != dst.nbytes:
        raise InvalidArgument(f"cpy_tensor {src.name!r} -> {dst.name!r}: {src.nbytes} bytes vs {dst.nbytes}")
    if dst_backend.cpy_tensor_from is not None:
        dst_backend.cpy_tensor_from(src, dst)
    elif src_backend.cpy_tensor_to is not None:
        src_backend.cpy_tensor_to(src, dst)
    else:
        host = np.empty(src.nbytes, dtype=np.uint8)
        src_backend.get_tensor(src, host)
        dst_backend.set_tensor(dst, host)


def _bytes_of(a) -> np.ndarray:
    a = np.asarray(a)
    if not a.flags.c_contiguous:
        a = np.ascontiguousarray(a)
    return a.reshape(-1).view(np.uint8)


def _check_range(tensor, offset, size, what):
    if tensor.buffer is None:
        raise InvalidArgument(f"{what}: tensor {tensor.name!r} is not placed in a buffer")
    if offset < 0 or size < 0 or offset + size > tensor.nbytes:
        raise InvalidArgument(f"{what}: bytes [{offset}, {offset + size}) out of range for tensor {tensor.name!r} "
                              f"of {tensor.nbytes} bytes")
