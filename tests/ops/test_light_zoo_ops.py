"""The light model-zoo models in the onnx wheel: every node of an op this group owns is claimed by the cpu backend.
Oracle: the placement rule (cpu supports_op) -- only other groups' ops may remain unclaimed."""
import glob
import os

import onnx
import pytest

from onnxep.backends.cpu import CPU_DEVICE
from onnxep.graph.model import build_graph
from onnxep.graph.partition import op_info

LIGHT = sorted(glob.glob(os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", "*.onnx")))
OTHER_GROUPS = {"Conv", "Gemm", "MaxPool", "AveragePool", "GlobalAveragePool", "LRN", "BatchNormalization", "Softmax"}


def test_light_models_found():
    assert len(LIGHT) == 9


@pytest.mark.parametrize("path", LIGHT, ids=os.path.basename)
def test_light_model_ops_claimed(path):
    g = build_graph(onnx.load(path))
    unclaimed = {n.op_type for n in g.nodes if not CPU_DEVICE.supports_op(op_info(n, g.value_types, g.constants))}
    assert unclaimed <= OTHER_GROUPS, unclaimed - OTHER_GROUPS
