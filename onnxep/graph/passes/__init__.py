"""Stage 2, optimize: graph passes, one per file, each switched by graph_optimization_level.

This release has constant folding (ORT_ENABLE_BASIC and up); fusions and layout passes come with the graph
optimization work. `optimized_model_filepath` writes the model as loaded (the folded form is not written back yet)."""
from __future__ import annotations

import onnx

from onnxep.graph.ir import Graph

from onnxep.graph.passes.constant_folding import fold_constants

#: (minimum GraphOptimizationLevel, pass function Graph -> Graph), applied in order.
PASSES: list = [
    (1, fold_constants),
]


def optimize(graph: Graph, level: int, optimized_model_filepath: str = "", model: onnx.ModelProto | None = None):
    for min_level, fn in PASSES:
        if level >= min_level:
            graph = fn(graph)
    if optimized_model_filepath and model is not None:
        onnx.save(model, optimized_model_filepath)
    return graph
