"""The nine light model-zoo models shipped inside the onnx wheel, with real-looking weights.

The shipped files make every weight with ConstantOfShape(0.02). Their logits are then one repeated number (a layout
or channel-order bug cannot change them) and equal weights merge in the weight cache. `random_weights` returns a copy
of such a model in which every weight is seeded random data of the same shape and name, as trained weights look:

- each ConstantOfShape that makes a weight becomes an initializer named after its output (the node and its shape
  initializer go); float initializers feeding the same slots are replaced too; every other node is kept as it is;
- conv and fully connected weights are He-scaled normal (std sqrt(2 / fan_in)), biases N(0, 0.01^2);
- BatchNormalization: scale 1 + N(0, 0.1^2), bias and mean N(0, 0.1^2), variance uniform [0.5, 1.5];
- a weight reaching a Mul (Add) through Unsqueeze / Reshape (DenseNet's and Inception-v2's affine after BN) is a
  scale around 1 (a shift around 0) per channel.

`light_model(name_or_path)` loads one; `weights="shipped"` keeps the file's own constants (the backend suite's `real`
cases, where the shipped file itself is the point)."""
from __future__ import annotations

import glob
import os

import numpy as np
import onnx
from onnx import helper, numpy_helper

SEED = 0


def light_models() -> list:
    """Paths of the light models inside the installed onnx wheel, sorted."""
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return sorted(glob.glob(os.path.join(d, "*.onnx")))


def light_names() -> list:
    """The light models' short names ("resnet50", ...), sorted."""
    return [os.path.basename(p)[len("light_"):-len(".onnx")] for p in light_models()]


def light_path(name: str) -> str:
    """The path of a light model by short name ("resnet50"), file name ("light_resnet50.onnx") or path."""
    if os.path.exists(name):
        return name
    for p in light_models():
        if os.path.basename(p) in (name, f"light_{name}.onnx", f"{name}.onnx"):
            return p
    raise FileNotFoundError(f"no light model named {name!r} in {os.path.dirname(light_models()[0])}")


def light_model(name: str, weights: str = "random", seed: int = SEED) -> onnx.ModelProto:
    """A light model (see light_path), with seeded random weights (default) or the shipped ones."""
    model = onnx.load(light_path(name))
    if weights == "shipped":
        return model
    if weights != "random":
        raise ValueError(f"weights must be 'random' or 'shipped', got {weights!r}")
    return random_weights(model, seed)


def _role(name: str, consumers: dict) -> tuple | None:
    """(op_type, input index, node) of the first compute node that reads `name`, looking through Unsqueeze /
    Squeeze / Reshape / Identity / Flatten; None if nothing reads it."""
    seen = set()
    while name not in seen:
        seen.add(name)
        readers = consumers.get(name, ())
        if not readers:
            return None
        node, idx = readers[0]
        if node.op_type in ("Unsqueeze", "Reshape", "Identity", "Flatten", "Squeeze") and idx == 0:
            name = node.output[0]
            continue
        return node.op_type, idx, node
    return None


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def _sample(rng, shape, role) -> np.ndarray:
    shape = tuple(int(d) for d in shape)
    op, idx, node = role if role is not None else (None, None, None)
    if op in ("Conv", "ConvTranspose") and idx == 1 and len(shape) >= 2:
        fan_in = int(np.prod(shape[1:], dtype=np.int64))
        return rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / max(fan_in, 1)))
    if op in ("Gemm", "MatMul") and idx == 1 and len(shape) == 2:
        fan_in = shape[1] if (op == "Gemm" and _attr(node, "transB", 0)) else shape[0]
        return rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2.0 / max(fan_in, 1)))
    if op == "BatchNormalization" and idx in (1, 2, 3, 4):
        if idx == 4:
            return rng.uniform(0.5, 1.5, shape).astype(np.float32)
        v = rng.standard_normal(shape, np.float32) * np.float32(0.1)
        return v + np.float32(1.0) if idx == 1 else v
    if op == "Mul":
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if op == "Add":
        return rng.standard_normal(shape, np.float32) * np.float32(0.1)
    # biases, and anything else (never seen in the nine): small values, so the graph still sees distinct numbers
    return rng.standard_normal(shape, np.float32) * np.float32(0.01)


def random_weights(model: onnx.ModelProto, seed: int = SEED) -> onnx.ModelProto:
    """A copy of `model` whose ConstantOfShape weights and float weight initializers are seeded random data of the
    same shapes and names (see the module docstring). The same (model, seed) always gives the same bytes."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    consumers: dict = {}
    for node in g.node:
        for i, x in enumerate(node.input):
            consumers.setdefault(x, []).append((node, i))
    inits = {t.name: t for t in g.initializer}
    graph_inputs = {i.name for i in g.input}
    rng = np.random.default_rng(seed)
    new_inits, drop_nodes, drop_inits = [], set(), set()
    for k, node in enumerate(g.node):
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            continue
        value = _attr(node, "value", None)
        if value is not None and value.data_type != onnx.TensorProto.FLOAT:
            continue
        shape = numpy_helper.to_array(inits[node.input[0]]).astype(np.int64)
        if (shape < 0).any() or int(np.prod(shape)) > (1 << 31):
            raise ValueError(f"ConstantOfShape {node.name or node.output[0]!r}: shape {shape.tolist()} is not a "
                             f"weight shape")
        out = node.output[0]
        new_inits.append(numpy_helper.from_array(_sample(rng, shape, _role(out, consumers)), out))
        drop_nodes.add(k)
        if len(consumers.get(node.input[0], ())) == 1 and node.input[0] not in graph_inputs:
            drop_inits.add(node.input[0])
    # float initializers in weight slots (some files keep a few biases / BN statistics as initializers)
    replaced = {}
    for name, t in inits.items():
        if t.data_type != onnx.TensorProto.FLOAT or name in drop_inits:
            continue
        role = _role(name, consumers)
        if role is None or role[0] not in ("Conv", "Gemm", "MatMul", "BatchNormalization", "Mul", "Add"):
            continue
        if role[1] == 0 and role[0] not in ("Mul", "Add"):
            continue   # a data input, not a weight
        replaced[name] = numpy_helper.from_array(_sample(rng, tuple(t.dims), role), name)
    kept_nodes = [n for k, n in enumerate(g.node) if k not in drop_nodes]
    kept_inits = [replaced.get(t.name, t) for t in g.initializer if t.name not in drop_inits]
    del g.node[:]
    g.node.extend(kept_nodes)
    del g.initializer[:]
    g.initializer.extend(kept_inits + new_inits)
    # old IR versions list initializers among the graph inputs: keep that true for the new ones, drop removed ones
    if m.ir_version < 4:
        names = {i.name for i in g.input}
        keep_inputs = [i for i in g.input if i.name not in drop_inits]
        del g.input[:]
        g.input.extend(keep_inputs)
        for t in new_inits:
            if t.name not in names:
                g.input.append(helper.make_tensor_value_info(t.name, onnx.TensorProto.FLOAT, list(t.dims)))
    return m
