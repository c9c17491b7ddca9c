"""The value types onnx's shape inference would give a plain convnet's values, worked out on the decoded nodes.

onnx's inference serializes the model, infers in C++, serializes the result and parses it back, and the session then
reads a type per value out of that copy: on a small torch.onnx (TorchScript) convnet, whose exporter types no
intermediate value, that round trip is a tenth of the session's creation (and its first call loads onnx's schema
registry, ~8 MB). For a graph whose every node is one of the few ops below (a ResNet, RegNet, MobileNetV3: Conv,
pooling, elementwise, Identity, Flatten, Gemm), `infer_types` applies onnx's own rules (onnx/defs:
convPoolShapeInference, globalPoolTypeShapeInference, multidirectional broadcasting, Flatten's multiplyDims, Gemm's)
in node order, names the dims it cannot size as onnx does (unk__N), and merges what it infers for a graph output into
the output's declared type as onnx does (mergeInShapeInfo). Anything outside what it handles -- another op, an old
opset, auto_pad, ceil_mode, a dilated pool, a non-float or untyped input, a conflict onnx would report -- answers
None, and the caller runs onnx's inference instead: this never guesses. tests/graph/test_infer_local.py holds it to
onnx's answers (the same types in the same order)."""
from __future__ import annotations

from onnxep.graph.ir import ValueType

#: unary ops whose output takes the input's type and shape (propagateShapeAndTypeFromFirstInput), from the opset
#: on which their schema has no legacy attribute
_UNARY = {"Relu": 6, "Sigmoid": 6, "Tanh": 6, "Abs": 6, "Neg": 6, "Exp": 6, "Sqrt": 6, "Erf": 9, "LeakyRelu": 6,
          "HardSigmoid": 6, "HardSwish": 14, "Softplus": 1, "Elu": 6, "Selu": 6, "Identity": 1}
#: ops whose output takes the first input's type and shape whatever their other (optional) inputs are
_FIRST = {"Clip": 6}
#: multidirectional-broadcast binary ops (opset 7 on: no legacy broadcast / axis attributes)
_BINARY = {"Add", "Sub", "Mul", "Div"}
#: the element types infer_types takes (float, float16, double): a convnet's, read the same from an initializer's array
_FLOATS = (1, 10, 11)
_POOLS = {"MaxPool": 8, "AveragePool": 7}
_GLOBAL_POOLS = {"GlobalAveragePool", "GlobalMaxPool"}
#: op type -> the first opset `infer_types` reads it at
OPS = {**_UNARY, **_FIRST, **{op: 7 for op in _BINARY}, **_POOLS, **{op: 1 for op in _GLOBAL_POOLS}, "Conv": 1,
       "Flatten": 9, "Gemm": 7}


class _Unknown(Exception):
    """What onnx would do here is not worked out locally: the caller runs onnx's inference."""


def candidate(nodes) -> bool:
    """Whether every node (NodeProtos, or anything with domain and op_type) is of an op `infer_types` may handle
    (opsets are checked per node later). Stops at the first that is not: a transformer's first nodes already are
    not, and its thousand nodes are not walked for it."""
    for i in range(len(nodes)):       # (by index: a protobuf repeated field's iterator ends in an IndexError)
        n = nodes[i]
        if n.op_type not in OPS or n.domain not in ("", "ai.onnx"):
            return False
    return True


def infer_types(nodes, value_types: dict, inputs, outputs) -> dict | None:
    """`value_types` and a ValueType for each node output (in `nodes`' order, each node's inputs typed by
    `value_types` or an earlier node), the types of graph outputs (`outputs`: their names) merged into their declared
    ones as onnx merges them; None when anything is outside what this module works out. In the order build_graph
    reads onnx's answer in (the inferred values, the graph's inputs, its outputs, then the rest of `value_types`)."""
    types = dict(value_types)
    outs = set(outputs)
    # onnx names each dim it infers but cannot size (unk__0, unk__1, ... in node order, skipping the graph's own
    # symbols) before it merges the type in: the next nodes then see a symbol, not an unknown dim
    symbols = {d for vt in value_types.values() if vt.shape for d in vt.shape if type(d) is str}
    fresh = [0]

    def named(d):
        if d is not None:
            return d
        while f"unk__{fresh[0]}" in symbols:
            fresh[0] += 1
        fresh[0] += 1
        return f"unk__{fresh[0] - 1}"
    try:
        for node in nodes:
            if node.domain != "" or node.opset < OPS.get(node.op_type, 1 << 30):
                raise _Unknown
            elem, shape = _infer(node, types)
            y = node.outputs[0]
            vt = ValueType.of_tensor(elem, [named(d) for d in shape])
            if y in outs and y in types:
                vt = _merge(vt, types[y])
            elif y in types:
                raise _Unknown       # (a value typed twice: onnx merges, or reports a conflict)
            types[y] = vt
    except _Unknown:
        return None
    ordered = {y: types[y] for node in nodes for y in node.outputs[:1] if y not in outs}
    for name in (*inputs, *outputs):
        if name in types:
            ordered[name] = types[name]
    for name, vt in value_types.items():
        ordered.setdefault(name, vt)
    return ordered


def _tensor(types, x):
    vt = types.get(x) if x else None
    if vt is None or vt.kind != "tensor" or vt.elem_type not in _FLOATS or vt.shape is None or vt.proto_bytes:
        raise _Unknown
    return vt.elem_type, vt.shape


def _ints(attrs, name, n, default):
    v = attrs.get(name)
    if v is None:
        return [default] * n
    v = list(v)
    if len(v) != n or not all(type(d) is int for d in v):
        raise _Unknown
    return v


def _infer(node, types):
    op, a, ins = node.op_type, node.attrs, node.inputs
    if len(node.outputs) != 1 or not node.outputs[0] or not ins or not ins[0]:
        raise _Unknown
    elem, x = _tensor(types, ins[0])
    if op in _UNARY:
        if len(ins) != 1:
            raise _Unknown
        return elem, x
    if op in _FIRST:
        return elem, x
    if op in _BINARY:
        if len(ins) != 2:
            raise _Unknown
        return elem, _broadcast(x, _tensor(types, ins[1])[1])
    if op in _GLOBAL_POOLS:
        if len(x) < 2:
            raise _Unknown
        return elem, (x[0], x[1], *(1,) * (len(x) - 2))
    if op == "Flatten":
        axis = a.get("axis", 1)
        if type(axis) is not int:
            raise _Unknown
        if axis < 0:
            if node.opset < 11:
                raise _Unknown
            axis += len(x)
        if not 0 <= axis <= len(x):
            raise _Unknown
        return elem, (_product(x[:axis]), _product(x[axis:]))
    if op == "Gemm":
        if not 2 <= len(ins) <= 3:
            raise _Unknown
        w = _tensor(types, ins[1])[1]
        ta, tb = a.get("transA", 0), a.get("transB", 0)
        if len(x) != 2 or len(w) != 2 or type(ta) is not int or type(tb) is not int:
            raise _Unknown
        return elem, (x[1 if ta else 0], w[0 if tb else 1])
    return elem, _conv_pool(node, x, types)


def _conv_pool(node, x, types):
    """convPoolShapeInference without auto_pad and ceil_mode (and, for pools, without dilations)."""
    op, a = node.op_type, node.attrs
    if len(x) < 3 or a.get("auto_pad", "NOTSET") not in ("NOTSET", None) or a.get("ceil_mode", 0) not in (0, None):
        raise _Unknown
    n = len(x) - 2
    if op == "Conv":
        if not 2 <= len(node.inputs) <= 3:
            raise _Unknown
        w = _tensor(types, node.inputs[1])[1]
        if len(w) < 1:
            raise _Unknown
        dilations = _ints(a, "dilations", n, 1)
        kernel = a.get("kernel_shape")
        if kernel is None:
            kernel = list(w[2:])
            if len(kernel) != n or not all(type(k) is int for k in kernel):
                raise _Unknown
        group = a.get("group", 1)
        if type(group) is not int or len(w) != n + 2 or (type(x[1]) is int and type(w[1]) is int
                                                          and x[1] != w[1] * group):
            raise _Unknown       # (onnx reports the channel mismatch)
        channels = w[0]
    else:
        if len(node.inputs) != 1 or _ints(a, "dilations", n, 1) != [1] * n or a.get("kernel_shape") is None:
            raise _Unknown      # (MaxPool before opset 10 reads no dilations: all ones reads the same everywhere)
        dilations = [1] * n
        channels = x[1]
    kernel = _ints(a, "kernel_shape", n, 0) if a.get("kernel_shape") is not None else kernel
    strides = _ints(a, "strides", n, 1)
    pads = _ints(a, "pads", 2 * n, 0)
    out = [x[0], channels]
    for i in range(n):
        d = x[2 + i]
        if type(d) is not int:
            out.append(None)
            continue
        eff_k = (kernel[i] - 1) * dilations[i] + 1
        span = d + pads[i] + pads[i + n] - eff_k
        if span < 0 or strides[i] < 1 or kernel[i] < 1 or dilations[i] < 1:
            raise _Unknown
        out.append(1 + span // strides[i])
    return tuple(out)


def _broadcast(p, q):
    """onnx's multidirectionalBroadcastShapeInference of two shapes (dims: int, str symbol, None unknown)."""
    rank = max(len(p), len(q))
    out = []
    for i in range(rank):
        value, symbolic, count = 1, None, 0
        for s in (p, q):
            j = i - rank + len(s)
            if j < 0:
                continue
            d = s[j]
            if type(d) is int:
                if d != 1:
                    if value != d and value != 1:
                        raise _Unknown      # (onnx: incompatible dimensions)
                    value = d
            elif count == 0:
                symbolic, count = d, 1
            elif (d or "") != (symbolic or ""):
                count += 1
        if value != 1 or count == 0:
            out.append(value)
        elif count == 1:
            out.append(symbolic)
        else:
            out.append(None)
    return tuple(out)


def _product(dims):
    """onnx's multiplyDims: a dim of value 1 times each dim in turn (Dimension operator*: two static dims multiply, a
    static 1 times any dim is that dim, anything else is unknown)."""
    r = 1
    for d in dims:
        if type(r) is int and type(d) is int:
            r *= d
        elif type(r) is int and r == 1:
            r = d
        elif not (type(d) is int and d == 1):
            r = None
    return r


def _merge(inferred: ValueType, declared: ValueType) -> ValueType:
    """onnx's mergeInShapeInfo of an inferred tensor type into a graph output's declared one: a declared static dim
    stays (a different inferred one is a conflict), a declared symbol stays, an unknown one takes the inferred dim."""
    if declared.kind != "tensor" or declared.proto_bytes:
        raise _Unknown
    if declared.elem_type and declared.elem_type != inferred.elem_type:
        raise _Unknown
    if declared.shape is None:
        return ValueType.of_tensor(inferred.elem_type, inferred.shape)
    if len(declared.shape) != len(inferred.shape):
        raise _Unknown
    dims = []
    for t, s in zip(declared.shape, inferred.shape):
        if type(t) is int:
            if type(s) is int and s != t:
                raise _Unknown
            dims.append(t)
        elif type(s) is int:
            dims.append(s)
        else:
            dims.append(t if t is not None else s)
    return ValueType.of_tensor(inferred.elem_type, dims)
