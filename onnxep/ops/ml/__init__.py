"""ai.onnx.ml ops (onnx/defs/traditionalml): what skl2onnx writes."""

#: this family's op modules (one op per module), read by ops/_registry.py
OPS = (
    "array_feature_extractor", "binarizer", "cast_map", "category_mapper", "dict_vectorizer", "feature_vectorizer",
    "imputer", "label_encoder", "linear_classifier", "linear_regressor", "normalizer", "one_hot_encoder",
    "svm_classifier", "svm_regressor", "scaler", "tree_ensemble_classifier", "tree_ensemble_regressor",
    "tree_ensemble", "zip_map",
)
