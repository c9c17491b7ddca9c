"""Fit small scikit-learn models and pipelines on seeded synthetic data, convert them with skl2onnx, and write the
test fixtures tests/models/sklearn/<name>.onnx + <name>.npz (the inputs and scikit-learn's own outputs).

    pip install -e .[sklearn]          # scikit-learn and skl2onnx: exporters, never test dependencies
    python bench/zoo/sklearn_models.py [--out tests/models/sklearn]

The .npz holds: X (the input), and what scikit-learn computes: label (predict) and proba (predict_proba) for a
classifier, value (predict) for a regressor, value (transform) for a transformer pipeline. Trees are shallow and
forests few, so the fixtures stay small (the whole folder well under 2 MB). tests/models/test_sklearn_models.py runs
them on onnxep with the fallback off and compares with these outputs and with onnxruntime.
"""
from __future__ import annotations

import argparse
import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "models", "sklearn")
OPSET = {"": 17, "ai.onnx.ml": 3}


def _data(seed, n=60, f=4, classes=None, nan=False):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, f)).astype(np.float32)
    w = rng.normal(size=f)
    score = x.astype(np.float64) @ w
    if classes is None:
        y = score + 0.1 * rng.normal(size=n)
    else:
        qs = np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1])
        y = np.searchsorted(qs, score)
    if nan:
        x[rng.random(x.shape) < 0.1] = np.nan
    return x, y


def _models():
    """(name, estimator, X, y, kind, converter options) for every fixture."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor, RandomForestClassifier,
                                  RandomForestRegressor)
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression, LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import Binarizer, MinMaxScaler, Normalizer, OneHotEncoder, StandardScaler
    from sklearn.svm import SVC, SVR
    from sklearn.tree import DecisionTreeClassifier

    out = []
    x, y = _data(1, classes=2)
    out.append(("logreg_binary_zipmap", LogisticRegression(), x, y, "clf", {}))
    x, y = _data(2, classes=3)
    out.append(("logreg_multiclass", LogisticRegression(max_iter=500), x, y, "clf", {"zipmap": False}))
    x, y = _data(3)
    out.append(("linear_regression", LinearRegression(), x, y, "reg", {}))
    x, y = _data(4, classes=3)
    out.append(("random_forest_classifier", RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0),
                x, y, "clf", {"zipmap": False}))
    x, y = _data(5, classes=2)
    out.append(("random_forest_binary_zipmap", RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0),
                x, y, "clf", {}))
    x, y = _data(6)
    out.append(("random_forest_regressor", RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0),
                x, y, "reg", {}))
    x, y = _data(7, classes=2)
    out.append(("gradient_boosting_binary", GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0),
                x, y, "clf", {"zipmap": False}))
    x, y = _data(8, classes=3)
    out.append(("gradient_boosting_multiclass", GradientBoostingClassifier(n_estimators=8, max_depth=2,
                                                                           random_state=0), x, y, "clf", {}))
    x, y = _data(9)
    out.append(("gradient_boosting_regressor", GradientBoostingRegressor(n_estimators=10, max_depth=3,
                                                                         random_state=0), x, y, "reg", {}))
    x, y = _data(10, classes=3)
    out.append(("svc_rbf_proba", SVC(probability=True, random_state=0), x, y, "clf", {"zipmap": False}))
    x, y = _data(11, classes=2)
    out.append(("svc_binary_proba_zipmap", SVC(kernel="poly", degree=2, probability=True, random_state=0), x, y,
                "clf", {}))
    x, y = _data(12)
    out.append(("svr", SVR(C=2.0), x, y, "reg", {}))
    x, y = _data(13, classes=3)
    labels = np.array(["cat", "dog", "emu"])[y]
    out.append(("decision_tree_strings_zipmap", DecisionTreeClassifier(max_depth=4, random_state=0), x, labels,
                "clf", {}))
    # mixed columns: 3 numeric (with NaN), 2 categorical (small integer codes, also with NaN)
    rng = np.random.default_rng(14)
    xn, y = _data(14, n=80, f=3, classes=2, nan=True)
    cats = rng.integers(0, 4, size=(80, 2)).astype(np.float32)
    cats[rng.random(cats.shape) < 0.05] = np.nan
    xm = np.concatenate([xn, cats], axis=1)
    def columns():
        num = Pipeline([("impute", SimpleImputer(strategy="mean")), ("scale", StandardScaler())])
        cat = Pipeline([("impute", SimpleImputer(strategy="most_frequent")),
                        ("onehot", OneHotEncoder(handle_unknown="ignore"))])
        return ColumnTransformer([("num", num, [0, 1, 2]), ("cat", cat, [3, 4])])

    out.append(("pipeline_columns_impute_logreg",
                Pipeline([("columns", columns()), ("clf", LogisticRegression(max_iter=500))]), xm, y, "clf",
                {"zipmap": False}))
    out.append(("pipeline_columns_impute_forest",
                Pipeline([("columns", columns()),
                          ("clf", RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0))]),
                xm, y, "clf", {}))
    x, _ = _data(15)
    x = np.abs(x) + 0.1
    pipe3 = Pipeline([("minmax", MinMaxScaler()), ("norm", Normalizer(norm="l2")), ("bin", Binarizer(threshold=0.4))])
    out.append(("pipeline_minmax_normalizer_binarizer", pipe3, x, None, "transform", {}))
    pipe4 = Pipeline([("norm", Normalizer(norm="l1")), ("minmax", MinMaxScaler())])
    out.append(("pipeline_normalizer_l1_minmax", pipe4, x, None, "transform", {}))
    return out


def build(out_dir=OUT):
    import warnings

    from skl2onnx import to_onnx

    warnings.simplefilter("ignore", FutureWarning)     # SVC(probability=True) is deprecated in scikit-learn 1.9
    os.makedirs(out_dir, exist_ok=True)
    index = {}
    for name, est, x, y, kind, options in _models():
        est.fit(x, y) if y is not None else est.fit(x)
        opts = {id(est): options} if options else None
        onx = to_onnx(est, x[:1], target_opset=OPSET, options=opts)
        with open(os.path.join(out_dir, f"{name}.onnx"), "wb") as f:
            f.write(onx.SerializeToString())
        arrays = {"X": x}
        if kind == "clf":
            arrays["label"] = np.asarray(est.predict(x))
            arrays["proba"] = est.predict_proba(x).astype(np.float64)
            arrays["classes"] = np.asarray(est.classes_)
        elif kind == "reg":
            arrays["value"] = np.asarray(est.predict(x), np.float64)
        else:
            arrays["value"] = np.asarray(est.transform(x), np.float64)
        np.savez_compressed(os.path.join(out_dir, f"{name}.npz"), **arrays)
        index[name] = {"kind": kind, "zipmap": kind == "clf" and options.get("zipmap", True),
                       "estimator": type(est).__name__, "ops": sorted({n.op_type for n in onx.graph.node})}
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    return index


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=OUT, help="folder for the .onnx / .npz fixtures (default: %(default)s)")
    a = p.parse_args(argv)
    index = build(a.out)
    for name, info in index.items():
        print(f"{name:40s} {info['estimator']:28s} {' '.join(info['ops'])}")


if __name__ == "__main__":
    main()
