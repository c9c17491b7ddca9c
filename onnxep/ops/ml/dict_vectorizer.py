import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import map_types as _map_types, output

_VAL = {"int64": np.dtype(np.int64), "float": np.dtype(np.float32), "double": np.dtype(np.float64),
        "string": np.dtype(object)}


class DictVectorizer_1(OpKernel):
    """A map to a [1, len(vocabulary)] tensor: column i holds the value of the key vocabulary[i] (string_vocabulary
    or int64_vocabulary), 0 (or '' for strings) when the map lacks it."""

    domain, op_type, since = "ai.onnx.ml", "DictVectorizer", 1
    string_vocabulary = int64_vocabulary = None

    @classmethod
    def check_types(cls, op):
        vt = op.input_types[0] if op.input_types else None
        if vt is None or vt.kind != "map":
            return False
        inner = _map_types(vt.type_str)[4:-1].split(",")
        return len(inner) == 2 and inner[0] in ("string", "int64") and inner[1] in _VAL

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        vt = op.input_types[0]
        key = _map_types(vt.type_str)[4:-1].split(",")[0]
        return bool(a.get("string_vocabulary")) if key == "string" else bool(a.get("int64_vocabulary"))

    def __init__(self, info):
        super().__init__(info)
        key, val = _map_types(info.input_types[0].type_str)[4:-1].split(",")
        self._dtype = _VAL[val]
        self._strings = key == "string"
        vocab = self.string_vocabulary if self._strings else self.int64_vocabulary
        self._vocab = np.asarray(list(vocab), object) if self._strings else np.asarray(vocab, np.int64)

    def compute(self, ctx):
        m = ctx.input(0)
        what = f"DictVectorizer node {self.name!r}"
        if not isinstance(m, dict):
            raise InvalidArgument(f"{what}: X must be a map (dict), got {type(m).__name__}")
        y = output(ctx, 0, (1, len(self._vocab)), self._dtype, what)
        y[...] = "" if self._dtype == object else 0
        if not m:
            return
        try:
            keys = np.asarray(list(m.keys()), object if self._strings else np.int64)
            vals = np.asarray(list(m.values()), self._dtype)
        except (ValueError, TypeError) as e:
            raise InvalidArgument(f"{what}: the map's keys or values are not of its declared types: {e}") from None
        order = np.argsort(keys, kind="stable")
        keys, vals = keys[order], vals[order]
        pos = np.minimum(np.searchsorted(keys, self._vocab), len(keys) - 1)
        hit = np.asarray(keys[pos] == self._vocab, bool)
        y[0, hit] = vals[pos[hit]]
