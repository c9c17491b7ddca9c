"""Stage 2, optimize: graph passes, one per file, each switched by graph_optimization_level.

The pass list is empty in this release: constant folding, fusions and layout passes come with the graph
optimization work. `optimized_model_filepath` already writes the model the later stages receive."""
from __future__ import annotations

import onnx

from onnxep.graph.ir import Graph

#: (minimum GraphOptimizationLevel, pass function Graph -> Graph), applied in order.
PASSES: list = []


def optimize(graph: Graph, level: int, optimized_model_filepath: str = "", model: onnx.ModelProto | None = None):
    for min_level, fn in PASSES:
        if level >= min_level:
            graph = fn(graph)
    if optimized_model_filepath and model is not None:
        onnx.save(model, optimized_model_filepath)
    return graph
