"""TfIdfVectorizer (opset 9) on the cpu backend: int32 / int64 / string tokens, (C,) and (N, C) input, TF / IDF /
TFIDF with and without weights, gram lengths 1-3, skip counts 0-2. Oracles: onnx.reference and onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from tests._util import assert_outputs_match, cpu_only_options, fallback_nodes, run_onnxep, run_ort, run_reference

POOL = [2, 3, 5, 4, 5, 6, 7, 8, 6, 7, 2, 3, 5, 6, 7, 2, 3, 5]     # 4 unigrams, 4 bigrams, 2 trigrams
COUNTS = [0, 4, 12]
INDEXES = list(range(10))


def _model(x, mode, lo, hi, skip, weights, strings):
    attrs = dict(mode=mode, min_gram_length=lo, max_gram_length=hi, max_skip_count=skip, ngram_counts=COUNTS,
                 ngram_indexes=INDEXES)
    if strings:
        attrs["pool_strings"] = [f"t{v}" for v in POOL]
    else:
        attrs["pool_int64s"] = POOL
    if weights:
        attrs["weights"] = [0.5 + i / 4 for i in range(10)]
    tp = {np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64}.get(x.dtype,
                                                                                           TensorProto.STRING)
    g = helper.make_graph([helper.make_node("TfIdfVectorizer", ["x"], ["y"], name="tfidf_0", **attrs)], "t",
                          [helper.make_tensor_value_info("x", tp, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)], ir_version=8)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, object])
@pytest.mark.parametrize("mode,weights", [("TF", False), ("IDF", False), ("IDF", True), ("TFIDF", True),
                                          ("TFIDF", False)])
@pytest.mark.parametrize("lo,hi,skip", [(1, 1, 0), (1, 2, 0), (2, 2, 2), (1, 3, 1), (3, 3, 0)])
@pytest.mark.parametrize("shape", [(12,), (3, 8)])
def test_tfidf_vectorizer(shape, lo, hi, skip, mode, weights, dtype):
    x = np.random.default_rng(1).integers(2, 9, shape)
    x = np.array([f"t{v}" for v in x.ravel()], dtype=object).reshape(shape) if dtype is object else x.astype(dtype)
    m = _model(x, mode, lo, hi, skip, weights, dtype is object)
    got, sess = run_onnxep(m, {"x": x}, sess_options=cpu_only_options())
    assert fallback_nodes(sess) == []
    if weights or mode == "TF":   # onnx.reference fails on IDF / TFIDF without weights
        assert_outputs_match(got, run_reference(m, {"x": x}), rtol=0, atol=0)
    assert_outputs_match(got, run_ort(m, {"x": x}), rtol=0, atol=0)


def test_tfidf_vectorizer_bad_rank():
    """Oracle: none -- a rank-3 input raises InvalidArgument naming the node."""
    import onnxep
    from onnxep.errors import InvalidArgument
    x = np.zeros((2, 2, 2), np.int64)
    m = _model(np.zeros((2, 2), np.int64), "TF", 1, 2, 0, False, False)
    m.graph.input[0].type.tensor_type.ClearField("shape")     # rank unknown
    sess = onnxep.InferenceSession(m.SerializeToString(), cpu_only_options())
    with pytest.raises(InvalidArgument, match=r"tfidf_0.*\(C,\) or \(N, C\)"):
        sess.run(None, {"x": x})
