import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import Table, output

_NP = {"string": np.dtype(object), "int64": np.dtype(np.int64), "float32": np.dtype(np.float32),
       "int32": np.dtype(np.int32), "int16": np.dtype(np.int16), "float64": np.dtype(np.float64)}
_SUFFIX = {"string": "strings", "int64": "int64s", "float32": "floats"}


def _io_types(info):
    from onnxep.ops._base import _DTYPE_NAMES
    names = []
    for vts in (info.input_types, info.output_types):
        vt = vts[0] if vts else None
        names.append(_DTYPE_NAMES.get(vt.type_str) if vt is not None and vt.kind == "tensor" else None)
    return names


def _map(ctx, kernel, table, default, out_dtype):
    x = ctx.input(0)
    what = f"LabelEncoder node {kernel.name!r}"
    found, v = table.lookup(x)
    y = output(ctx, 0, x.shape, out_dtype, what)
    if out_dtype == object:
        y[...] = np.where(found, v, default)
    else:
        y[...] = np.where(found, v.astype(out_dtype, copy=False), np.asarray(default).astype(out_dtype))


class LabelEncoder_1(OpKernel):
    """string -> int64: the index of the string in classes_strings (the last one of duplicates), else default_int64;
    int64 -> string: classes_strings[i], else default_string."""

    domain, op_type, since = "ai.onnx.ml", "LabelEncoder", 1
    type_constraints = {"T1": ("string", "int64"), "T2": ("string", "int64")}
    classes_strings = None

    def __init__(self, info):
        super().__init__(info)
        classes = np.asarray(list(self.classes_strings or []), object)
        self._s2i = Table(classes, np.arange(len(classes), dtype=np.int64), first=False)
        self._i2s = Table(np.arange(len(classes), dtype=np.int64), classes)

    def compute(self, ctx):
        if ctx.input(0).dtype == object:
            _map(ctx, self, self._s2i, self.default_int64, np.dtype(np.int64))
        else:
            _map(ctx, self, self._i2s, self.default_string, np.dtype(object))


class LabelEncoder_2(OpKernel):
    """keys_* -> values_* (strings, int64s, floats; the first of duplicate keys wins), else default_<value type>."""

    domain, op_type, since = "ai.onnx.ml", "LabelEncoder", 2
    type_constraints = {"T1": ("string", "int64", "float32"), "T2": ("string", "int64", "float32")}
    nan_matches = False

    @classmethod
    def supports(cls, op):
        from onnxep.ops._base import _DTYPE_NAMES
        vi = op.input_types[0] if op.input_types else None
        vo = op.output_types[0] if op.output_types else None
        if vi is None or vo is None or vi.kind != "tensor" or vo.kind != "tensor":
            return False
        return _DTYPE_NAMES.get(vi.type_str) in _NP and _DTYPE_NAMES.get(vo.type_str) in _NP

    def _attr_values(self, kind, tname):
        suf = _SUFFIX.get(tname)
        v = getattr(self, f"{kind}_{suf}", None) if suf else None
        if v is None or (isinstance(v, (list, tuple)) and not v and getattr(self, f"{kind}_tensor", None) is not None):
            t = getattr(self, f"{kind}_tensor", None)
            if t is None:
                raise InvalidArgument(f"LabelEncoder node {self.name!r}: no {kind} attribute for type {tname}")
            return np.asarray(t).reshape(-1)
        return np.asarray(list(v), object) if tname == "string" else np.asarray(v, _NP[tname])

    def _default(self, tname):
        t = getattr(self, "default_tensor", None)
        if t is not None:
            t = np.asarray(t).reshape(-1)
            if t.size:
                v = t[0]
                return str(v) if tname == "string" else _NP[tname].type(v)
        if tname == "string":
            return self.default_string
        if tname in ("float32", "float64"):
            return _NP[tname].type(self.default_float)
        return _NP[tname].type(self.default_int64)

    def __init__(self, info):
        super().__init__(info)
        tin, tout = _io_types(info)
        self._out = _NP[tout]
        keys = self._attr_values("keys", tin).astype(_NP[tin])
        values = self._attr_values("values", tout)
        values = values.astype(object) if tout == "string" else values.astype(_NP[tout])
        if len(keys) != len(values):
            raise InvalidArgument(f"LabelEncoder node {self.name!r}: {len(keys)} keys but {len(values)} values")
        self._table = Table(keys, values, first=True, nan_matches=self.nan_matches)
        self._dflt = self._default(tout)

    def compute(self, ctx):
        _map(ctx, self, self._table, self._dflt, self._out)


class LabelEncoder_4(LabelEncoder_2):
    """As opset 2, plus keys_tensor / values_tensor / default_tensor and int16, int32, double; a NaN key matches NaN."""

    since = 4
    type_constraints = {"T1": tuple(_NP), "T2": tuple(_NP)}
    nan_matches = True
