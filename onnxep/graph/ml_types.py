"""Output types of ai.onnx.ml nodes that onnx's shape inference leaves untyped.

onnx 1.23 has no type inference for LinearRegressor, Normalizer, Scaler, Imputer, FeatureVectorizer, SVMRegressor,
TreeEnsembleRegressor-1, and types only the label output of TreeEnsembleClassifier / SVMClassifier. Every value after
such a node is then untyped, and the cpu backend's type checks refuse the nodes that read it (a skl2onnx pipeline's
Cast, Identity, Gather, Concat, ZipMap): with the fallback off the session cannot be made. `complete_types(model)`
returns the model with value_info for those outputs (the types the schemas and attributes fix), inferred again until
nothing more is learnt. build_graph (graph/model.py) runs it in place of plain shape inference on a model that imports
ai.onnx.ml."""
from __future__ import annotations

import onnx
from onnx import TensorProto, helper

ML = "ai.onnx.ml"
_FLOAT_OUT = {"LinearRegressor", "Normalizer", "Scaler", "SVMRegressor", "TreeEnsembleRegressor", "FeatureVectorizer"}
_CLASSIFIERS = {"TreeEnsembleClassifier": "classlabels_strings", "SVMClassifier": "classlabels_strings",
                "LinearClassifier": "classlabels_strings"}


def ml_output_type(node, i, known):
    """The TensorProto element type of output i of an ai.onnx.ml node (onnx NodeProto), or None when neither the
    schema nor the attributes fix it. `known`: value name -> onnx TypeProto of what is typed already."""
    if node.domain != ML:
        return None
    op = node.op_type
    if op in _FLOAT_OUT:
        return TensorProto.FLOAT
    if op == "Imputer":
        t = known.get(node.input[0]) if node.input else None
        return t.tensor_type.elem_type if t is not None and t.HasField("tensor_type") else None
    if op in _CLASSIFIERS:
        if i == 1:
            return TensorProto.FLOAT
        strings = any(a.name == _CLASSIFIERS[op] and len(a.strings) for a in node.attribute)
        return TensorProto.STRING if strings else TensorProto.INT64
    return _single_type(node, i)


def _single_type(node, i):
    """The element type of output i when the schema allows one tensor type only (OneHotEncoder's float output, whose
    inference gives up on an input of unknown rank)."""
    try:
        s = onnx.defs.get_schema(node.op_type, 1 << 30, node.domain)
    except Exception:
        return None
    if not s.outputs:
        return None
    formal = s.outputs[min(i, len(s.outputs) - 1)]
    allowed = [c.allowed_type_strs for c in s.type_constraints if c.type_param_str == formal.type_str]
    types = list(allowed[0]) if allowed else [formal.type_str]
    if len(types) != 1 or not types[0].startswith("tensor("):
        return None
    return _ELEM.get(types[0][7:-1])


_ELEM = {"float": TensorProto.FLOAT, "double": TensorProto.DOUBLE, "int64": TensorProto.INT64,
         "string": TensorProto.STRING, "int32": TensorProto.INT32}


def _graph_types(g):
    return {vi.name: vi.type for vi in list(g.value_info) + list(g.input) + list(g.output) if vi.HasField("type")}


def complete_types(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose untyped ai.onnx.ml outputs carry value_info (element type, unknown shape), shape
    inference run again after each round. Models without such nodes come back as onnx's inference gives them."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for _ in range(len(m.graph.node) + 1):
        try:
            inferred = onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=False)
        except Exception:
            return m
        known = _graph_types(inferred.graph)
        init = {t.name for t in inferred.graph.initializer}
        added = []
        for node in inferred.graph.node:
            for i, out in enumerate(node.output):
                if out and out not in known and out not in init:
                    et = ml_output_type(node, i, known)
                    if et is not None:
                        added.append(helper.make_tensor_value_info(out, et, None))
        if not added:
            return inferred
        m = inferred
        m.graph.value_info.extend(added)
    return m
