"""The conformance summary's account of the reference backend: what _placement records per case, and the lines
conftest prints. Oracle: the session's node_assignment (a node forced onto the reference backend)."""
import numpy as np
from onnx import helper

import onnxep
from tests._util import fallback_options, make_model

from . import _placement
from .conftest import reference_lines, reference_split


def test_record_counts_reference_ops_and_cpu_nodes():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu_0"), helper.make_node("Neg", ["r"], ["y"], name="neg_0")]
    x = np.ones((2, 3), np.float32)
    sess = onnxep.InferenceSession(make_model(nodes, {"x": x}, ["y"]).SerializeToString(), fallback_options("Neg"))
    assert sess.node_assignment == {"relu_0": "cpu", "neg_0": "reference"}
    _placement.record(sess)
    _placement.record(sess)  # a second session of the same case adds up
    ops = _placement.pop(_placement.current_test())
    assert ops == {"Neg": 2, _placement.CPU_NODES: 2}
    assert _placement.pop(_placement.current_test()) is None


def test_reference_split_and_lines():
    cpu = _placement.CPU_NODES
    on_ref = {"m::T::test_a_cpu": {"Cast": 1, cpu: 2}, "m::T::test_b_expanded_cpu": {"Cast": 2, "Mod": 1},
              "m::T::test_c_cpu": {"Mod": 1, cpu: 0}}
    assert reference_split(10, on_ref) == {"on_reference": 3, "not_expanded": 2, "wholly": 2, "cpu_only": 7}
    lines = reference_lines(10, on_ref)
    assert lines[0] == ("passed 10 (of which 3 with nodes on onnx.reference, 2 of them not _expanded, 2 wholly on "
                        "it; 7 on the cpu backend alone)")
    assert lines[1].startswith("op types on the reference backend in passing cases (2;")
    assert lines[2].split() == ["Cast", "2", "Mod", "2"]
    assert reference_lines(5, {}) == ["passed 5 (of which 0 with nodes on onnx.reference, 0 of them not _expanded, "
                                      "0 wholly on it; 5 on the cpu backend alone)"]
