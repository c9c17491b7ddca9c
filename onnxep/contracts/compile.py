"""The compile step (seed 003_a6c6328fd6e65493.txt, OrtEp::Compile).

`compile(partitions, backends, ctx)` turns each partition into a GraphPlan through its backend's graph_plan_create:
kernels are created and constant weights pre-packed (through the shared cache, see `prepack_kernel`). The graph
objects handed in are valid only during the call: plans keep copies of the names they need, never a Node, Graph or
onnx proto of the caller's.

EPContext (graph/epcontext.py): "If the session is configured to generate a pre-compiled model, the execution provider
must return EPContext nodes" -- with `ctx.ep_context_export` set, `compile` also fills `ep_context_nodes` with one
NodeProto per partition (None for partitions that stay plain nodes, the reference backend's). A partition whose
`context` is a loaded blob is rebuilt from it by its backend (`load_prepacked_kernel` instead of `prepack_kernel`):
no passes, no packing, no weight hashing.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from onnxep.contracts.weight_cache import PrePackedWeightsContainer, SharedPrePackedWeightCache


@dataclass
class CompileContext:
    """What compiling needs beyond the partition itself."""

    weight_allocator: object                                 # BufferType for packed weights
    container: PrePackedWeightsContainer | None = field(default_factory=PrePackedWeightsContainer)
    prepack: bool = True                                     # False: "session.disable_prepacking"
    ep_context_export: object = None                         # callable (partition, plan) -> NodeProto | None


def prepack_kernel(kernel, constants: dict, ctx: CompileContext, record: dict | None = None) -> set:
    """Run the PrePackWeight protocol of seed 001 for each constant input of `kernel`; return the packed indices.

    Sharing mode when ctx.container is set (a fresh SharedPrePackedWeightCache per call), non-sharing mode when not
    (the cache argument is None). set_shared_prepacked_weight is called only for inputs packed in sharing mode; then
    `record` (when given) gets index -> (format, the shared buffers), what an EPContext blob saves."""
    packed = set()
    if not ctx.prepack:
        return packed
    for index, weight in constants.items():
        cache = SharedPrePackedWeightCache(ctx.weight_allocator) if ctx.container is not None else None
        try:
            is_packed = bool(kernel.prepack_weight(weight, index, ctx.weight_allocator, cache))
            if is_packed and cache is not None and cache.has_data():
                fmt = kernel.prepack_format(index)
                shared = ctx.container.share(fmt, weight, cache)
                kernel.set_shared_prepacked_weight(shared, index)
                if record is not None:
                    record[index] = (fmt, shared)
        finally:
            if cache is not None:
                cache.release()  # frees data stored but not handed on (e.g. the kernel raised after storing)
        if is_packed:
            packed.add(index)
    return packed


def load_prepacked_kernel(kernel, weights: dict, ctx: CompileContext) -> set:
    """Give `kernel` packed weights loaded from an EPContext blob, without calling prepack_weight: for each
    index -> LoadedPacking (format, original weight's key, packed buffers -- views of the blob, which was read into
    the weights allocator's memory --, info): `set_prepacked_weight_info(info, index)`, then
    `set_shared_prepacked_weight(buffers, index)` with the buffers the container shares (another kernel's identical
    packing, or these). Returns the packed indices."""
    for index, w in weights.items():
        kernel.set_prepacked_weight_info(w.info, index)
        if ctx.container is not None:
            # ownership of the buffers moves to the container; the kernel uses what it hands back
            shared = ctx.container.share_packed(w.format, w.key_hash, w.dtype, w.shape, w.buffers)
        else:
            shared = w.buffers
        kernel.set_shared_prepacked_weight(shared, index)
    return set(weights)


def compile(partitions, backends: dict, ctx: CompileContext, ep_context_nodes: list | None = None) -> list:
    """One GraphPlan per partition, in order. On error, plans made so far are freed before the error propagates.

    With ctx.ep_context_export set and `ep_context_nodes` a list, it gets one EPContext NodeProto (or None) per
    partition, made while the partition is still valid."""
    plans = []
    try:
        for part in partitions:
            plans.append(backends[part.backend].graph_plan_create(part, ctx))
            if ctx.ep_context_export is not None and ep_context_nodes is not None:
                ep_context_nodes.append(ctx.ep_context_export(part, plans[-1]))
    except BaseException:
        for plan in plans:
            plan.free()
        raise
    return plans
