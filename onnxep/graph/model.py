"""Stage 1, load: a path or bytes -> onnx ModelProto (checked) -> Graph (shape-inferred, topologically ordered)."""
from __future__ import annotations

import itertools
import mmap
import os
import stat
import sys
from array import array

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import helper, numpy_helper
from onnx.external_data_helper import uses_external_data

from onnxep.contracts.allocator import host_bytes
from onnxep.errors import Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, NoSuchFile
from onnxep.graph import infer_local
from onnxep.graph.ir import BODY_ATTRS, Body, Graph, Node, ValueType, WeakIntern, _varint
from onnxep.graph.ml_types import ML, complete_types
from onnxep.graph.schema_facts import schema_facts


def load_model(path_or_bytes, weights: dict | None = None) -> tuple[onnx.ModelProto, str | None]:
    """Parse the model; load external data only from inside the model's folder. Returns (model, model_dir).

    With `weights` (a dict), every initializer of at least STRIPPED_BYTES whose bytes numpy can view as they are
    (plain numeric types) is read straight from the file (or the bytes given) into its own array, `weights[name]`,
    and its TensorProto in `model` keeps its name, type and dims but no data: the weights are then held once -- not
    as the file's bytes, the parsed message's copy and a numpy copy at once -- and shape inference sees a small model.
    External data is read the same way, into arrays, never into the message. build_graph takes the same dict."""
    data = None      # the model's bytes, when they were read whole (small models)
    outside = True   # whether a tensor may keep its data outside (False: the encoding names no such tensor)
    if isinstance(path_or_bytes, onnx.ModelProto):
        model, base = path_or_bytes, None
    elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        model = None
        if weights is not None and len(path_or_bytes) >= SPLIT_MODEL_BYTES:
            model, outside = _load_split(memoryview(path_or_bytes).cast("B"), None, weights)
        if model is None:
            try:
                data = bytes(path_or_bytes)
                model = onnx.ModelProto.FromString(data)
            except Exception as e:
                raise InvalidProtobuf(f"failed to parse the model bytes as an ONNX ModelProto: {e}") from None
        base = None
    elif isinstance(path_or_bytes, (str, os.PathLike)):
        path = os.fspath(path_or_bytes)
        model = None
        onnx_file = os.path.splitext(path)[1] == ".onnx"
        # one open and one fstat: the checks that name what is wrong with the path (_check_model_path) run only when
        # opening it failed or it is no regular file (each system call costs a few us on a creation's cold caches;
        # O_NONBLOCK: opening a FIFO must not wait for a writer)
        try:
            f = open(path, "rb", buffering=0, opener=_open_nonblocking)
        except OSError:
            f = None
        st = os.fstat(f.fileno()) if f is not None else None
        if st is None or not stat.S_ISREG(st.st_mode):
            if f is not None:
                f.close()
            _check_model_path(path)
            raise Fail(f"Load model from {path} failed: it is not a readable regular file")
        with f:
            if weights is not None and st.st_size >= SPLIT_MODEL_BYTES:
                try:
                    mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                except (OSError, ValueError):
                    mm = None
                if mm is not None:
                    try:
                        model, outside = _load_split(mm, f.fileno(), weights)
                    finally:
                        mm.close()
            if model is None and onnx_file:     # (what onnx.load does for it, without its lookups)
                try:
                    data = f.read()
                    model = onnx.ModelProto()
                    model.ParseFromString(data)
                except Exception as e:
                    raise InvalidProtobuf(f"Load model from {path} failed: protobuf parsing failed: {e}") from None
        if model is None:
            try:     # onnx.load picks the format from the extension (.onnxtxt, .json, ...)
                model = onnx.load(path, load_external_data=False)
            except Exception as e:
                raise InvalidProtobuf(f"Load model from {path} failed: protobuf parsing failed: {e}") from None
        base = os.path.dirname(os.path.abspath(path))
    else:
        raise InvalidArgument(f"InferenceSession expects a path, bytes or ModelProto, got "
                              f"{type(path_or_bytes).__name__}")
    if data is not None and len(data) <= SPLIT_MODEL_BYTES:
        g = model.graph
        outside = _may_name_outside((data,), len(g.node) + len(g.initializer))
    if not outside:
        return model, base        # no tensor of the encoding says data_location EXTERNAL and where: nothing to read
    del data
    _load_external_data(model, base, weights)
    return model, base


#: data_location = EXTERNAL (TensorProto field 14, varint 1) as protobuf encodes it: a model whose bytes lack it
#: keeps no tensor's data outside (looked for in the bytes instead of a walk over every tensor and node attribute)
_EXTERNAL_MARK = bytes(((14 << 3) | 0, onnx.TensorProto.EXTERNAL))
#: ... and the key "location" of an external_data entry (StringStringEntryProto.key, field 1) as protobuf encodes it,
#: which every tensor whose data is outside names: the two bytes above turn up by chance in most models' weights (in
#: 14 of 19 small conv models), these ten never do. (A tensor marked EXTERNAL without a location is then read as it
#: is, and refused there: "cannot be read".) Looking for them costs 0.3-0.6 ns a byte where they are not (CPython's
#: search; the key first, the two bytes take longer), the walk over every node and attribute they spare 0.5-0.7 us a
#: node (1054-node torch export: 0.8 ms): so they are looked for only in bytes of at most _SEARCH_BYTES_PER_NODE per
#: node and initializer (a dynamo export's nodes carry their source locations: 2-4 KB each, walked instead).
_LOCATION_KEY = bytes(((1 << 3) | 2, len(b"location"))) + b"location"
_SEARCH_BYTES_PER_NODE = 1024


def _names_outside(encoded) -> bool:
    """Whether protobuf bytes `encoded` may hold a tensor whose data is outside (both encodings above occur)."""
    return _LOCATION_KEY in encoded and _EXTERNAL_MARK in encoded


def _may_name_outside(parts, items) -> bool:
    """Whether the encoded `parts` of a graph of `items` nodes and initializers may name a tensor whose data is outside:
    looked for (_names_outside) only when that costs less than the walk over the nodes it spares, else True."""
    return sum(len(p) for p in parts) > _SEARCH_BYTES_PER_NODE * items or any(_names_outside(p) for p in parts)


def _open_nonblocking(path, flags):
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def _check_model_path(path) -> None:
    """A model path that names no readable file: the error says which (missing: NoSuchFile, as onnxruntime; a
    directory: InvalidProtobuf, onnxruntime's type for it, whose message only says the parsing failed; unreadable:
    Fail with the system's reason)."""
    if os.path.isdir(path):
        raise InvalidProtobuf(f"Load model from {path} failed: it is a directory, not a model file")
    if not os.path.exists(path):
        parent = os.path.dirname(os.path.abspath(path))
        why = "" if os.path.isdir(parent) else f" (nor does its folder {parent})"
        raise NoSuchFile(f"Load model from {path} failed: file doesn't exist{why}")
    if not os.path.isfile(path):
        raise InvalidProtobuf(f"Load model from {path} failed: it is not a regular file")
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        raise Fail(f"Load model from {path} failed: the file cannot be read: {e.strerror or e}") from None


# The repeated fields of a message are read as slices (g.node[:], n.input[:]: lists) where every creation reads them:
# protobuf's upb containers have no iterator of their own, so a plain `for` over one ends in an IndexError raised,
# formatted and caught -- several per node, hundreds per model, a third of the loop's cost and code run only for it.

#: AttributeProto types that hold subgraphs
_GRAPH_KINDS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
#: initializers of at least this many bytes are loaded into arrays of their own, outside the ModelProto (load_model)
STRIPPED_BYTES = 1 << 16
#: ... in model files (or bytes) of at least this size: a smaller one is parsed whole (its field walk would cost more
#: than the copies it saves)
SPLIT_MODEL_BYTES = 1 << 20
#: element types whose raw_data numpy views as it is (little-endian hosts): not the packed 4 / 2 / 6-bit ones
_PLAIN_ELEM_TYPES = frozenset(getattr(onnx.TensorProto, n) for n in (
    "FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64",
    "BOOL", "COMPLEX64", "COMPLEX128", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
    "FLOAT8E8M0") if hasattr(onnx.TensorProto, n))


#: element type -> numpy dtype, for the plain ones (little-endian hosts only: elsewhere numpy_helper swaps bytes)
_PLAIN_DTYPES = {e: np.dtype(helper.tensor_dtype_to_np_dtype(e)) for e in _PLAIN_ELEM_TYPES} \
    if sys.byteorder == "little" else {}


def _fields(buf, start, end):
    """(field number, wire type, start of the field, start of its value, end of the field) for each field of the
    protobuf message encoded in buf[start:end]. Only field boundaries are read (the tag and the length of each); the
    messages themselves are parsed by protobuf."""
    out = []
    i = start
    while i < end:
        f0 = i
        tag = buf[i]
        i += 1
        if tag >= 0x80:
            tag, i = _varint(buf, f0)
        wire = tag & 7
        if wire == 2:
            n = buf[i]
            i += 1
            if n >= 0x80:
                n, i = _varint(buf, i - 1)
            v0 = i
            i += n
        elif wire == 0:
            v0 = i
            _, i = _varint(buf, i)
        elif wire == 1:
            v0 = i
            i += 8
        elif wire == 5:
            v0 = i
            i += 4
        else:
            raise ValueError(f"wire type {wire}")
        if i > end:
            raise ValueError("field runs past its message")
        out.append((tag >> 3, wire, f0, v0, i))
    return out


# field numbers (onnx.proto3): ModelProto.graph, GraphProto.initializer, TensorProto.raw_data
_MODEL_GRAPH, _GRAPH_NODE, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 1, 5, 9


def _load_split(buf, fd, weights: dict):
    """(the ModelProto encoded in `buf` (an mmap of the file `fd`, or the bytes given), each large plain initializer
    read into an array of its own (weights[name]) and left without data in the message; whether a tensor of it may
    keep its data outside: an initializer whose data_location says so, or the encoding of anything but the
    initializers names one (_names_outside; True without looking when a walk costs less, see _SEARCH_BYTES_PER_NODE));
    (None, True) when the encoding is not the plain one this expects (the caller then parses the whole model as it
    is)."""
    try:
        top = list(_fields(buf, 0, len(buf)))
        graphs = [f for f in top if f[0] == _MODEL_GRAPH and f[1] == 2]
        if len(graphs) != 1:
            return None, True
        _, _, _, g0, g1 = graphs[0]
        rest, inits = [], []
        for f in _fields(buf, g0, g1):
            (inits if f[0] == _GRAPH_INITIALIZER and f[1] == 2 else rest).append(f)
        if not any(f[4] - f[3] >= STRIPPED_BYTES for f in inits):
            return None, True
        head = b"".join(buf[f[2]:f[4]] for f in top if f is not graphs[0])
        body = b"".join(buf[f[2]:f[4]] for f in rest)
        nodes = sum(1 for f in rest if f[0] == _GRAPH_NODE)
        outside = _may_name_outside((head, body), nodes + len(inits))
        model = onnx.ModelProto.FromString(head)
        graph = model.graph
        graph.MergeFromString(body)
        del head, body
        taken = {}
        for _, _, _, t0, t1 in inits:
            t = graph.initializer.add()
            raw = None
            if t1 - t0 >= STRIPPED_BYTES:
                raws = [f for f in _fields(buf, t0, t1) if f[0] == _TENSOR_RAW_DATA]
                if len(raws) == 1 and raws[0][1] == 2 and raws[0][4] - raws[0][3] >= STRIPPED_BYTES:
                    raw = raws[0]
            if raw is None:
                t.ParseFromString(buf[t0:t1])
                outside = outside or t.data_location == _EXTERNAL
                continue
            t.ParseFromString(b"".join((buf[t0:raw[2]], buf[raw[4]:t1])))
            outside = outside or t.data_location == _EXTERNAL
            array = _plain_array(t, buf, fd, raw[3], raw[4] - raw[3]) if t.name not in taken else None
            if array is None:       # not a type numpy views as it is: the message keeps its data
                t.raw_data = buf[raw[3]:raw[4]]
                continue
            taken[t.name] = array
    except (ValueError, IndexError, TypeError, OSError, DecodeError):
        return None, True
    weights.update(taken)
    return model, outside


def _plain_array(t, buf, fd, offset: int, length: int, external: bool = False):
    """The array of tensor `t` (a TensorProto without its data) from `length` bytes at `offset`: read from the file
    `fd` (not through the mmap, whose pages would count as this process's memory) or copied out of `buf`; None when
    the data is not plain (packed sub-byte types, external data, segments, a length that does not match)."""
    if (t.data_type not in _PLAIN_ELEM_TYPES or sys.byteorder != "little" or t.HasField("segment")
            or (not external and (t.data_location == onnx.TensorProto.EXTERNAL or t.external_data))):
        return None
    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
    dims = tuple(int(d) for d in t.dims)
    if any(d < 0 for d in dims) or int(np.prod(dims, dtype=np.int64)) * dtype.itemsize != length:
        return None
    if fd is None:
        out = host_bytes(length)        # aligned (see _read_into)
        out[...] = np.frombuffer(buf, np.uint8, length, offset)
    else:
        out = _read_into(fd, offset, length)
    out = out.view(dtype).reshape(dims)
    out.flags.writeable = False         # as numpy_helper's arrays over the message's bytes: constants
    return out


def _read_into(fd, offset: int, length: int) -> np.ndarray:
    """`length` bytes of file `fd` from `offset`, read into a fresh uint8 array (one copy: page cache -> array). The
    array starts on a HOST_ALIGNMENT boundary (host_bytes), so a kernel that reads a weight as stored (the batch-1
    GEMV, ops/onnxep/fused_mat_mul.py) loads whole cache lines: numpy's own large buffers start 16 bytes into a page,
    and the one-row GEMV read such weights at 0.77-0.85x the rate of aligned ones (K = 576 .. 3072, 1 thread, Zen 5)."""
    out = host_bytes(length)
    view = memoryview(out)
    done = 0
    while done < length:
        n = os.preadv(fd, [view[done:done + (1 << 30)]], offset + done)
        if n <= 0:
            raise OSError(f"unexpected end of file at byte {offset + done}")
        done += n
    return out


def _load_external_data(model, base, weights=None):
    """External data read from inside the model's folder: into the message (raw_data), or, with `weights`, the main
    graph's initializers of plain types into arrays of their own (weights[name]), the message keeping their type and
    dims only."""
    tensors = _external_tensors(model)
    if not tensors:
        return
    if base is None:
        t = tensors[0]
        loc = next((e.value for e in t.external_data if e.key == "location"), "")
        escapes = not loc or os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/")
        raise InvalidGraph(
            f"initializer {t.name!r}: external data location {loc!r}"
            + (" points outside any folder" if escapes else "")
            + f" -- the model was given as bytes (or a ModelProto), so it has no folder its external data could be "
              f"read from ({len(tensors)} tensor(s) keep their data outside the model): load it from its file path, "
              f"whose folder external data must stay inside")
    root = os.path.realpath(base)
    if weights is not None:
        own = [t for t in model.graph.initializer if uses_external_data(t)]
        for t in own:
            full, offset, length = _external_range(t, root)
            with open(full, "rb") as f:
                array = _plain_array(t, None, f.fileno(), offset, length, external=True)
            if array is not None and t.name not in weights:
                weights[t.name] = array
                del t.external_data[:]
                t.data_location = onnx.TensorProto.DEFAULT
        tensors = _external_tensors(model)
    for t in tensors:
        full, offset, length = _external_range(t, root)
        with open(full, "rb") as f:
            f.seek(offset)
            t.raw_data = f.read(length)
        del t.external_data[:]
        t.data_location = onnx.TensorProto.DEFAULT


_EXTERNAL = onnx.TensorProto.EXTERNAL
_ATTR_TENSOR, _ATTR_TENSORS = onnx.AttributeProto.TENSOR, onnx.AttributeProto.TENSORS
_ATTR_INT, _ATTR_INTS, _ATTR_FLOAT = onnx.AttributeProto.INT, onnx.AttributeProto.INTS, onnx.AttributeProto.FLOAT
_ATTR_GRAPH, _ATTR_GRAPHS = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS


def _external_tensors(model) -> list:
    """The tensors of `model` that keep their data in an external file (onnx's _get_all_tensors filtered by
    uses_external_data -- the initializers of every graph and subgraph, the tensors of node attributes, in the graph
    and in local functions --, one pass, looking into a node's attributes only when it has tensor or graph ones)."""
    out = []

    def graph(g, initializers=True):
        if initializers:
            out.extend(t for t in g.initializer[:] if t.data_location == _EXTERNAL)
        for n in g.node[:]:
            for a in n.attribute[:]:
                kind = a.type
                if kind == _ATTR_TENSOR:
                    if a.t.data_location == _EXTERNAL:
                        out.append(a.t)
                elif kind == _ATTR_TENSORS:
                    out.extend(t for t in a.tensors if t.data_location == _EXTERNAL)
                elif kind == _ATTR_GRAPH:
                    graph(a.g)
                elif kind == _ATTR_GRAPHS:
                    for sub in a.graphs:
                        graph(sub)

    graph(model.graph)
    for f in model.functions:
        graph(f, initializers=False)
    return out


def _external_range(t, root) -> tuple:
    """(file, offset, length) of tensor t's external data, checked to lie inside the model's folder `root`."""
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
    return full, offset, length


def decode_bodies(node: Node) -> Node:
    """`node` with its BODY_ATTRS graph attributes as graph/ir.py Bodies (the passes write them so; a model written
    out and read back holds GraphProtos). The body's nodes run at the node's `opset` attribute."""
    names = BODY_ATTRS.get((node.domain, node.op_type))
    if names:
        opset = node.attrs.get("opset")
        for k in names:
            g = node.attrs.get(k)
            if isinstance(g, onnx.GraphProto) and isinstance(opset, int):
                types = {vi.name: ValueType.from_proto(vi.type) for vi in (*g.input, *g.value_info, *g.output)
                         if vi.type.WhichOneof("value") is not None}
                nodes = tuple(Node(n.name, n.op_type, n.domain if n.domain != "ai.onnx" else "", tuple(n.input),
                                   tuple(n.output), {a.name: _attr_value(a) for a in n.attribute}, opset)
                              for n in g.node)
                node.attrs[k] = Body(g.name, nodes, tuple(i.name for i in g.input), tuple(o.name for o in g.output),
                                     types)
    return node


def _attr_value(a):
    if a.type == onnx.AttributeProto.GRAPH:
        return a.g
    if a.type == onnx.AttributeProto.GRAPHS:
        return list(a.graphs)
    if a.ref_attr_name:
        return None
    t = a.type      # (the common kinds read directly: a torch export decodes thousands of attributes)
    if t == _ATTR_INT:
        return a.i
    if t == _ATTR_INTS:
        return a.ints[:]
    if t == _ATTR_FLOAT:
        return a.f
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="surrogateescape")
    if isinstance(v, list) and v and isinstance(v[0], bytes):
        return [s.decode("utf-8", errors="surrogateescape") for s in v]
    if a.type == onnx.AttributeProto.TENSOR:
        return _tensor_array(v)
    return v


_SMALL_TENSOR_BYTES = 4096
_SMALL_TENSORS = WeakIntern()    # (dtype, shape, bytes) -> the one read-only array of that content


def _tensor_array(t) -> np.ndarray:
    """numpy_helper.to_array; a small tensor (<= 4 KiB) comes back as the one live read-only array of its dtype,
    shape and bytes. A model of ConstantOfShape-made weights has hundreds of tiny tensors (the shapes, the fill
    values) but few distinct ones (light ShuffleNet: 524 and 31), and every session holds them all at once while its
    graph is built: that is the high-water mark of small Python objects a session's creation leaves behind (obmalloc
    keeps the pages it touched). onnx hands back views (of the bytes it read, or of a converted copy), so a held one
    is a standalone copy. Large ones stay views: no second copy of a weight. Read-only, because they are shared."""
    dtype = _PLAIN_DTYPES.get(t.data_type) if t.HasField("raw_data") else None
    if dtype is not None and not t.external_data and not t.HasField("segment"):
        # numpy_helper.to_array's own path for these, without its per-call type lookups (a torch export carries a
        # Constant node, so a tensor, for every scalar: ~1000 per model)
        raw = t.raw_data       # (bytes of this tensor alone: the message hands out a copy)
        dims = tuple(t.dims[:])
        if len(raw) > _SMALL_TENSOR_BYTES:
            return np.frombuffer(raw, dtype).reshape(dims)
        # small: raw is the key's bytes, and the array a read-only view of it, standalone already (no tobytes, copy)
        key = (dtype, dims, raw)
        held = _SMALL_TENSORS.get(key)
        if held is None:
            held = _SMALL_TENSORS.file(key, np.frombuffer(raw, dtype).reshape(dims))
        return held
    else:
        a = numpy_helper.to_array(t)
    if a.nbytes > _SMALL_TENSOR_BYTES or a.dtype == object:
        return a
    key = (a.dtype, a.shape, a.tobytes())
    held = _SMALL_TENSORS.get(key)
    if held is None:
        if a.base is not None:
            a = a.copy()
        a.flags.writeable = False
        held = _SMALL_TENSORS.file(key, a)
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
        names = set(node.inputs) | _subgraph_outer_names(node) if node.attrs and node.has_subgraph else node.inputs
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


_OUTER_NAMES: dict = {}     # serialized GraphProto -> its outer names (frozenset)
_OUTER_NAMES_MAX_BYTES = 1 << 21     # the keys held, in all (cleared past it)
_OUTER_NAMES_HELD = 0


def graph_outer_names(g) -> set:
    """The names graph `g` (a subgraph body) reads from enclosing scopes. Worked out once per distinct body (keyed by
    its bytes, so an edited body is worked out again; at most 2 MB of keys held): the passes and partition ask it of
    the same If / Loop / ShapeSubgraph bodies for every walk over the graph's readers."""
    global _OUTER_NAMES_HELD
    size = g.ByteSize()
    if size > _OUTER_NAMES_MAX_BYTES:        # (a large body, weights inside: not held as a key)
        return _graph_outer_names(g)
    key = g.SerializeToString()
    names = _OUTER_NAMES.get(key)
    if names is None:
        if _OUTER_NAMES_HELD + size > _OUTER_NAMES_MAX_BYTES:
            _OUTER_NAMES.clear()
            _OUTER_NAMES_HELD = 0
        names = _OUTER_NAMES[key] = frozenset(_graph_outer_names(g))
        _OUTER_NAMES_HELD += size
    return set(names)


def _graph_outer_names(g) -> set:
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


def build_graph(model: onnx.ModelProto, infer_shapes: bool = True, weights: dict | None = None) -> Graph:
    """Shape inference, attribute decoding, topological order. infer_shapes=False trusts the model's value_info (an
    EPContext model written by onnxep carries every type the session needs). `weights`: the arrays load_model read
    outside the message (name -> array) for initializers it left without data; the Graph takes them as they are."""
    # onnx's checker is stricter than onnxruntime (e.g. it requires a shape on every graph output), so it only
    # refuses what no backend could run: a model whose opset this onnx does not know.
    if model.ir_version > onnx.IR_VERSION:
        raise InvalidGraph(f"unsupported model IR version {model.ir_version}: the installed onnx {onnx.__version__} "
                           f"knows up to IR version {onnx.IR_VERSION}")
    known = onnx.defs.onnx_opset_version()
    for o in model.opset_import[:]:
        if o.domain in ("", "ai.onnx") and o.version > known:
            raise InvalidGraph(f"the model imports opset {o.version} of the default domain; the installed onnx "
                               f"{onnx.__version__} knows up to {known}")
    if not model.HasField("graph"):
        raise InvalidGraph("the model has no graph")
    weights = weights or {}
    inferred = None
    own = _value_types(model.graph)      # the types the model writes (all that is needed when it types every value)
    if infer_shapes and _fully_typed(model, own):
        infer_shapes = False     # (what inference would add, the exporter wrote: torch's dynamo exporter does)
    # a plain convnet's types worked out on the decoded nodes below, as onnx's inference would (graph/infer_local.py)
    g = model.graph
    local = infer_shapes and not g.value_info and not g.sparse_initializer and infer_local.candidate(g.node)
    if infer_shapes and not local:
        inferred = _onnx_inferred(model)
    opsets = {o.domain if o.domain != "ai.onnx" else "": o.version for o in model.opset_import[:]}
    if "" not in opsets and model.ir_version < 3:
        opsets[""] = 1
    typed = inferred.graph if inferred is not None else g
    value_types = own if inferred is None else _value_types(typed)
    del own
    # subgraph attributes (If / Loop / Scan bodies) as inference annotated them: the value_info onnx infers inside a
    # body (its untyped inputs typed from the enclosing node) is what the body's own graph is built from later
    # (looked up for the nodes that have one, while the nodes are decoded)
    typed_nodes = typed.node if inferred is not None and len(typed.node) == len(g.node) else None
    initializers = {}
    for t in g.initializer[:]:
        name = sys.intern(t.name)
        held = weights.get(name)
        if held is not None and not t.HasField("raw_data"):      # one load_model read outside the message
            initializers[name] = held
            continue
        try:
            initializers[name] = _tensor_array(t)
        except Exception as e:
            raise InvalidGraph(f"initializer {t.name!r} cannot be read: {e}") from None
    for st in g.sparse_initializer[:]:
        try:
            dense = _sparse_to_dense(st)
        except Exception as e:
            raise InvalidGraph(f"sparse initializer {st.values.name!r} cannot be read: {e}") from None
        initializers[st.values.name] = dense
    for name, arr in initializers.items():
        if name not in value_types and isinstance(arr, np.ndarray) and arr.dtype != object:
            value_types[name] = ValueType.of_array(arr)
    input_names = [i.name for i in g.input[:]]
    inputs = [(n, value_types.get(n, ValueType())) for n in input_names if n not in initializers]
    # As in onnxruntime: before IR version 4 every initializer is also listed as a graph input, and none of them can be
    # overridden (they are constants); from IR 4 on, an initializer listed as an input is a default the caller may
    # override.
    overridable = [(n, value_types.get(n, ValueType())) for n in input_names
                   if n in initializers and model.ir_version >= 4]
    outputs = [(o.name, value_types.get(o.name, ValueType())) for o in g.output[:]]
    nodes = []
    for i, n in enumerate(g.node[:]):
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1 and n.output[0] \
                and len(n.attribute) == 1 and n.attribute[0].name == "value" and n.attribute[0].type == _ATTR_TENSOR:
            # a Constant holding a tensor is an initializer, as onnxruntime's graph makes it at load: no node to
            # decode, order, fold or run (a torch export carries one for every scalar and shape, half its nodes)
            try:
                v = _tensor_array(n.attribute[0].t)
            except Exception as e:
                raise InvalidGraph(f"Constant node {n.name or n.op_type + '_' + str(i)!r}: its value cannot be "
                                   f"read: {e}") from None
            if v.dtype != object:
                name = sys.intern(n.output[0])
                initializers[name] = v
                if name not in value_types:
                    value_types[name] = ValueType.of_array(v)
                continue
        attrs = {sys.intern(a.name): _attr_value(a) for a in n.attribute[:]}
        domain = n.domain if n.domain != "ai.onnx" else ""
        node = Node(sys.intern(n.name or f"{n.op_type}_{i}"), sys.intern(n.op_type), sys.intern(domain),
                    tuple(map(sys.intern, n.input[:])), tuple(map(sys.intern, n.output[:])), attrs, opsets.get(domain, 0))
        if typed_nodes is not None and attrs and node.has_subgraph:
            attrs.update({sys.intern(a.name): _attr_value(a) for a in typed_nodes[i].attribute
                          if a.type in _GRAPH_KINDS})
        nodes.append(decode_bodies(node) if domain else node)
    del typed_nodes, typed, inferred
    if local:
        # (an initializer that is also a graph input: onnx's, whose type onnx reads from where it reads it)
        types = None if any(n in initializers for n in input_names) else \
            infer_local.infer_types(nodes, value_types, input_names, [o.name for o in g.output[:]])
        if types is None:      # outside what infer_local works out: onnx's inference, as for any other model
            inferred = _onnx_inferred(model)
            types = _value_types(inferred.graph) if inferred is not None else value_types
            for name, arr in initializers.items():
                if name not in types and isinstance(arr, np.ndarray) and arr.dtype != object:
                    types[name] = ValueType.of_array(arr)
            del inferred
        value_types = types
        outputs = [(o.name, value_types.get(o.name, ValueType())) for o in g.output[:]]
    nodes = _topological(nodes)
    _check_type_bindings(nodes, value_types)
    meta = {
        "producer_name": model.producer_name, "graph_name": g.name, "domain": model.domain,
        "description": model.doc_string, "graph_description": g.doc_string, "version": model.model_version,
        "custom_metadata_map": {p.key: p.value for p in model.metadata_props[:]},
    }
    return Graph(nodes, inputs, outputs, initializers, overridable, value_types, opsets, model.ir_version,
                 model.functions[:], meta)


def _onnx_inferred(model: onnx.ModelProto):
    """onnx's shape inference of `model` (a ModelProto whose value_info types every value it could), or None when it
    fails."""
    try:
        # onnx's inference serializes the model it is given and parses the result back: it gets a copy whose
        # large initializers carry their type and dims but no data (what the types of the values after them
        # depend on; a shape input is never that large)
        light = _without_weight_data(model)
        # data_prop=False: with data propagation onnx materialises constant shapes, and a tiny model can make it
        # allocate terabytes (ConstantOfShape([2**40]))
        if any(o.domain == ML for o in model.opset_import[:]):
            return complete_types(light)        # onnx leaves some ai.onnx.ml outputs untyped
        return onnx.shape_inference.infer_shapes(light, check_type=False, strict_mode=False, data_prop=False)
    except Exception:
        return None


def _value_types(g) -> dict:
    """value name -> ValueType, from the value_info, inputs and outputs of GraphProto `g` that carry a type."""
    value_types = {}
    for vi in itertools.chain(g.value_info, g.input, g.output):     # one message wrapper alive at a time
        if vi.HasField("type"):
            tp = vi.type
            value_types[sys.intern(vi.name)] = ValueType.from_proto_bytes(tp.SerializeToString(), tp)
    return value_types


def _fully_typed(model: onnx.ModelProto, types: dict | None = None) -> bool:
    """Whether the main graph already types every value shape inference would: each node output (and graph input and
    output) has a tensor type with an element type and a rank, and no node has a subgraph (inference also types the
    bodies) or belongs to ai.onnx.ml (complete_types fills those). Then onnx's inference, which serializes the model
    and parses it back, would hand back what the model carries: on torch's dynamo exports it names the dims the
    exporter left unknown (unk__N), nothing more."""
    g = model.graph
    if any(o.domain == ML for o in model.opset_import[:]):
        return False
    if types is not None:     # (_value_types(g): a name typed twice counts by its last type -- at most a "no")
        complete = {name for name, vt in types.items()
                    if vt.kind == "tensor" and vt.elem_type and vt.shape is not None}
    else:
        complete = set()
        for vi in itertools.chain(g.value_info, g.input, g.output):
            tp = vi.type
            if tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.elem_type \
                    and tp.tensor_type.HasField("shape"):
                complete.add(vi.name)
    inits = {t.name for t in g.initializer[:]}
    if any(i.name not in complete and i.name not in inits for i in g.input[:]):
        return False
    for n in g.node[:]:
        for a in n.attribute[:]:
            if a.type in _GRAPH_KINDS:
                return False
        for o in n.output[:]:
            if o and o not in complete:
                return False
    return all(o.name in complete for o in g.output[:])


def check_graph(model: onnx.ModelProto) -> None:
    """(The session calls it on the model it loads; not build_graph, which also builds subgraph bodies, whose outputs
    may name one value twice.) What onnxruntime refuses when it loads a model, refused here with the same error types and the node and
    attribute named: a value defined twice (a repeated graph input, a node output that is also an input or another
    node's output: Fail, "Duplicate definition-site"), a graph output listed twice (InvalidGraph; onnxruntime runs such
    a graph and hands the output out twice), and per node of the default and ai.onnx.ml domains its op schema's rules
    (InvalidGraph): input and output counts, attribute types, unknown and missing required attributes -- the part of
    onnx's checker onnxruntime applies (its full check also wants a shape on every output, which onnxruntime does
    not)."""
    g = model.graph
    opsets = {o.domain if o.domain != "ai.onnx" else "": o.version for o in model.opset_import[:]}
    if "" not in opsets and model.ir_version < 3:
        opsets[""] = 1
    defined = {t.name for t in g.initializer[:]}
    inits = set(defined)
    seen = set()
    for vi in g.input[:]:
        if vi.name in seen:
            raise Fail(f"Error: Duplicate definition-site for ({vi.name}): graph input {vi.name!r} is listed twice")
        seen.add(vi.name)
    defined |= seen
    outs = {}
    for k, vi in enumerate(g.output[:]):
        if vi.name in outs:
            raise InvalidGraph(f"graph output {vi.name!r} is listed twice (outputs {outs[vi.name]} and {k}): each "
                               f"graph output is one value, named once")
        outs[vi.name] = k
    for i, n in enumerate(g.node[:]):
        for o in n.output[:]:
            if not o:
                continue
            if o in defined:
                what = ("a graph input" if o in seen and o not in inits else "an initializer" if o in inits
                        else "another node's output")
                raise Fail(f"Error: Duplicate definition-site for ({o}): node {n.name or n.op_type + '_' + str(i)!r} "
                           f"({n.op_type}) writes {o!r}, which is already {what}")
            defined.add(o)
    _check_nodes(g, opsets)


#: the domains whose schemas onnx carries and onnxruntime checks nodes against
_SCHEMA_DOMAINS = frozenset({"", "ai.onnx.ml", "ai.onnx.preview.training"})


def _rules(domain, op, version):
    """The schema facts _check_nodes reads (graph/schema_facts.py: onnx's registry stays unloaded), or None (no schema
    onnx knows, or a deprecated one)."""
    r = schema_facts(op, version, domain)
    return None if r is None or r.deprecated else r
_GRAPH_ATTR, _GRAPHS_ATTR = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS


#: what _check_nodes found valid: (domain, op type, opset, input count, output count, ((attribute name, type), ...)).
#: A node's checks read only these, so a node of a signature seen valid is (a model repeats a few signatures).
_VALID: set = set()
_VALID_MAX = 1 << 14


def _check_nodes(g, opsets) -> None:
    """Each node of `g` (and of its subgraphs) against its op schema: onnxruntime's load-time checks."""
    for i, n in enumerate(g.node[:]):
        domain = n.domain
        if domain == "ai.onnx":
            domain = ""
        attributes = n.attribute[:]
        sig = []
        for a in attributes:
            t = a.type
            if t == _GRAPH_ATTR:
                _check_nodes(a.g, opsets)
            elif t == _GRAPHS_ATTR:
                for sub in a.graphs:
                    _check_nodes(sub, opsets)
            sig.append((a.name, t))
        version = opsets.get(domain)
        if version is None or domain not in _SCHEMA_DOMAINS:
            continue
        key = (domain, n.op_type, version, len(n.input), len(n.output), tuple(sig))
        if key in _VALID:
            continue
        r = _rules(domain, n.op_type, version)
        if r is None:
            continue
        k_in, k_out = len(n.input), len(n.output)
        lo, hi = r.inputs
        lo_out, hi_out = r.outputs
        if not lo <= k_in <= hi:
            raise InvalidGraph(f"This is an invalid model. In {_where(n, i, domain, r)}: has input size {k_in} not in "
                               f"range [min={lo}, max={hi}]")
        if not lo_out <= k_out <= hi_out:
            raise InvalidGraph(f"This is an invalid model. In {_where(n, i, domain, r)}: has output size {k_out} not "
                               f"in range [min={lo_out}, max={hi_out}]")
        attrs = r.attrs
        for a in attributes:
            want = attrs.get(a.name)
            if want is None:
                raise InvalidGraph(f"This is an invalid model. In {_where(n, i, domain, r)}: Unrecognized attribute: "
                                   f"{a.name!r} (the schema's attributes are {sorted(attrs)})")
            if a.type and a.type != want and not a.ref_attr_name:
                raise InvalidGraph(f"This is an invalid model. In {_where(n, i, domain, r)}: Mismatched attribute "
                                   f"type in '{n.name or n.op_type + '_' + str(i)} : {a.name}'. Expected: "
                                   f"'{_ATTR_TYPE_NAMES.get(want, want)}', actual: "
                                   f"'{_ATTR_TYPE_NAMES.get(a.type, a.type)}'")
        if r.required:
            have = {a.name for a in attributes}
            for name in r.required:
                if name not in have:
                    raise InvalidGraph(f"This is an invalid model. In {_where(n, i, domain, r)}: Required attribute "
                                       f"{name!r} is missing")
        if all(not t or t == attrs[name] for name, t in sig):     # (not valid by a ref_attr_name: not by signature)
            if len(_VALID) >= _VALID_MAX:
                _VALID.clear()
            _VALID.add(key)


_BINDINGS: dict = {}     # (domain, op type, opset) -> ((param, ((is_output, position), ...)), ...): two or more each


def _binding_plan(domain: str, op_type: str, opset: int) -> tuple:
    """The formal inputs / outputs of the op's schema that share a type parameter, for _check_type_bindings: each
    parameter bound at least twice, with the positions bound to it (a variadic formal's left out)."""
    key = (domain, op_type, opset)
    plan = _BINDINGS.get(key)
    if plan is None:
        f = schema_facts(op_type, opset, domain) if domain in _SCHEMA_DOMAINS else None
        groups = {}
        if f is not None:
            for is_out, formal, variadic in ((False, f.input_types, f.inputs[1] > len(f.input_types)),
                                             (True, f.output_types, f.outputs[1] > len(f.output_types))):
                for j, param in enumerate(formal[:len(formal) - 1 if variadic else len(formal)]):
                    if not param.startswith("tensor("):
                        groups.setdefault(param, []).append((is_out, j))
        plan = tuple((p, tuple(pos)) for p, pos in groups.items() if len(pos) > 1)
        if len(_BINDINGS) >= _VALID_MAX:
            _BINDINGS.clear()
        _BINDINGS[key] = plan
    return plan


def _check_type_bindings(nodes, value_types: dict) -> None:
    """onnxruntime's load-time check that every input and output a schema binds to one type parameter (Gemm's A, B and
    C to T) has one type, where the types are known: a float64 weight into a float32 Gemm is refused here, with the
    values named, instead of failing (or upcasting) when it runs. A variadic formal's values are not checked against
    each other: the schema table does not say which variadic parameters are homogeneous (Loop's V is not)."""
    for n in nodes:
        for param, positions in _binding_plan(n.domain, n.op_type, n.opset):
            seen = None
            for is_out, j in positions:
                names = n.outputs if is_out else n.inputs
                vt = value_types.get(names[j]) if j < len(names) and names[j] else None
                if vt is None or vt.kind != "tensor" or vt.type_str == "unknown":
                    continue
                if seen is None:
                    seen = (vt.type_str, names[j])
                elif seen[0] != vt.type_str:
                    raise Fail(f"Type Error: Type parameter ({param}) of Optype ({n.op_type}) bound to different types "
                               f"({seen[0]} of {seen[1]!r} and {vt.type_str} of {names[j]!r}) in node ({n.name}).")


def _where(n, i, domain, r) -> str:
    name = n.name or f"{n.op_type}_{i}"
    return f"node {name!r} ({n.op_type}, schema {domain or 'ai.onnx'}::{n.op_type}:{r.since})"


_ATTR_TYPE_NAMES = {v: k for k, v in onnx.AttributeProto.AttributeType.items()}


def _without_weight_data(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` itself when no initializer of its main graph carries STRIPPED_BYTES or more of data; else a copy of
    what shape inference reads (IR version, opsets, local functions, the graph's nodes, inputs, outputs, value_info and
    initializers) whose large initializers keep name, type and dims only. onnx's inference reads an initializer's
    data only as an op's shape-like input (Reshape's shape, Slice's starts...), never kilobytes large."""
    g = model.graph
    if not any(t.ByteSize() >= STRIPPED_BYTES for t in g.initializer[:]):
        return model
    m = onnx.ModelProto()
    m.ir_version = model.ir_version
    m.opset_import.extend(model.opset_import)
    m.functions.extend(model.functions)
    lg = m.graph
    lg.name = g.name
    lg.node.extend(g.node)
    lg.input.extend(g.input)
    lg.output.extend(g.output)
    lg.value_info.extend(g.value_info)
    lg.sparse_initializer.extend(g.sparse_initializer)
    for t in g.initializer[:]:
        if t.ByteSize() >= STRIPPED_BYTES:
            lt = lg.initializer.add()
            lt.name = t.name
            lt.data_type = t.data_type
            lt.dims.extend(t.dims[:])
        else:
            lg.initializer.append(t)
    return m


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
