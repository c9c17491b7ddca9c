"""The compile step (seed 003_a6c6328fd6e65493.txt, OrtEp::Compile).

`compile(partitions, backends, ctx)` turns each partition into a GraphPlan through its backend's graph_plan_create:
kernels are created and constant weights pre-packed (through the shared cache, see `prepack_kernel`). The graph
objects handed in are valid only during the call: plans keep copies of the names they need, never a Node, Graph or
onnx proto of the caller's. (EPContext export -- returning pre-compiled nodes -- is a later addition; it will hang off
the same call.)
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


def prepack_kernel(kernel, constants: dict, ctx: CompileContext) -> set:
    """Run the PrePackWeight protocol of seed 001 for each constant input of `kernel`; return the packed indices.

    Sharing mode when ctx.container is set (a fresh SharedPrePackedWeightCache per call), non-sharing mode when not
    (the cache argument is None). set_shared_prepacked_weight is called only for inputs packed in sharing mode."""
    packed = set()
    if not ctx.prepack:
        return packed
    for index, weight in constants.items():
        cache = SharedPrePackedWeightCache(ctx.weight_allocator) if ctx.container is not None else None
        try:
            is_packed = bool(kernel.prepack_weight(weight, index, ctx.weight_allocator, cache))
            if is_packed and cache is not None and cache.has_data():
                shared = ctx.container.share(kernel.prepack_format(index), weight, cache)
                kernel.set_shared_prepacked_weight(shared, index)
        finally:
            if cache is not None:
                cache.release()  # frees data stored but not handed on (e.g. the kernel raised after storing)
        if is_packed:
            packed.add(index)
    return packed


def compile(partitions, backends: dict, ctx: CompileContext) -> list:
    """One GraphPlan per partition, in order. On error, plans made so far are freed before the error propagates."""
    plans = []
    try:
        for part in partitions:
            plans.append(backends[part.backend].graph_plan_create(part, ctx))
    except BaseException:
        for plan in plans:
            plan.free()
        raise
    return plans
