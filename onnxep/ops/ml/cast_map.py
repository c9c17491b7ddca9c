import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import map_types as _map_types, output

_TO = {"TO_FLOAT": np.dtype(np.float32), "TO_INT64": np.dtype(np.int64), "TO_STRING": np.dtype(object)}


def _float_str(v):
    """C's std::to_string of a float: '%f'."""
    return "%f" % v


class CastMap_1(OpKernel):
    """A map int64 -> string | float to a [1, N] tensor of cast_to's type, its values in key order: DENSE (N = the
    map's size) or SPARSE (N = max_map, key k at column k, the rest padded with 0, or '0.f' for strings, as
    onnxruntime). Floats become strings as C's std::to_string ('%f'); strings parse as numbers."""

    domain, op_type, since = "ai.onnx.ml", "CastMap", 1

    @classmethod
    def check_types(cls, op):
        vt = op.input_types[0] if op.input_types else None
        return vt is not None and vt.kind == "map" and _map_types(vt.type_str) in (
            "map(int64,string)", "map(int64,float)")

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        return a.get("cast_to", "TO_FLOAT") in _TO and a.get("map_form", "DENSE") in ("DENSE", "SPARSE")

    def compute(self, ctx):
        m = ctx.input(0)
        what = f"CastMap node {self.name!r}"
        if not isinstance(m, dict):
            raise InvalidArgument(f"{what}: X must be a map (dict) int64 -> string or float, got {type(m).__name__}")
        keys = np.asarray(list(m.keys()), np.int64)
        vals = list(m.values())
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        strings = bool(vals) and isinstance(vals[0], (str, bytes))
        vals = np.asarray(vals, object if strings else np.float32)[order]
        dt = _TO[self.cast_to]
        try:
            if dt == object:
                conv = vals.astype(object) if strings else np.asarray([_float_str(v) for v in vals.tolist()], object)
            elif strings:
                conv = vals.astype(np.float64).astype(dt) if dt.kind == "f" else \
                    np.asarray([int(float(s)) if "." in s or "e" in s.lower() else int(s) for s in vals], np.int64)
            else:
                conv = vals.astype(dt)
        except (ValueError, TypeError) as e:
            raise InvalidArgument(f"{what}: cannot cast the map's values to {self.cast_to}: {e}") from None
        if self.map_form == "DENSE":
            y = output(ctx, 0, (1, len(keys)), dt, what)
            y[0, :] = conv
            return
        n = int(self.max_map)
        if len(keys) and keys[0] < 0:
            raise InvalidArgument(f"{what}: negative keys are not permitted in SPARSE form, got {keys[0]}")
        y = output(ctx, 0, (1, max(n, 0)), dt, what)
        y[...] = "0.f" if dt == object else 0
        sel = keys < n
        y[0, keys[sel]] = conv[sel]
