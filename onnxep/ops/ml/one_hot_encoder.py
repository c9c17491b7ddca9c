import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import Table, one_of, output


class OneHotEncoder_1(OpKernel):
    """Y := X.shape + [number of categories] float32, 1 at each value's category. Numbers are truncated to int64 and
    looked up in cats_int64s, strings in cats_strings. An unknown value gives a row of zeros when zeros=1, else an
    error."""

    domain, op_type, since = "ai.onnx.ml", "OneHotEncoder", 1
    type_constraints = {"T": ("string", "int64", "int32", "float32", "float64")}
    cats_int64s = cats_strings = None

    @classmethod
    def supports(cls, op):
        return one_of(op, "cats_int64s", "cats_strings")

    def __init__(self, info):
        super().__init__(info)
        cats = self.cats_int64s if self.cats_int64s else self.cats_strings
        self._strings = not self.cats_int64s
        self._n = len(cats)
        keys = np.asarray(cats, object if self._strings else np.int64)
        self._table = Table(keys, np.arange(self._n), first=False)

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"OneHotEncoder node {self.name!r}"
        if (x.dtype == object) != self._strings:
            raise InvalidArgument(f"{what}: a {x.dtype} input needs cats_{'strings' if x.dtype == object else 'int64s'}")
        xk = x if self._strings else (x.astype(np.int64) if x.dtype.kind == "f" else x.astype(np.int64, copy=False))
        if x.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                xk = x.astype(np.int64)
        found, pos = self._table.lookup(xk)
        if not self.zeros and not found.all():
            raise InvalidArgument(f"{what}: unknown category and zeros = 0")
        y = output(ctx, 0, x.shape + (self._n,), np.float32, what)
        y[...] = 0
        y2 = y.reshape(-1, self._n)
        f = found.reshape(-1)
        rows = np.flatnonzero(f)
        y2[rows, pos.reshape(-1)[rows]] = 1
