"""Plain data structures passed between pipeline stages: Node, ValueType, Graph, OpInfo."""
from __future__ import annotations

import sys
import weakref
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_GraphProto = onnx.GraphProto

_ELEM_NAMES = {
    TensorProto.FLOAT: "float", TensorProto.UINT8: "uint8", TensorProto.INT8: "int8", TensorProto.UINT16: "uint16",
    TensorProto.INT16: "int16", TensorProto.INT32: "int32", TensorProto.INT64: "int64", TensorProto.STRING: "string",
    TensorProto.BOOL: "bool", TensorProto.FLOAT16: "float16", TensorProto.DOUBLE: "double",
    TensorProto.UINT32: "uint32", TensorProto.UINT64: "uint64", TensorProto.COMPLEX64: "complex64",
    TensorProto.COMPLEX128: "complex128", TensorProto.BFLOAT16: "bfloat16",
}
for _name in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "UINT4", "INT4", "FLOAT4E2M1",
              "FLOAT8E8M0", "UINT2", "INT2"):
    if hasattr(TensorProto, _name):
        _ELEM_NAMES[getattr(TensorProto, _name)] = _name.lower()


def elem_numpy_dtype(elem_type: int):
    """numpy dtype of an ONNX element type, or None when numpy has no native equivalent."""
    if elem_type in (TensorProto.STRING,):
        return np.dtype(object)
    try:
        dt = np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except Exception:
        return None
    return dt


def type_string(tp) -> str:
    """onnxruntime's NodeArg.type string for an onnx TypeProto: tensor(float), seq(tensor(int64)), ..."""
    which = tp.WhichOneof("value") if tp is not None else None
    if which == "tensor_type":
        return f"tensor({_ELEM_NAMES.get(tp.tensor_type.elem_type, 'undefined')})"
    if which == "sparse_tensor_type":
        return f"sparse_tensor({_ELEM_NAMES.get(tp.sparse_tensor_type.elem_type, 'undefined')})"
    if which == "sequence_type":
        return f"seq({type_string(tp.sequence_type.elem_type)})"
    if which == "map_type":
        return f"map({_ELEM_NAMES.get(tp.map_type.key_type, 'undefined')},{type_string(tp.map_type.value_type)})"
    if which == "optional_type":
        return f"optional({type_string(tp.optional_type.elem_type)})"
    return "unknown"


@dataclass(slots=True, frozen=True, weakref_slot=True)
class ValueType:
    """What is known statically about one value. Slotted and lean: every kernel keeps the ValueTypes of its inputs
    and outputs (KernelInfo) for the session's lifetime. Frozen, so hashable and safe to share: from_proto and
    of_array hand out one live object per distinct type (`_held`), and sessions on one container share the tuples of
    them their kernels keep (PrePackedWeightsContainer.share_immutable)."""

    kind: str = "unknown"                 # tensor | sparse_tensor | sequence | map | optional | unknown
    elem_type: int = 0                    # ONNX element type for tensors (0: unknown)
    shape: tuple | None = None            # dims: int, str (symbolic) or None (unknown); None: rank unknown
    type_str: str = "unknown"             # interned (one object per distinct string, not one per value)
    # The onnx TypeProto, serialized, when the fields above do not give it back: non-tensor kinds, denotations (b"":
    # a tensor's is make_tensor_type_proto(elem_type, shape)). Never the message itself: with protobuf's upb backend
    # a sub-message (a value_info's type) keeps its whole parsed model alive -- a session's kernels hold ValueTypes,
    # so every session pinned its ModelProto and shape-inferred model (~3 MB for DenseNet-121) -- and a standalone
    # message costs ~1.5 KB of arena.
    proto_bytes: bytes = b""
    #: the hash of the fields above, worked out once: the kernels' tuples of ValueTypes are hashed for every node of
    #: every session (PrePackedWeightsContainer.share_immutable)
    _hash: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_hash", hash((self.kind, self.elem_type, self.shape, self.type_str, self.proto_bytes)))

    def __hash__(self):
        return self._hash

    def __reduce__(self):       # (pickle / copy: made again, its hash worked out in the process that loads it)
        return ValueType, (self.kind, self.elem_type, self.shape, self.type_str, self.proto_bytes)

    @property
    def proto(self):
        """The onnx TypeProto (a fresh message each call; None when unknown), for the reference backend, NodeArg and
        EPContext export."""
        if self.proto_bytes:
            return onnx.TypeProto.FromString(self.proto_bytes)
        if self.kind == "tensor":
            return helper.make_tensor_type_proto(self.elem_type, self.shape)
        return None

    @property
    def dtype(self):
        return elem_numpy_dtype(self.elem_type) if self.kind == "tensor" and self.elem_type else None

    @staticmethod
    def from_proto(tp) -> "ValueType":
        if tp is None:
            return ValueType()
        which = tp.WhichOneof("value")
        if which == "tensor_type":
            tt = tp.tensor_type
            # the fields say it all (proto_bytes b""; `proto` makes the same message) unless the message has
            # denotations, no element type, or a dim whose dim_param is set but empty
            plain = not tp.denotation and tt.HasField("elem_type")
            shape = None
            if tt.HasField("shape"):
                dims = []
                for d in tt.shape.dim:
                    w = d.WhichOneof("value")
                    if w == "dim_value":
                        dims.append(d.dim_value)
                    else:
                        p = d.dim_param if w is not None else ""
                        dims.append(p or None)
                        if w is not None and not p:
                            plain = False
                    if d.denotation:
                        plain = False
                shape = tuple(dims)
            elem = tt.elem_type
            return _held(("tensor", elem, shape, sys.intern(f"tensor({_ELEM_NAMES.get(elem, 'undefined')})"),
                          b"" if plain else tp.SerializeToString()))
        raw = tp.SerializeToString()
        kind = {"sequence_type": "sequence", "map_type": "map", "optional_type": "optional",
                "sparse_tensor_type": "sparse_tensor"}.get(which, "unknown")
        return _held((kind, 0, None, sys.intern(type_string(tp)), raw))

    @staticmethod
    def from_proto_bytes(raw: bytes, tp=None) -> "ValueType":
        """from_proto of the TypeProto serialized as `raw` (`tp`: that message, when the caller has it), a plain
        tensor type decoded from the bytes themselves: reading a dim through protobuf's message API costs a wrapper
        object per field (~5 us per value of a torch export's value_info, which types every value); anything but
        the plain tensor fields (a denotation, another kind, a malformed or unusual encoding) goes to from_proto."""
        vt = _BY_BYTES.get(raw)
        if vt is not None:
            return vt
        fields = _tensor_fields(raw)
        if fields is None:
            vt = ValueType.from_proto(tp if tp is not None else onnx.TypeProto.FromString(raw))
        else:
            elem, shape, plain = fields
            vt = _held(("tensor", elem, shape, sys.intern(f"tensor({_ELEM_NAMES.get(elem, 'undefined')})"),
                        b"" if plain else raw))
        if len(_BY_BYTES) >= _BY_BYTES_MAX:
            _BY_BYTES.clear()
        _BY_BYTES[raw] = vt
        return vt

    @staticmethod
    def of_tensor(elem_type: int, dims) -> "ValueType":
        """from_proto(helper.make_tensor_type_proto(elem_type, dims)) without the message: dims are ints, non-empty
        strs (symbolic) or None (unknown); dims None: rank unknown. The passes make one per value they add."""
        shape = None
        if dims is not None:
            shape = tuple(dims)
            if not all(d is None or type(d) is int or (type(d) is str and d) for d in shape):
                return ValueType.from_proto(helper.make_tensor_type_proto(elem_type, dims))
        return _held(("tensor", elem_type, shape, _tensor_str(elem_type), b""))

    @staticmethod
    def of_array(a: np.ndarray) -> "ValueType":
        dtype = a.dtype
        elem = _DTYPE_ELEMS.get(dtype)
        if elem is None:        # (onnx's np_dtype_to_tensor_dtype is ~1.5 us of Python per call: once per dtype)
            elem = _DTYPE_ELEMS[dtype] = helper.np_dtype_to_tensor_dtype(dtype)
        return _held(("tensor", elem, a.shape, _tensor_str(elem), b""))


_DTYPE_ELEMS: dict = {}      # numpy dtype -> ONNX element type
_TENSOR_STRS: dict = {}      # ONNX element type -> "tensor(<name>)", interned


def _tensor_str(elem) -> str:
    s = _TENSOR_STRS.get(elem)
    if s is None:
        s = _TENSOR_STRS[elem] = sys.intern(f"tensor({_ELEM_NAMES.get(elem, 'undefined')})")
    return s


def _varint(b, i):
    """(the protobuf varint at b[i], the index after it); IndexError past the end, ValueError beyond 64 bits"""
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        if c < 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _tensor_fields(raw: bytes):
    """(elem_type, shape, plain) of a TypeProto encoding holding a tensor_type with only elem_type and a shape of
    dims (dim_value / dim_param, each at most once), as from_proto reads them; None for any other encoding."""
    try:
        n = len(raw)
        if n < 2 or raw[0] != 0x0A:             # field 1 (tensor_type), length-delimited, first and only
            return None
        ln, i = _varint(raw, 1)
        if i + ln != n:
            return None
        elem, shape, plain = 0, None, False
        while i < n:
            tag = raw[i]
            if tag == 0x08:                     # elem_type
                elem, i = _varint(raw, i + 1)
                if elem >= 1 << 31:
                    return None
                plain = True
            elif tag == 0x12 and shape is None:     # shape
                ln, i = _varint(raw, i + 1)
                end = i + ln
                dims = []
                while i < end:
                    if raw[i] != 0x0A:          # dim
                        return None
                    ln, i = _varint(raw, i + 1)
                    dend = i + ln
                    d = None
                    seen = False
                    while i < dend:
                        t = raw[i]
                        if seen:
                            return None
                        seen = True
                        if t == 0x08:           # dim_value (int64)
                            d, i = _varint(raw, i + 1)
                            if d >= 1 << 63:
                                d -= 1 << 64
                        elif t == 0x12:         # dim_param
                            ln, i = _varint(raw, i + 1)
                            p = raw[i:i + ln].decode("utf-8")
                            i += ln
                            if not p:
                                return None     # (set but empty: from_proto keeps the bytes)
                            d = sys.intern(p)
                        else:
                            return None
                    if i != dend:
                        return None
                    dims.append(d)
                if i != end:
                    return None
                shape = tuple(dims)
            else:
                return None
        return (elem, shape, plain) if i == n else None
    except (IndexError, ValueError, UnicodeDecodeError):
        return None


#: serialized TypeProto -> its ValueType, across sessions (a model's sessions, and models of one exporter, name the
#: same types): at most _BY_BYTES_MAX held, then cleared
_BY_BYTES: dict = {}
_BY_BYTES_MAX = 4096

class WeakIntern:
    """key -> the one live object filed under it (a weakref.WeakValueDictionary's get-or-file, without its
    Python-level get / setdefault / KeyedRef: ~2 us per call there, asked for every value type and small tensor of
    every session's graph). An entry goes when its object dies (its weakref's callback); `get` of a dead one's key
    answers None until the callback has run."""

    __slots__ = ("_refs",)

    def __init__(self):
        self._refs = {}

    def get(self, key):
        r = self._refs.get(key)
        return None if r is None else r()

    def file(self, key, obj):
        """The live object filed under key, else obj (filed from now on)."""
        refs = self._refs
        r = refs.get(key)
        held = None if r is None else r()
        if held is not None:
            return held

        def gone(ref, key=key, refs=refs):
            if refs.get(key) is ref:
                del refs[key]
        refs[key] = weakref.ref(obj, gone)
        return obj

    def __len__(self):
        return sum(1 for r in list(self._refs.values()) if r() is not None)


_HELD = WeakIntern()     # fields -> the ValueType every holder of those fields shares


def _held(fields) -> ValueType:
    """The one live ValueType with these fields: a model names a few distinct types for hundreds of values, and
    sessions of one model name the same ones (every kernel keeps its values' types: KernelInfo)."""
    vt = _HELD.get(fields)
    if vt is None:
        vt = _HELD.file(fields, ValueType(*fields))
    return vt


@dataclass(eq=False, slots=True)
class Node:
    """One node, attributes already decoded to Python values (subgraphs stay GraphProto)."""

    name: str
    op_type: str
    domain: str
    inputs: tuple
    outputs: tuple
    attrs: dict
    opset: int                              # version of the node's domain imported by the model

    @property
    def proto(self) -> onnx.NodeProto:
        """The NodeProto of the node's current fields (the reference backend, EPContext export and
        optimized_model_filepath take nodes as protos). Built when asked, not held: a session holds every node of its
        graph while the graph is built and optimized, and what it holds then is the high-water mark of small Python
        objects its creation leaves behind; nor can a held proto go stale when a pass edits the node."""
        n = onnx.NodeProto()
        n.name, n.op_type, n.domain = self.name, self.op_type, self.domain
        n.input.extend(self.inputs)
        n.output.extend(self.outputs)
        n.attribute.extend(attribute_proto(k, v, self) for k, v in self.attrs.items() if v is not None)
        return n

    @property
    def subgraphs(self) -> list:
        """The GraphProto attributes (If/Loop/Scan bodies)."""
        out = []
        for v in self.attrs.values():
            if type(v) is list:        # (a list attribute holds one kind: graphs when its first one is)
                if v and isinstance(v[0], _GraphProto):
                    out.extend(g for g in v if isinstance(g, _GraphProto))
            elif isinstance(v, _GraphProto):
                out.append(v)
        return out

    @property
    def has_subgraph(self) -> bool:
        for v in self.attrs.values():       # (exact types: asked of every node by several passes)
            t = type(v)
            if t is _GraphProto or (t is list and v and type(v[0]) is _GraphProto):
                return True
        return False


#: (domain, op type) -> the graph attributes that are Bodies (onnxep's own ops written by passes); a model or
#: EPContext blob holding such a node gets them as GraphProtos, which graph/model.py decode_bodies turns back
BODY_ATTRS = {("com.onnxep", "ShapeSubgraph"): ("body",)}


@dataclass(eq=False, slots=True)
class Body:
    """A graph attribute held as decoded Nodes, for onnxep's own ops whose bodies the passes write (ShapeSubgraph):
    its inputs are named as the node's inputs and it reads nothing else from the enclosing scope, so it is not a
    subgraph to the walks over readers (Node.has_subgraph). The pass hands the kernel its nodes and types as they are;
    the GraphProto is made only when the node is written out (Node.proto: EPContext export, optimized_model_filepath).
    """

    name: str
    nodes: tuple                    # Node, in order
    inputs: tuple                   # value names
    outputs: tuple
    types: dict                     # value name -> ValueType (inputs, outputs and the values in between it knows)

    @property
    def proto(self) -> onnx.GraphProto:
        def info(x):
            vt = self.types.get(x)
            tp = vt.proto if vt is not None else None
            if tp is None:
                return helper.make_empty_tensor_value_info(x)
            vi = onnx.ValueInfoProto()
            vi.name = x
            vi.type.CopyFrom(tp)
            return vi
        ends = set(self.inputs) | set(self.outputs)
        inner = sorted({o for n in self.nodes for o in n.outputs if o and o not in ends and o in self.types})
        g = helper.make_graph([n.proto for n in self.nodes], self.name, [info(x) for x in self.inputs],
                              [info(x) for x in self.outputs])
        g.value_info.extend(info(x) for x in inner)
        return g


def attribute_proto(name: str, value, node: Node) -> onnx.AttributeProto:
    """An AttributeProto from a decoded attribute value (the inverse of graph/model.py's _attr_value). An empty list
    carries no element type: it takes the one the node's op schema declares, else INTS."""
    if isinstance(value, np.ndarray):
        return helper.make_attribute(name, numpy_helper.from_array(value))
    if isinstance(value, Body):
        return helper.make_attribute(name, value.proto)
    if isinstance(value, str):
        return helper.make_attribute(name, value.encode("utf-8", errors="surrogateescape"))
    if isinstance(value, (list, tuple)):
        if not value:
            a = onnx.AttributeProto()
            a.name = name
            a.type = _schema_attr_type(node, name) or onnx.AttributeProto.INTS
            return a
        if isinstance(value[0], str):
            return helper.make_attribute(name, [v.encode("utf-8", errors="surrogateescape") for v in value])
        return helper.make_attribute(name, list(value))
    return helper.make_attribute(name, value)


def _schema_attr_type(node: Node, name: str) -> int:
    """The AttributeProto type the op schema of `node` declares for attribute `name` (0: no schema says)."""
    from onnxep.graph.schema_facts import schema_facts
    f = schema_facts(node.op_type, max(node.opset, 1), node.domain)      # (None: a custom domain, onnxep's own ops)
    return f.attrs.get(name, 0) if f is not None else 0


@dataclass
class Graph:
    """A loaded model after shape inference, nodes in topological order."""

    nodes: list
    inputs: list                            # [(name, ValueType)] required inputs (not initializers)
    outputs: list                           # [(name, ValueType)]
    initializers: dict                      # name -> np.ndarray (constants and overridable ones)
    overridable: list                       # [(name, ValueType)] initializers also listed as graph inputs
    value_types: dict                       # name -> ValueType for every value whose type is known
    opsets: dict                            # domain -> version
    ir_version: int
    functions: list = field(default_factory=list)   # model-local FunctionProto
    metadata: dict = field(default_factory=dict)

    @property
    def constants(self) -> dict:
        """Initializers a caller cannot override: `initializers` itself when none is overridable (the passes ask it
        again and again, and add to both when they make a constant), else a filtered copy."""
        if not self.overridable:
            return self.initializers
        over = {n for n, _ in self.overridable}
        return {k: v for k, v in self.initializers.items() if k not in over}


@dataclass
class OpInfo:
    """What a Device's supports_op sees of one node: the node, the types of its inputs/outputs, and its constant
    inputs (index -> array)."""

    node: Node
    input_types: list
    output_types: list
    constants: dict
