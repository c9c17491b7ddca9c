"""Stage 1, load: a path or bytes -> onnx ModelProto (checked) -> Graph (shape-inferred, topologically ordered)."""
from __future__ import annotations

import itertools
import os
import sys
import weakref
from array import array

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.external_data_helper import _get_all_tensors, uses_external_data

from onnxep.errors import Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, NoSuchFile
from onnxep.graph.ir import Graph, Node, ValueType
from onnxep.graph.ml_types import ML, complete_types


def load_model(path_or_bytes) -> tuple[onnx.ModelProto, str | None]:
    """Parse the model; load external data only from inside the model's folder. Returns (model, model_dir)."""
    if isinstance(path_or_bytes, onnx.ModelProto):
        model, base = path_or_bytes, None
    elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        try:
            model = onnx.ModelProto.FromString(bytes(path_or_bytes))
        except Exception as e:
            raise InvalidProtobuf(f"failed to parse the model bytes as an ONNX ModelProto: {e}") from None
        base = None
    elif isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        if not os.path.isfile(path):
            raise NoSuchFile(f"Load model from {path} failed: file doesn't exist")
        try:
            model = onnx.load(path, load_external_data=False)
        except Exception as e:
            raise InvalidProtobuf(f"Load model from {path} failed: protobuf parsing failed: {e}") from None
        base = os.path.dirname(os.path.abspath(path))
    else:
        raise InvalidArgument(f"InferenceSession expects a path, bytes or ModelProto, got {type(path_or_bytes).__name__}")
    _load_external_data(model, base)
    return model, base


def _load_external_data(model, base):
    tensors = [t for t in _get_all_tensors(model) if uses_external_data(t)]
    if not tensors:
        return
    if base is None:
        raise InvalidGraph("the model uses external data but was given as bytes: load it from its file path")
    root = os.path.realpath(base)
    for t in tensors:
        info = {e.key: e.value for e in t.external_data}
        loc = info.get("location", "")
        if not loc or os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/"):
            raise InvalidGraph(f"initializer {t.name!r}: external data location {loc!r} must be a relative path "
                               f"inside the model's folder")
        full = os.path.realpath(os.path.join(root, loc))
        if os.path.commonpath([full, root]) != root:
            raise InvalidGraph(f"initializer {t.name!r}: external data location {loc!r} resolves outside the "
                               f"model's folder")
        if not os.path.isfile(full):
            raise NoSuchFile(f"initializer {t.name!r}: external data file {loc!r} not found in {root}")
        offset = int(info.get("offset", 0) or 0)
        length = info.get("length")
        size = os.path.getsize(full)
        length = size - offset if length in (None, "") else int(length)
        if offset < 0 or length < 0 or offset + length > size:
            raise InvalidGraph(f"initializer {t.name!r}: external data [{offset}, {offset + length}) is outside "
                               f"{loc!r} ({size} bytes)")
        with open(full, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


def _attr_value(a):
    if a.type == onnx.AttributeProto.GRAPH:
        return a.g
    if a.type == onnx.AttributeProto.GRAPHS:
        return list(a.graphs)
    if a.ref_attr_name:
        return None
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="surrogateescape")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [s.decode("utf-8", errors="surrogateescape") for s in v]
    if a.type == onnx.AttributeProto.TENSOR:
        return _tensor_array(v)
    return v


_SMALL_TENSOR_BYTES = 4096
_SMALL_TENSORS = weakref.WeakValueDictionary()    # (dtype, shape, bytes) -> the one read-only array of that content


def _tensor_array(t) -> np.ndarray:
    """numpy_helper.to_array; a small tensor (<= 4 KiB) comes back as the one live read-only array of its dtype,
    shape and bytes. A model of ConstantOfShape-made weights has hundreds of tiny tensors (the shapes, the fill
    values) but few distinct ones (light ShuffleNet: 524 and 31), and every session holds them all at once while its
    graph is built: that is the high-water mark of small Python objects a session's creation leaves behind (obmalloc
    keeps the pages it touched). onnx hands back views (of the bytes it read, or of a converted copy), so a held one
    is a standalone copy. Large ones stay views: no second copy of a weight. Read-only, because they are shared."""
    a = numpy_helper.to_array(t)
    if a.nbytes > _SMALL_TENSOR_BYTES or a.dtype == object:
        return a
    key = (a.dtype, a.shape, a.tobytes())
    held = _SMALL_TENSORS.get(key)
    if held is None:
        if a.base is not None:
            a = a.copy()
        a.flags.writeable = False
        held = _SMALL_TENSORS.setdefault(key, a)
    return held


def _topological(nodes):
    """Kahn's order over node inputs (and names used inside subgraphs); raises InvalidGraph on a cycle. The edges are
    kept as flat int arrays (users of node j: users[first[j]:first[j + 1]]), not a set and a list per node: every
    session builds its graph once, and what it holds at that moment is the high-water mark of small objects the
    session's creation leaves behind."""
    n = len(nodes)
    produced_by = {}
    for i, node in enumerate(nodes):
        for o in node.outputs:
            if o:
                produced_by[o] = i
    indeg = array("l", bytes(8 * n))
    src = array("l")           # edge k: node src[k] produces an input of node dst[k] (each pair once)
    dst = array("l")
    for i, node in enumerate(nodes):
        names = set(node.inputs) | _subgraph_outer_names(node) if node.attrs else node.inputs
        deps = {produced_by.get(x, i) for x in names}
        deps.discard(i)
        indeg[i] = len(deps)
        for j in deps:
            src.append(j)
            dst.append(i)
    first = array("l", bytes(8 * (n + 1)))   # CSR over src: counts, then offsets
    for j in src:
        first[j + 1] += 1
    for j in range(n):
        first[j + 1] += first[j]
    fill = array("l", first)
    users = array("l", bytes(8 * len(src)))
    for j, i in zip(src, dst):
        users[fill[j]] = i
        fill[j] += 1
    del src, dst, fill
    order = []
    ready = array("l", (i for i in range(n - 1, -1, -1) if indeg[i] == 0))
    while ready:
        i = ready.pop()
        order.append(nodes[i])
        for k in range(first[i], first[i + 1]):
            u = users[k]
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    if len(order) != n:
        stuck = [nodes[i].name or nodes[i].op_type for i in range(n) if indeg[i] > 0][:5]
        raise InvalidGraph(f"the graph has a cycle or an input that is never produced (at nodes {stuck})")
    return order


def _subgraph_outer_names(node) -> set:
    """Names a node's subgraphs read from the enclosing scope."""
    out = set()
    for g in node.subgraphs:
        out |= graph_outer_names(g)
    return out


def graph_outer_names(g) -> set:
    defined = {i.name for i in g.input} | {t.name for t in g.initializer} | {
        t.values.name for t in g.sparse_initializer}
    used = set()
    for n in g.node:
        for x in n.input:
            if x and x not in defined:
                used.add(x)
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for s in subs:
                used |= {x for x in graph_outer_names(s) if x not in defined}
        defined |= set(n.output)
    for o in g.output:
        if o.name not in defined:
            used.add(o.name)
    return used


def build_graph(model: onnx.ModelProto, infer_shapes: bool = True) -> Graph:
    """Shape inference, attribute decoding, topological order. infer_shapes=False trusts the model's value_info (an
    EPContext model written by onnxep carries every type the session needs)."""
    # onnx's checker is stricter than onnxruntime (e.g. it requires a shape on every graph output), so it only
    # refuses what no backend could run: a model whose opset this onnx does not know.
    if model.ir_version > onnx.IR_VERSION:
        raise InvalidGraph(f"unsupported model IR version {model.ir_version}: the installed onnx {onnx.__version__} "
                           f"knows up to IR version {onnx.IR_VERSION}")
    known = onnx.defs.onnx_opset_version()
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and o.version > known:
            raise InvalidGraph(f"the model imports opset {o.version} of the default domain; the installed onnx "
                               f"{onnx.__version__} knows up to {known}")
    if not model.HasField("graph"):
        raise InvalidGraph("the model has no graph")
    try:
        if not infer_shapes:
            raise ValueError("shape inference off")
        # data_prop=False: with data propagation onnx materialises constant shapes, and a tiny model can make it
        # allocate terabytes (ConstantOfShape([2**40]))
        if any(o.domain == ML for o in model.opset_import):
            inferred = complete_types(model)        # onnx leaves some ai.onnx.ml outputs untyped
        else:
            inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=False)
    except Exception:
        inferred = model
    g = inferred.graph
    opsets = {o.domain if o.domain != "ai.onnx" else "": o.version for o in model.opset_import}
    if "" not in opsets and model.ir_version < 3:
        opsets[""] = 1
    value_types = {}
    for vi in itertools.chain(g.value_info, g.input, g.output):     # one message wrapper alive at a time
        if vi.HasField("type"):
            value_types[sys.intern(vi.name)] = ValueType.from_proto(vi.type)
    initializers = {}
    for t in g.initializer:
        try:
            initializers[sys.intern(t.name)] = _tensor_array(t)
        except Exception as e:
            raise InvalidGraph(f"initializer {t.name!r} cannot be read: {e}") from None
    for st in g.sparse_initializer:
        try:
            dense = _sparse_to_dense(st)
        except Exception as e:
            raise InvalidGraph(f"sparse initializer {st.values.name!r} cannot be read: {e}") from None
        initializers[st.values.name] = dense
    for name, arr in initializers.items():
        if name not in value_types and isinstance(arr, np.ndarray) and arr.dtype != object:
            value_types[name] = ValueType.of_array(arr)
    input_names = [i.name for i in g.input]
    inputs = [(n, value_types.get(n, ValueType())) for n in input_names if n not in initializers]
    # As in onnxruntime: before IR version 4 every initializer is also listed as a graph input, and none of them can be
    # overridden (they are constants); from IR 4 on, an initializer listed as an input is a default the caller may
    # override.
    overridable = [(n, value_types.get(n, ValueType())) for n in input_names
                   if n in initializers and model.ir_version >= 4]
    outputs = [(o.name, value_types.get(o.name, ValueType())) for o in g.output]
    nodes = []
    for i, n in enumerate(g.node):
        attrs = {sys.intern(a.name): _attr_value(a) for a in n.attribute}
        domain = n.domain if n.domain != "ai.onnx" else ""
        nodes.append(Node(sys.intern(n.name or f"{n.op_type}_{i}"), sys.intern(n.op_type), sys.intern(domain),
                          tuple(map(sys.intern, n.input)), tuple(map(sys.intern, n.output)), attrs,
                          opsets.get(domain, 0)))
    nodes = _topological(nodes)
    meta = {
        "producer_name": model.producer_name, "graph_name": g.name, "domain": model.domain,
        "description": model.doc_string, "graph_description": g.doc_string, "version": model.model_version,
        "custom_metadata_map": {p.key: p.value for p in model.metadata_props},
    }
    return Graph(nodes, inputs, outputs, initializers, overridable, value_types, opsets, model.ir_version,
                 list(model.functions), meta)


def _sparse_to_dense(st) -> np.ndarray:
    values = numpy_helper.to_array(st.values)
    idx = numpy_helper.to_array(st.indices)
    dims = tuple(st.dims)
    dense = np.zeros(dims, dtype=values.dtype)
    if idx.ndim == 1:
        dense.reshape(-1)[idx] = values
    else:
        dense[tuple(idx.T)] = values
    return dense


def check_size(shape, dtype, what: str, limit: int = 1 << 40):
    """Refuse a tensor whose byte size is negative or absurd before anything allocates it."""
    n = np.dtype(dtype).itemsize
    for d in shape:
        if d < 0:
            raise InvalidArgument(f"{what}: negative dimension in shape {tuple(shape)}")
        n *= int(d)
    if n > limit:
        raise Fail(f"{what}: shape {tuple(shape)} needs {n} bytes, over the {limit}-byte limit")
    return n


def save_graph(graph: Graph, template: onnx.ModelProto, path: str) -> None:
    """Write `graph` (after the optimize stage) as an ONNX model at `path`: `template`'s metadata, the graph's nodes,
    initializers and known value types, and its opset imports (com.onnxep when the passes wrote onnxep's own ops,
    which only onnxep runs -- like onnxruntime's optimized models with com.microsoft ops). Large models keep their
    tensors in one external data file next to it."""
    m = onnx.ModelProto()
    m.CopyFrom(template)
    g = m.graph
    del g.node[:]
    g.node.extend(n.proto for n in graph.nodes)
    del g.initializer[:]
    del g.sparse_initializer[:]
    g.initializer.extend(numpy_helper.from_array(v, k) for k, v in graph.initializers.items())
    declared = {i.name for i in g.input} | {o.name for o in g.output}
    del g.value_info[:]
    for name, vt in graph.value_types.items():
        if name not in declared and vt.proto is not None and name not in graph.initializers:
            g.value_info.append(helper.make_value_info(name, vt.proto))
    have = {o.domain for o in m.opset_import}
    for domain, version in graph.opsets.items():
        if domain not in have and domain != "ai.onnx":
            m.opset_import.append(helper.make_opsetid(domain, version))
    big = sum(v.nbytes for v in graph.initializers.values()) > (1 << 30)
    onnx.save(m, path, save_as_external_data=big, location=os.path.basename(path) + ".data" if big else None)
