"""Shared helpers for the pooling op tests (imported by test_max_pool.py / test_average_pool.py)."""
from __future__ import annotations

from onnx import helper

from tests._util import assert_outputs_match, fallback_nodes, make_model, run_onnxep, run_ort, run_reference


def run_pool(op_type, x, opset, n_out=1, **attrs):
    """Run one pooling node through onnxep; also return the model for the oracles."""
    outs = ["y", "i"][:n_out]
    m = make_model([helper.make_node(op_type, ["x"], outs, **attrs)], {"x": x}, outs, opset=opset)
    got, sess = run_onnxep(m, {"x": x})
    assert fallback_nodes(sess) == [], "node fell back to the reference backend"
    return m, got


def assert_same(got, want, rtol=1e-5, atol=1e-6):
    assert_outputs_match(got, want, rtol=rtol, atol=atol)


def oracles(m, x):
    """(onnxruntime outputs, a thunk running onnx.reference): the reference is evaluated only when asked, as it
    raises on some valid cases."""
    return run_ort(m, {"x": x}), (lambda: run_reference(m, {"x": x}))


SHAPES = {1: (2, 3, 11), 2: (2, 3, 7, 9), 3: (1, 2, 5, 6, 7)}
