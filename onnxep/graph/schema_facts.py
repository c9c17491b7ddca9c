"""What onnxep reads of an op schema (node checks, attribute types and defaults, formal input / output types), without
loading onnx's schema registry when it need not.

onnx builds its whole registry -- every op of every domain -- the first time anything asks it for one schema: ~8 ms,
more than a warm session of a small convnet takes to create. Shape inference needs it; a model the exporter fully
typed (torch's dynamo exporter) skips inference, and then only these facts were asked of it. They come from
_schema_table.py, written by tools/gen_schema_table.py from the pinned onnx; with any other onnx installed, or for an
op the table does not hold (a schema registered at run time), from the registry itself."""
from __future__ import annotations

import bisect
import pickle

import onnx
from onnx import defs

_TABLE = None        # (domain, op type) -> its pickled schema rows; {} when the installed onnx is another version
_DOMAINS = frozenset()   # the domains the table holds: an op of one of them that it lacks has no schema
#: onnxep's own ops (written by the passes): onnx has no schema for them, and asking would load its registry
_NO_SCHEMA_DOMAINS = frozenset({"com.onnxep"})
_FACTS: dict = {}    # (domain, op type, opset) -> SchemaFacts, or None (no schema)


def schema_row(s) -> tuple:
    """An OpSchema as the table holds it: (since, deprecated, min_in, max_in, min_out, max_out, ((attribute, type,
    required, default), ...), formal input type strings, formal output type strings); a default is its
    AttributeProto's bytes, or None."""
    attrs = []
    for name, a in sorted(s.attributes.items()):
        d = a.default_value
        attrs.append((name, int(a.type.value), bool(a.required),
                      d.SerializeToString() if d is not None and d.type != 0 else None))
    return (s.since_version, bool(s.deprecated), s.min_input, s.max_input, s.min_output, s.max_output, tuple(attrs),
            tuple(f.type_str for f in s.inputs), tuple(f.type_str for f in s.outputs))


class SchemaFacts:
    """One op schema's facts (a table row), read once."""

    __slots__ = ("since", "deprecated", "inputs", "outputs", "attrs", "required", "_defaults", "input_types",
                 "output_types")

    def __init__(self, row):
        since, deprecated, min_in, max_in, min_out, max_out, attrs, input_types, output_types = row
        self.since = since
        self.deprecated = deprecated
        self.inputs = (min_in, max_in)
        self.outputs = (min_out, max_out)
        self.attrs = {name: kind for name, kind, _, _ in attrs}           # attribute name -> AttributeProto type
        self.required = tuple(name for name, _, required, _ in attrs if required)
        self._defaults = tuple((name, d) for name, _, _, d in attrs if d is not None)
        self.input_types = input_types        # the formal inputs' type strings ("T", "tensor(int64)", ...)
        self.output_types = output_types

    def defaults(self) -> dict:
        """attribute name -> the schema's default as a Python value (bytes decoded, a tensor as a numpy array)."""
        out = {}
        for name, raw in self._defaults:
            a = onnx.AttributeProto.FromString(raw)
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode()
            if a.type == onnx.AttributeProto.TENSOR:
                v = onnx.numpy_helper.to_array(v)
            out[name] = v
        return out


def _table() -> dict:
    global _TABLE, _DOMAINS
    if _TABLE is None:
        from onnxep.graph import _schema_table
        _TABLE = _schema_table.TABLE if _schema_table.ONNX_VERSION == onnx.__version__ else {}
        _DOMAINS = frozenset(d for d, _ in _TABLE)
    return _TABLE


def schema_facts(op_type: str, opset: int, domain: str = "") -> SchemaFacts | None:
    """The facts of the schema onnx.defs.get_schema(op_type, opset, domain) returns (the newest one whose since
    version is at most opset), or None when there is none."""
    if domain == "ai.onnx":
        domain = ""
    key = (domain, op_type, opset)
    f = _FACTS.get(key, _MISSING)
    if f is _MISSING:
        raw = _table().get((domain, op_type))
        row = None
        if raw is not None:
            rows = pickle.loads(raw)        # (the table's own bytes, written by tools/gen_schema_table.py)
            k = bisect.bisect_right([r[0] for r in rows], opset)
            row = rows[k - 1] if k else None
        elif domain not in _DOMAINS and domain not in _NO_SCHEMA_DOMAINS:     # (a schema registered at run time)
            try:
                row = schema_row(defs.get_schema(op_type, opset, domain))
            except Exception:      # (onnx.defs.SchemaError: no such op, or none that old)
                row = None
        f = _FACTS[key] = None if row is None else SchemaFacts(row)
    return f


_MISSING = object()
