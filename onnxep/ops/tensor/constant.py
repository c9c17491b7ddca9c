import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops._data import DATA_TYPES

_KINDS = ("value", "value_float", "value_floats", "value_int", "value_ints")


def _value(attrs):
    """The constant as an array, or None for kinds handled elsewhere (strings, sparse)."""
    present = [k for k in attrs if attrs.get(k) is not None]
    if len(present) != 1 or present[0] not in _KINDS:
        return None
    k = present[0]
    v = attrs[k]
    if k == "value":
        return v if isinstance(v, np.ndarray) and v.dtype.name in DATA_TYPES else None
    return np.asarray(v, np.float32 if k.startswith("value_float") else np.int64)


class Constant_1(OpKernel):
    """Y := the value attribute (value, value_float(s), value_int(s); strings and sparse_value go to the reference
    backend) (opsets 1, 9, 11, 12, 13, 19, 21). Copied into a fresh output each run."""

    domain, op_type, since = "", "Constant", 1

    @classmethod
    def supports(cls, op):
        return _value(op.node.attrs) is not None

    def __init__(self, info):
        super().__init__(info)
        self._value = _value(info.attrs)

    def compute(self, ctx):
        y = ctx.output(0, self._value.shape, self._value.dtype)
        np.copyto(y, self._value)
