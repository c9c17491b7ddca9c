"""ai.onnx.ml ops on attributes, modes and types the backend suite and the scikit-learn fixtures do not reach.
Oracle: onnxruntime (its CPU provider) on the same one-node model; onnx.reference where onnxruntime lacks the op or
the type. Every onnxep session runs with the fallback off."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxep
from onnxep.errors import Fail, InvalidArgument

ML = "ai.onnx.ml"
F, D, I64, I32, S = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT32, TensorProto.STRING
_ELEM = {np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.float32): F, np.dtype(np.float64): D, np.dtype(np.int64): I64, np.dtype(np.int32): I32,
         np.dtype(object): S}


def _model(op, inputs, outputs, ml=3, **attrs):
    """One ai.onnx.ml node; inputs: name -> example array (or a ValueInfoProto); outputs: [(name, elem | TypeProto)]."""
    ins = [v if isinstance(v, onnx.ValueInfoProto) else helper.make_tensor_value_info(k, _ELEM[np.asarray(v).dtype],
                                                                                       None)
           for k, v in inputs.items()]
    outs = [helper.make_value_info(n, t) if isinstance(t, onnx.TypeProto) else helper.make_tensor_value_info(n, t, None)
            for n, t in outputs]
    node = helper.make_node(op, [i.name for i in ins], [o.name for o in outs], domain=ML, **attrs)
    g = helper.make_graph([node], "t", ins, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ML, ml)],
                             ir_version=8)


def _session(m):
    so = onnxep.SessionOptions()
    so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    return onnxep.InferenceSession(m.SerializeToString(), so)


def _ort(m, feeds):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)


def _same(got, want, atol=1e-5):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, list):
            assert isinstance(g, list) and len(g) == len(w)
            for a, b in zip(g, w):
                assert list(a) == list(b)
                np.testing.assert_allclose(list(a.values()), list(b.values()), rtol=1e-5, atol=atol)
            continue
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        if w.dtype.kind == "f":
            assert g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=atol)
        else:
            np.testing.assert_array_equal(g, w)


def check(m, feeds, atol=1e-5, oracle="ort"):
    got = _session(m).run(None, feeds)
    if oracle == "ort":
        want = _ort(m, feeds)
    else:
        from onnx.reference import ReferenceEvaluator
        want = ReferenceEvaluator(m).run(None, feeds)
    _same(got, want, atol)
    return got


RNG = np.random.default_rng(0)
X = RNG.normal(size=(7, 4)).astype(np.float32)


# --------------------------------------------------------------------------- linear
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("labels", ["ints", "strings"])
def test_linear_classifier_post_transforms(post, labels):
    coef = RNG.normal(size=12).tolist()
    lab = {"classlabels_ints": [3, 5, 9]} if labels == "ints" else {"classlabels_strings": ["a", "b", "c"]}
    x = X if post != "PROBIT" else (np.abs(X) / 10).astype(np.float32)
    m = _model("LinearClassifier", {"X": x}, [("Y", I64 if labels == "ints" else S), ("Z", F)], ml=1,
               coefficients=coef, intercepts=[0.1, 0.0, -0.2], post_transform=post, **lab)
    check(m, {"X": x}, atol=1e-4)


@pytest.mark.parametrize("labels", [[0, 1], [4, 7]])
def test_linear_classifier_one_score(labels):
    m = _model("LinearClassifier", {"X": X}, [("Y", I64), ("Z", F)], ml=1, coefficients=[0.5, -1, 0.25, 2],
               intercepts=[0.1], classlabels_ints=labels)
    check(m, {"X": X})


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_linear_classifier_input_types(dtype):
    x = (X * 3).astype(dtype)
    m = _model("LinearClassifier", {"X": x}, [("Y", I64), ("Z", F)], ml=1, coefficients=RNG.normal(size=8).tolist(),
               intercepts=[0.0, 1.0], classlabels_ints=[0, 1], post_transform="LOGISTIC")
    check(m, {"X": x})


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("targets", [1, 3])
def test_linear_regressor(post, targets):
    m = _model("LinearRegressor", {"X": X}, [("Y", F)], ml=1, coefficients=RNG.normal(size=4 * targets).tolist(),
               intercepts=RNG.normal(size=targets).tolist(), targets=targets, post_transform=post)
    check(m, {"X": X})


# --------------------------------------------------------------------------- svm
SV = RNG.normal(size=(6, 4)).astype(np.float32)


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
def test_svm_regressor_kernels(kernel):
    m = _model("SVMRegressor", {"X": X}, [("Y", F)], ml=1, kernel_type=kernel, kernel_params=[0.3, 0.5, 3.0],
               n_supports=6, support_vectors=SV.reshape(-1).tolist(), coefficients=RNG.normal(size=6).tolist(),
               rho=[0.2])
    check(m, {"X": X}, atol=1e-4)


def test_svm_regressor_linear_form_and_one_class():
    m = _model("SVMRegressor", {"X": X}, [("Y", F)], ml=1, coefficients=[1.0, -2.0, 0.5, 0.0], rho=[0.1],
               n_supports=0, kernel_params=[0.0, 0.0, 0.0])
    check(m, {"X": X})
    m = _model("SVMRegressor", {"X": X}, [("Y", F)], ml=1, kernel_type="RBF", kernel_params=[0.3, 0, 0],
               n_supports=6, support_vectors=SV.reshape(-1).tolist(), coefficients=RNG.normal(size=6).tolist(),
               rho=[0.2], one_class=1)
    check(m, {"X": X})


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC"])
def test_svm_classifier_votes_without_probabilities(classes, post):
    vpc = [2, 2, 2][:classes]
    n = sum(vpc)
    m = _model("SVMClassifier", {"X": X}, [("Y", I64), ("Z", F)], ml=1, kernel_type="RBF",
               kernel_params=[0.4, 0, 0], vectors_per_class=vpc, support_vectors=SV[:n].reshape(-1).tolist(),
               coefficients=RNG.normal(size=(classes - 1) * n).tolist(),
               rho=RNG.normal(size=classes * (classes - 1) // 2).tolist(), classlabels_ints=list(range(classes)),
               post_transform=post)
    if classes == 2 and post != "NONE":     # onnxep declines (onnxruntime's layout departs from its source)
        with pytest.raises(onnxep.errors.NotImplemented):
            _session(m)
        return
    check(m, {"X": X}, atol=1e-4)


@pytest.mark.parametrize("coef_sign", ["mixed", "positive"])
def test_svm_classifier_linear_form(coef_sign):
    coef = RNG.normal(size=8)
    coef = np.abs(coef) / 4 if coef_sign == "positive" else coef
    m = _model("SVMClassifier", {"X": X}, [("Y", S), ("Z", F)], ml=1, coefficients=coef.tolist(), rho=[0.1],
               classlabels_strings=["no", "yes"], kernel_params=[0.0, 0.0, 0.0])
    check(m, {"X": X})


# --------------------------------------------------------------------------- trees
def _tree_attrs(modes=("BRANCH_LEQ", "BRANCH_LT"), missing=(0, 0)):
    """Two trees: tree 0 splits twice (3 leaves), tree 1 once (2 leaves)."""
    return dict(nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
                nodes_featureids=[0, 1, 0, 0, 0, 2, 0, 0], nodes_values=[0.1, -0.3, 0, 0, 0, 0.5, 0, 0],
                nodes_modes=[modes[0], modes[1], "LEAF", "LEAF", "LEAF", modes[0], "LEAF", "LEAF"],
                nodes_truenodeids=[1, 2, 0, 0, 0, 1, 0, 0], nodes_falsenodeids=[4, 3, 0, 0, 0, 2, 0, 0],
                nodes_missing_value_tracks_true=[missing[0], missing[1], 0, 0, 0, missing[0], 0, 0])


LEAVES = [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2)]


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("targets", [1, 2])
def test_tree_ensemble_regressor_aggregates(agg, targets):
    tids, nids, ids, ws = [], [], [], []
    for t, nd in LEAVES:
        for k in range(targets):
            tids.append(t), nids.append(nd), ids.append(k), ws.append(float(RNG.normal()))
    m = _model("TreeEnsembleRegressor", {"X": X}, [("Y", F)], ml=1, n_targets=targets, aggregate_function=agg,
               target_treeids=tids, target_nodeids=nids, target_ids=ids, target_weights=ws,
               base_values=[0.5] * targets, **_tree_attrs())
    check(m, {"X": X})


@pytest.mark.parametrize("modes", [("BRANCH_GTE", "BRANCH_GT"), ("BRANCH_EQ", "BRANCH_NEQ"), ("BRANCH_LT", "BRANCH_LEQ")])
@pytest.mark.parametrize("missing", [(0, 0), (1, 1)])
def test_tree_ensemble_regressor_modes_and_missing(modes, missing):
    x = np.round(X, 1)
    x[0, 0] = x[1, 1] = x[2, 2] = np.nan
    x[3, 0] = 0.1
    m = _model("TreeEnsembleRegressor", {"X": x}, [("Y", F)], ml=1, n_targets=1,
               target_treeids=[t for t, _ in LEAVES], target_nodeids=[n for _, n in LEAVES], target_ids=[0] * 5,
               target_weights=[1.0, 2.0, 4.0, 8.0, 16.0], **_tree_attrs(modes, missing))
    check(m, {"X": x})


def test_tree_ensemble_regressor_double_as_tensor():
    x = X.astype(np.float64)
    a = _tree_attrs()
    vals = np.asarray(a.pop("nodes_values"), np.float64)
    m = _model("TreeEnsembleRegressor", {"X": x}, [("Y", F)], ml=3, n_targets=1,
               nodes_values_as_tensor=onnx.numpy_helper.from_array(vals),
               target_treeids=[t for t, _ in LEAVES], target_nodeids=[n for _, n in LEAVES], target_ids=[0] * 5,
               target_weights_as_tensor=onnx.numpy_helper.from_array(np.arange(5, dtype=np.float64) + 0.25),
               base_values_as_tensor=onnx.numpy_helper.from_array(np.array([1.5])), **a)
    check(m, {"X": x})


@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
@pytest.mark.parametrize("classes", [2, 3])
def test_tree_ensemble_classifier_multi_weights(post, classes):
    tids, nids, ids, ws = [], [], [], []
    for t, nd in LEAVES:
        for k in range(classes):
            tids.append(t), nids.append(nd), ids.append(k), ws.append(float(abs(RNG.normal())))
    m = _model("TreeEnsembleClassifier", {"X": X}, [("Y", I64), ("Z", F)], ml=1,
               classlabels_int64s=list(range(classes)), class_treeids=tids, class_nodeids=nids, class_ids=ids,
               class_weights=ws, post_transform=post, **_tree_attrs())
    check(m, {"X": X})


@pytest.mark.parametrize("sign", ["positive", "mixed"])
@pytest.mark.parametrize("base", [[], [0.2], [0.1, 0.3]])
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_tree_ensemble_classifier_binary_one_class(sign, base, post):
    ws = [0.2, 0.7, 0.9, 0.1, 0.6] if sign == "positive" else [-0.4, 0.7, -0.9, 0.1, 0.6]
    extra = {"base_values": base} if base else {}
    cls = 1
    m = _model("TreeEnsembleClassifier", {"X": X}, [("Y", S), ("Z", F)], ml=1, classlabels_strings=["n", "p"],
               class_treeids=[t for t, _ in LEAVES], class_nodeids=[n for _, n in LEAVES], class_ids=[cls] * 5,
               class_weights=ws, post_transform=post, **extra, **_tree_attrs())
    if base:     # weights for one class plus base_values: onnxruntime departs from its source; onnxep declines
        with pytest.raises(onnxep.errors.NotImplemented):
            _session(m)
        return
    check(m, {"X": X})


def _te5(x, agg=1, post=0, n_targets=2, member=False):
    """TreeEnsemble-5: tree 0 = node 0 (x0 <= 0.1 or x0 in {0.5, 1.5}) -> node 1 (x1 < -0.3) -> leaves 0/1, else leaf
    2; tree 1 = node 2 (x2 > 0.5) -> leaf 3 / leaf 4."""
    dt = x.dtype
    mode0 = 6 if member else 0
    return _model("TreeEnsemble", {"X": x}, [("Y", _ELEM[dt])], ml=5,
                  nodes_featureids=[0, 1, 2], nodes_splits=onnx.numpy_helper.from_array(np.array([0.1, -0.3, 0.5], dt)),
                  nodes_modes=onnx.numpy_helper.from_array(np.array([mode0, 1, 3], np.uint8)),
                  nodes_truenodeids=[1, 0, 3], nodes_trueleafs=[0, 1, 1], nodes_falsenodeids=[2, 1, 4],
                  nodes_falseleafs=[1, 1, 1], nodes_missing_value_tracks_true=[1, 0, 0], tree_roots=[0, 2],
                  leaf_targetids=[0, 1, 0, 1, 0],
                  leaf_weights=onnx.numpy_helper.from_array(np.array([1.0, 2.0, -3.0, 0.5, 0.25], dt)),
                  n_targets=n_targets, aggregate_function=agg, post_transform=post,
                  **({"membership_values": onnx.numpy_helper.from_array(np.array([0.5, 1.5, 0.1], dt))}
                     if member else {}))


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("post", [0, 1, 2, 3])
def test_tree_ensemble_5_aggregates_and_transforms(agg, post):
    """The spec's codes are 1 SOFTMAX, 2 LOGISTIC; onnxruntime 1.32 reads 1 as LOGISTIC and 2 as SOFTMAX (the
    legacy enum) and onnx.reference ignores post_transform: onnxep follows the spec, compared with onnxruntime run
    on the swapped code (the same formula)."""
    x = np.round(X, 1).astype(np.float32)
    x[0, 0] = np.nan
    got = _session(_te5(x, agg, post)).run(None, {"X": x})
    _same(got, _ort(_te5(x, agg, {1: 2, 2: 1}.get(post, post)), {"X": x}))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tree_ensemble_5_set_membership(dtype):
    x = np.round(X, 1).astype(dtype)
    x[0, 0], x[1, 0], x[2, 0] = 0.5, 1.5, np.nan
    check(_te5(x, member=True), {"X": x})


def test_tree_ensemble_5_float16_against_reference():
    x = np.round(X, 1).astype(np.float16)
    m = _te5(x)
    got = _session(m).run(None, {"X": x})[0]
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(m).run(None, {"X": x})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), atol=1e-3)


# --------------------------------------------------------------------------- encoders / mappers
def test_label_encoder_1_both_ways():
    x = np.array(["b", "z", "a", "b"], object)
    m = _model("LabelEncoder", {"X": x}, [("Y", I64)], ml=1, classes_strings=["a", "b", "c"], default_int64=-7)
    check(m, {"X": x})
    xi = np.array([0, 2, 5, -1], np.int64)
    m = _model("LabelEncoder", {"X": xi}, [("Y", S)], ml=1, classes_strings=["a", "b", "c"], default_string="?")
    check(m, {"X": xi})


@pytest.mark.parametrize("kind", ["s2f", "f2s", "i2i", "f2f"])
def test_label_encoder_2(kind):
    if kind == "s2f":
        x, attrs, out = np.array([["x", "y"], ["w", "x"]], object), dict(keys_strings=["x", "y", "x"],
                                                                      values_floats=[1.5, 2.5, 9.0]), F
    elif kind == "f2s":
        x, attrs, out = np.array([0.5, 1.0, 7.0], np.float32), dict(keys_floats=[0.5, 1.0],
                                                                   values_strings=["h", "o"]), S
    elif kind == "i2i":
        x, attrs, out = np.array([3, 4, 5], np.int64), dict(keys_int64s=[3, 5], values_int64s=[30, 50],
                                                           default_int64=0), I64
    else:
        x, attrs, out = np.array([0.0, -0.0, 2.0], np.float32), dict(keys_floats=[0.0], values_floats=[1.0]), F
    check(_model("LabelEncoder", {"X": x}, [("Y", out)], ml=2, **attrs), {"X": x})


def test_label_encoder_4_tensors_and_nan():
    x = np.array([1.0, np.nan, 3.0], np.float64)
    m = _model("LabelEncoder", {"X": x}, [("Y", I64)], ml=4,
               keys_tensor=onnx.numpy_helper.from_array(np.array([1.0, np.nan])),
               values_tensor=onnx.numpy_helper.from_array(np.array([10, 20], np.int64)),
               default_tensor=onnx.numpy_helper.from_array(np.array([-5], np.int64)))
    check(m, {"X": x})
    # int16 -> double: a pair onnxruntime does not register
    xs = np.array([1, 2, 3], np.int16)
    m = _model("LabelEncoder", {"X": helper.make_tensor_value_info("X", TensorProto.INT16, None)}, [("Y", D)], ml=4,
               keys_tensor=onnx.numpy_helper.from_array(np.array([3, 1], np.int16)),
               values_tensor=onnx.numpy_helper.from_array(np.array([0.5, 1.5])))
    np.testing.assert_array_equal(_session(m).run(None, {"X": xs})[0], [1.5, -0.0, 0.5])


def test_category_mapper():
    x = np.array([["a", "q"], ["c", "b"]], object)
    attrs = dict(cats_strings=["a", "b", "c"], cats_int64s=[1, 2, 3], default_int64=42, default_string="none")
    check(_model("CategoryMapper", {"X": x}, [("Y", I64)], ml=1, **attrs), {"X": x})
    xi = np.array([3, 9, 1], np.int64)
    check(_model("CategoryMapper", {"X": xi}, [("Y", S)], ml=1, **attrs), {"X": xi})


@pytest.mark.parametrize("dtype", [np.int64, np.float32, np.float64, object])
def test_one_hot_encoder(dtype):
    if dtype is object:
        x, attrs = np.array([["a", "b"], ["c", "zz"]], object), dict(cats_strings=["a", "b", "c"])
    else:
        x, attrs = np.array([[1, 4], [2.7, 9]]).astype(dtype), dict(cats_int64s=[1, 2, 4])
    check(_model("OneHotEncoder", {"X": x}, [("Y", F)], ml=1, zeros=1, **attrs), {"X": x})


def test_one_hot_encoder_unknown_without_zeros_is_an_error():
    x = np.array([1, 7], np.int64)
    s = _session(_model("OneHotEncoder", {"X": x}, [("Y", F)], ml=1, cats_int64s=[1, 2], zeros=0))
    with pytest.raises(InvalidArgument, match="unknown category"):
        s.run(None, {"X": x})
    np.testing.assert_array_equal(s.run(None, {"X": np.array([2, 1], np.int64)})[0], [[0, 1], [1, 0]])


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
@pytest.mark.parametrize("per_feature", [False, True])
def test_imputer(dtype, per_feature):
    if dtype == np.float32:
        x = X.copy()
        x[0, 1] = x[3, 2] = np.nan
        x[2, 0] = 5.0
        attrs = dict(imputed_value_floats=[1.0, 2.0, 3.0, 4.0] if per_feature else [-1.0],
                     replaced_value_float=float("nan"))
    else:
        x = np.array([[0, 5, 1, 0], [2, 0, 0, 9]], np.int64)
        attrs = dict(imputed_value_int64s=[7, 8, 9, 10] if per_feature else [7], replaced_value_int64=0)
    check(_model("Imputer", {"X": x}, [("Y", _ELEM[np.dtype(dtype)])], ml=1, **attrs), {"X": x})


def test_feature_vectorizer_cuts_and_pads():
    a = X[:, :3]
    b = np.arange(14, dtype=np.float32).reshape(7, 2)
    c = np.arange(7, dtype=np.float32).reshape(7, 1)
    m = _model("FeatureVectorizer", {"A": a, "B": b, "C": c}, [("Y", F)], ml=1, inputdimensions=[2, 3, 1])
    check(m, {"A": a, "B": b, "C": c})


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_normalizer(norm, dtype):
    x = (X * 4).astype(dtype)
    x[1] = 0
    check(_model("Normalizer", {"X": x}, [("Y", F)], ml=1, norm=norm), {"X": x})


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_scaler_and_binarizer_types(dtype):
    x = (X * 3).astype(dtype)
    m = _model("Scaler", {"X": x}, [("Y", F)], ml=1, offset=[0.5, 1, -1, 0], scale=[2.0, 1.0, 0.5, 3.0])
    if dtype == np.float64:      # onnxruntime registers no double Scaler
        got = _session(m).run(None, {"X": x})[0]
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, (x - [0.5, 1, -1, 0]) * [2.0, 1.0, 0.5, 3.0], rtol=1e-6)
    else:
        check(m, {"X": x})
    check(_model("Binarizer", {"X": x}, [("Y", _ELEM[np.dtype(dtype)])], ml=1, threshold=0.5), {"X": x},
          oracle="reference")


def test_binarizer_nan_is_an_error_and_session_survives():
    x = X.copy()
    s = _session(_model("Binarizer", {"X": x}, [("Y", F)], ml=1, threshold=0.0))
    x[2, 1] = np.nan
    with pytest.raises(InvalidArgument, match="NaN"):
        s.run(None, {"X": x})
    np.testing.assert_array_equal(s.run(None, {"X": X})[0], (X > 0).astype(np.float32))


def test_array_feature_extractor_out_of_range_and_strings():
    x = np.array([["a", "b", "c"], ["d", "e", "f"]], object)
    idx = np.array([2, 0], np.int64)
    check(_model("ArrayFeatureExtractor", {"X": x, "Y": idx}, [("Z", S)], ml=1), {"X": x, "Y": idx})
    x1 = np.arange(5, dtype=np.int32)
    check(_model("ArrayFeatureExtractor", {"X": x1, "Y": idx}, [("Z", I32)], ml=1), {"X": x1, "Y": idx})
    s = _session(_model("ArrayFeatureExtractor", {"X": X, "Y": idx}, [("Z", F)], ml=1))
    with pytest.raises(InvalidArgument, match="indices must be in"):
        s.run(None, {"X": X, "Y": np.array([4], np.int64)})
    np.testing.assert_array_equal(s.run(None, {"X": X, "Y": idx})[0], X[:, [2, 0]])


# --------------------------------------------------------------------------- maps and sequences of maps
def _map_input(name, key, val):
    return helper.make_value_info(name, helper.make_map_type_proto(key, helper.make_tensor_type_proto(val, None)))


@pytest.mark.parametrize("form", ["DENSE", "SPARSE"])
@pytest.mark.parametrize("cast_to", ["TO_FLOAT", "TO_INT64", "TO_STRING"])
def test_cast_map(form, cast_to):
    feeds = {"X": {3: 1.5, 0: -2.0, 5: 7.0}}
    out = {"TO_FLOAT": F, "TO_INT64": I64, "TO_STRING": S}[cast_to]
    m = _model("CastMap", {"X": _map_input("X", I64, F)}, [("Y", out)], ml=1, cast_to=cast_to, map_form=form,
               max_map=5)
    check(m, feeds)


def test_cast_map_sparse_size_is_checked():
    m = _model("CastMap", {"X": _map_input("X", I64, F)}, [("Y", F)], ml=1, map_form="SPARSE", max_map=1 << 45)
    with pytest.raises(Fail, match="limit"):
        _session(m).run(None, {"X": {1: 1.0}})


@pytest.mark.parametrize("key, val, vocab", [(S, F, {"string_vocabulary": ["b", "a", "z"]}),
                                             (I64, D, {"int64_vocabulary": [4, 1, 9]}),
                                             (S, I64, {"string_vocabulary": ["a", "q"]})])
def test_dict_vectorizer(key, val, vocab):
    d = {"a": 1, "b": 2, "c": 3} if key == S else {1: 0.5, 4: 2.5, 7: 1.0}
    if val != I64:
        d = {k: float(v) for k, v in d.items()}
    m = _model("DictVectorizer", {"X": _map_input("X", key, val)}, [("Y", val)], ml=1, **vocab)
    if val == F:
        check(m, {"X": d})
        return
    # onnxruntime's Python binding feeds every dict as map(.., float): checked against the vocabulary by hand
    got = _session(m).run(None, {"X": d})[0]
    voc = vocab.get("string_vocabulary") or vocab.get("int64_vocabulary")
    want = np.array([[d.get(k, 0) for k in voc]], {D: np.float64, I64: np.int64}[val])
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_zip_map_int64_keys_and_bad_width():
    seq = helper.make_sequence_type_proto(helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, None)))
    m = _model("ZipMap", {"X": X[:, :3]}, [("Z", seq)], ml=1, classlabels_int64s=[10, 20, 30])
    got = check(m, {"X": X[:, :3]})
    assert isinstance(got[0], list) and list(got[0][0]) == [10, 20, 30]
    s = _session(m)
    with pytest.raises(InvalidArgument, match="class labels"):
        s.run(None, {"X": X})
    assert len(s.run(None, {"X": X[:2, :3]})[0]) == 2


def test_feature_vectorizer_size_is_checked():
    m = _model("FeatureVectorizer", {"A": X}, [("Y", F)], ml=1, inputdimensions=[1 << 40])
    with pytest.raises(Fail, match="limit"):
        _session(m).run(None, {"A": X})
