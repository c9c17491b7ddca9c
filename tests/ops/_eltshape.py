"""Helpers of the elementwise / shape op tests: run one node through onnxep (cpu backend only) and onnx.reference."""
import numpy as np
from onnx import helper

from tests._util import assert_outputs_match, fallback_nodes, make_model, run_onnxep, run_reference


def check_node(node, feeds, opset, initializers=None, rtol=1e-6, atol=1e-7, input_shapes=None, n_out=None):
    """Oracle: onnx.reference.ReferenceEvaluator. Asserts the node ran on the cpu backend and every output matches in
    dtype, shape and values. Returns onnxep's outputs."""
    outs = list(node.output) if n_out is None else list(node.output)[:n_out]
    model = make_model([node], feeds, outs, opset=opset, initializers=initializers, input_shapes=input_shapes)
    got, sess = run_onnxep(model, feeds)
    assert fallback_nodes(sess) == []
    assert_outputs_match(got, run_reference(model, feeds), rtol=rtol, atol=atol)
    return got


def node(op, ins, outs, **attrs):
    return helper.make_node(op, ins, outs, name=f"{op.lower()}_0", **attrs)


def rand(shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)
