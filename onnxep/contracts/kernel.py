"""The kernel contract (seed 001_a7cfc285f4a38a75.txt, ONNX Runtime OrtKernelImpl).

One Kernel instance per node. `compute(ctx)` is required; pre-packing is optional and has three modes, exactly as the
seed describes for PrePackWeight:

1. No pre-packing: `prepack_weight` returns False. `set_shared_prepacked_weight` is then never called for that
   input_index.
2. Sharing mode (a cache is passed, i.e. not None): the kernel allocates the packed weight with the allocator it is
   given, stores it with `cache.store_weight_data(buffers)` (ownership moves to the cache) and returns True. The
   runtime then calls `set_shared_prepacked_weight(buffers, input_index)` with the shared data, whose location may
   differ from what the kernel stored (another kernel with the same weight may have packed it first).
3. Non-sharing mode (the cache is None, or the kernel chooses not to use it): the kernel allocates the packed data
   (with the allocator, recommended), keeps it, returns True and releases it itself in `release()`.
   `set_shared_prepacked_weight` is not called.

Either way, once an input is packed the runtime may drop the original weight: `compute` must not read it (onnxep
enforces this: `ctx.input(i)` of a packed input raises).

EPContext models (graph/epcontext.py) save packed weights: a kernel that can say what it needs besides the packed
bytes (`prepacked_weight_info`) gets them back on load through `set_prepacked_weight_info` then
`set_shared_prepacked_weight`, with no prepack_weight call; one that cannot (the default) is packed again on load.
"""
from __future__ import annotations

import weakref

import numpy as np

from onnxep.errors import InvalidArgument

#: Version of these contracts (the role of ORT_API_VERSION). A kernel built for another version is refused.
API_VERSION = 1


class Kernel:
    """OrtKernelImpl. Subclass and implement `compute`; the rest is optional."""

    #: Must equal API_VERSION (OrtKernelImpl::ort_version_supported).
    ort_version_supported: int = API_VERSION
    #: Must be 0; reserved for the runtime (OrtKernelImpl::flags).
    flags: int = 0
    #: (output index, input index) pairs where the output may take the input's memory when nothing reads the input
    #: after this node (onnxruntime's KernelDefBuilder::MayInplace): the kernel reads each element of that input
    #: before it writes the same element of the output, and nothing else. The memory planner (graph/planner.py) uses
    #: it; a kernel must compute correctly whether or not the two share memory.
    inplace: tuple = ()
    #: True when compute accepts that ctx.output(0, ...) returns a channel slice of a wider channel-last tensor (the
    #: last axis contiguous, the pixels uniformly strided) instead of a fresh C-contiguous array: the cpu plan then
    #: lets output 0 be written straight into the Concat (last axis) that is its only reader, which copies it no
    #: more. Read per kernel instance, after construction. No onnxruntime counterpart.
    strided_output: bool = False
    #: Indices of the inputs compute accepts as strided views (not C-contiguous, positive strides): the session then
    #: lets a graph output that only such inputs read be a view with spare rows that the next run appends to, and
    #: takes such a view back as a feed without copying it (ops/_grow.py: a decoder's key / value cache). Read per
    #: kernel instance, after construction. No onnxruntime counterpart.
    strided_inputs: tuple = ()

    def compute(self, ctx: "KernelContext") -> None:
        """Run the kernel: read inputs from `ctx`, write outputs to `ctx` (required)."""
        raise NotImplementedError(f"{type(self).__name__}.compute")

    def prepack_weight(self, tensor: np.ndarray, input_index: int, allocator, cache) -> bool:
        """(optional) Pack the constant `tensor` (input `input_index`) into the kernel's preferred layout.

        `allocator` is a BufferType: `allocator.alloc_buffer(nbytes)` gives a Buffer. `cache` is a
        SharedPrePackedWeightCache or None. Return True if the kernel packed it. Do not keep `tensor`."""
        return False

    def prepack_format(self, input_index: int) -> str:
        """(optional) Name of the packed layout of `input_index`: the first half of the shared-cache key (the second
        is the weight's content hash). Two kernels share packed data only when formats and contents match, so the
        format must name everything the packing depends on (ISA, tile sizes, transposes...)."""
        return f"{type(self).__module__}.{type(self).__qualname__}:{input_index}"

    def set_shared_prepacked_weight(self, buffers, input_index: int) -> None:
        """(optional) Receive the shared packed data for `input_index`: the Buffers in the order and with the contents
        stored in prepack_weight, possibly at another location. Called only for inputs packed in sharing mode."""
        raise NotImplementedError(f"{type(self).__name__} stored a shared pre-packed weight but does not implement "
                                  f"set_shared_prepacked_weight")

    def prepacked_weight_info(self, input_index: int) -> dict | None:
        """(optional) What the kernel must know, besides the packed bytes, to use the packed weight of `input_index`
        without the original (shapes, lengths), as a JSON-able dict of str / int / float / lists. An EPContext blob
        saves it with the packed buffers and hands it back through set_prepacked_weight_info on load. None (the
        default): the packing cannot be saved; an EPContext model then keeps the original weight and loading packs it
        again with prepack_weight."""
        return None

    def set_prepacked_weight_info(self, info: dict, input_index: int) -> None:
        """(optional) Receive what prepacked_weight_info returned, when the packed weight of `input_index` comes from
        an EPContext blob instead of prepack_weight; set_shared_prepacked_weight follows with the buffers. Raise if
        `info` does not describe a packing this kernel can use (the blob is then refused, never run)."""
        raise NotImplementedError(f"{type(self).__name__} saved pre-packed weight info but does not implement "
                                  f"set_prepacked_weight_info")

    def release(self) -> None:
        """Release the kernel's resources (required to exist; the default has nothing to release)."""


# Key prefix of the run's value entries (PLACED, name) -> (weak reference to the target, offset) that
# KernelContext.output leaves when it writes output `name` into its plan slot (a tuple key: never a value name, which
# is a string).
PLACED = "placed"


class KernelContext:
    """OrtKernelContext: the inputs and outputs of one compute call.

    Inputs are numpy arrays (None for an omitted optional input). `output(i, shape, dtype)` allocates output i from the
    backend's buffer type (so a registered user allocator sees it); `set_output(i, value)` publishes an existing array
    (a view, e.g. Reshape) or a non-tensor value. `slot` (from the plan, for a kernel with strided_output): output 0
    is the channels [offset, offset + C) of the tensor `target` with `channels` channels, allocated by the first of
    its producers to run."""

    __slots__ = ("values", "ins", "outs", "alloc", "num_threads", "packed", "node", "slot", "run")

    def __init__(self, values: dict, ins, outs, alloc, num_threads=0, packed=(), node="", slot=None, run=None):
        self.values = values
        self.ins = ins
        self.outs = outs
        self.alloc = alloc
        self.num_threads = num_threads
        self.packed = packed
        self.node = node
        self.slot = slot
        #: the executor's RunContext of the run (None outside one): what a kernel running subgraphs (If, Loop, Scan)
        #: runs its bodies with -- their allocations, RunOptions.terminate
        self.run = run

    @property
    def input_count(self) -> int:
        return len(self.ins)

    @property
    def output_count(self) -> int:
        return len(self.outs)

    def input(self, i: int):
        if i >= len(self.ins):
            return None
        name = self.ins[i]
        if not name:
            return None
        if i in self.packed:
            raise InvalidArgument(f"node {self.node!r}: input {i} ({name!r}) was pre-packed; compute must use the "
                                  f"packed data, not the original weight")
        return self.values[name]

    def placed(self, i: int):
        """(weak reference to the target array, channel offset) if input i was written by its producer straight into
        a channel slice of the target (its plan slot), else None: what a Concat needs to know to skip the copy,
        without comparing data pointers (microseconds per array)."""
        return self.values.get((PLACED, self.ins[i])) if i < len(self.ins) and self.ins[i] else None

    def preallocated(self, i: int):
        """Output i if producers writing into it (strided_output slots) have allocated it already, else None."""
        return self.values.get(self.outs[i]) if i < len(self.outs) and self.outs[i] else None

    def has_input(self, i: int) -> bool:
        return i < len(self.ins) and bool(self.ins[i])

    def has_output(self, i: int) -> bool:
        return i < len(self.outs) and bool(self.outs[i])

    def output(self, i: int, shape, dtype=np.float32) -> np.ndarray:
        shape = tuple(shape)
        if i == 0 and self.slot is not None and shape:
            target, offset, channels = self.slot
            full = self.values.get(target)
            want = shape[:-1] + (channels,)
            if full is None or full.shape != want or full.dtype != dtype:
                full = self.values[target] = self.alloc(want, dtype)
            arr = full[..., offset:offset + shape[-1]]
            if arr.shape == shape:
                self.values[self.outs[0]] = arr
                # a weak reference: the entry must not keep the target alive (a run without a memory plan frees
                # tensors by reference count; holding every Concat output to the end of the run raised DenseNet's
                # peak by 20 MB)
                self.values[(PLACED, self.outs[0])] = (weakref.ref(full), offset)
                return arr
        arr = self.alloc(shape, dtype)
        if i < len(self.outs) and self.outs[i]:
            self.values[self.outs[i]] = arr
        return arr

    def set_output(self, i: int, value) -> None:
        """Publish `value` as output i. Arrays are made C-contiguous: every tensor flowing between kernels is."""
        if i < len(self.outs) and self.outs[i]:
            if isinstance(value, np.ndarray) and not value.flags.c_contiguous:
                value = np.ascontiguousarray(value)
            self.values[self.outs[i]] = value
