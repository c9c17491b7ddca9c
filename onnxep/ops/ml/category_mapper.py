import numpy as np

from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import Table, output


class CategoryMapper_1(OpKernel):
    """string -> int64 (cats_strings[i] -> cats_int64s[i], else default_int64) or int64 -> string (the reverse, else
    default_string), elementwise."""

    domain, op_type, since = "ai.onnx.ml", "CategoryMapper", 1
    type_constraints = {"T1": ("string", "int64"), "T2": ("string", "int64")}
    cats_int64s = cats_strings = None

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        return len(a.get("cats_int64s") or ()) == len(a.get("cats_strings") or ())

    def __init__(self, info):
        super().__init__(info)
        ints = np.asarray(self.cats_int64s or [], np.int64)
        strs = np.asarray(list(self.cats_strings or []), object)
        self._s2i = Table(strs, ints)
        self._i2s = Table(ints, strs)

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"CategoryMapper node {self.name!r}"
        if x.dtype == object:
            found, v = self._s2i.lookup(x)
            y = output(ctx, 0, x.shape, np.int64, what)
            y[...] = np.where(found, v, np.int64(self.default_int64))
        else:
            found, v = self._i2s.lookup(x.astype(np.int64, copy=False))
            y = output(ctx, 0, x.shape, object, what)
            y[...] = np.where(found, v, self.default_string)
