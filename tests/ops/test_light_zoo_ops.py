"""The light model-zoo models in the onnx wheel: the cpu backend claims every node of every op they use, before any
graph pass (Conv, Gemm, BatchNormalization, the pools, LRN and Softmax included; no op is exempt).
Oracle: the placement rule (cpu supports_op on each node as the file writes it)."""
import os

import onnx
import pytest

from onnxep._light import light_models
from onnxep.backends.cpu import CPU_DEVICE
from onnxep.graph.model import build_graph
from onnxep.graph.partition import op_info

LIGHT = light_models()


def test_light_models_found():
    assert len(LIGHT) == 9


@pytest.mark.parametrize("path", LIGHT, ids=os.path.basename)
def test_light_model_ops_claimed(path):
    g = build_graph(onnx.load(path))
    assert len(g.nodes) > 0
    unclaimed = sorted({n.op_type for n in g.nodes
                        if not CPU_DEVICE.supports_op(op_info(n, g.value_types, g.constants))})
    assert unclaimed == [], f"the cpu backend refuses {unclaimed}"
