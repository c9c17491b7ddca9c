import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops._data import DATA_TYPES
from onnxep.ops.tensor._helpers import new_output

_KINDS = ("value", "value_float", "value_floats", "value_int", "value_ints", "value_string", "value_strings")


def _value(attrs):
    """The constant as an array (strings as an object array of str), or None for sparse_value."""
    present = [k for k in attrs if attrs.get(k) is not None]
    if len(present) != 1 or present[0] not in _KINDS:
        return None
    k = present[0]
    v = attrs[k]
    if k == "value":
        if isinstance(v, np.ndarray) and v.dtype.hasobject:   # a string tensor: its bytes decoded
            return np.vectorize(lambda b: b.decode() if isinstance(b, bytes) else b, otypes=[object])(v)
        return v if isinstance(v, np.ndarray) and v.dtype.name in DATA_TYPES else None
    if k.startswith("value_string"):
        return np.array([b.decode() if isinstance(b, bytes) else b for b in np.atleast_1d(v)], object).reshape(
            np.shape(v))
    return np.asarray(v, np.float32 if k.startswith("value_float") else np.int64)


class Constant_1(OpKernel):
    """Y := the value attribute (value, value_float(s), value_int(s), value_string(s); sparse_value goes to the
    reference backend) (opsets 1, 9, 11, 12, 13, 19, 21). Copied into a fresh output each run."""

    domain, op_type, since = "", "Constant", 1

    @classmethod
    def supports(cls, op):
        return _value(op.node.attrs) is not None

    def __init__(self, info):
        super().__init__(info)
        self._value = _value(info.attrs)

    def compute(self, ctx):
        v = self._value
        y = new_output(ctx, 0, v.shape, v.dtype, f"Constant node {self.name!r}") if v.dtype.hasobject else \
            ctx.output(0, v.shape, v.dtype)
        np.copyto(y, v)
