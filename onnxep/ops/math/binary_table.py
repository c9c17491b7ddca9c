"""Binary elementwise ops that are one numpy ufunc each, with multidirectional broadcasting: the comparisons, the
logical and the bitwise ops. One class per row, <op>_<since> (ops/_registry.py registers each); a new schema version
that only widens the dtypes needs no new row (the class covers every later opset)."""
import numpy as np

from onnxep.ops.math._broadcast import legacy_operand
from onnxep.ops.math._numpy import ALL, FLOATS, INTS, NUMERIC, NumpyBinary, make_classes

_BOOL = np.dtype(bool)

#: (op, since, dtypes of T, {ufunc, out_dtype}); out_dtype None: T
TABLE = (
    ("Equal", 7, ALL + ("string",), {"ufunc": staticmethod(np.equal), "out_dtype": _BOOL}),
    ("Less", 7, NUMERIC, {"ufunc": staticmethod(np.less), "out_dtype": _BOOL}),
    ("LessOrEqual", 12, NUMERIC, {"ufunc": staticmethod(np.less_equal), "out_dtype": _BOOL}),
    ("Greater", 7, NUMERIC, {"ufunc": staticmethod(np.greater), "out_dtype": _BOOL}),
    ("GreaterOrEqual", 12, NUMERIC, {"ufunc": staticmethod(np.greater_equal), "out_dtype": _BOOL}),
    ("And", 7, ("bool",), {"ufunc": staticmethod(np.logical_and)}),
    ("Or", 7, ("bool",), {"ufunc": staticmethod(np.logical_or)}),
    ("Xor", 7, ("bool",), {"ufunc": staticmethod(np.logical_xor)}),
    ("BitwiseAnd", 18, INTS, {"ufunc": staticmethod(np.bitwise_and)}),
    ("BitwiseOr", 18, INTS, {"ufunc": staticmethod(np.bitwise_or)}),
    ("BitwiseXor", 18, INTS, {"ufunc": staticmethod(np.bitwise_xor)}),
)

make_classes(globals(), NumpyBinary, TABLE,
             lambda r: f"C := {r[3]['ufunc'].__name__}(A, B) elementwise, broadcasting (opsets {r[1]}+; numpy)")



class LegacyBinary(NumpyBinary):
    """opset 1 (up to 7) form of a row: B broadcasts to A only with broadcast=1, aligned at `axis`; Z of A's shape."""

    broadcast = 0
    axis = None

    def compute(self, ctx):
        a = ctx.input(0)
        b = legacy_operand(self, a, ctx.input(1))
        z = ctx.output(0, a.shape, a.dtype if self.out_dtype is None else self.out_dtype)
        if z.size:
            self.apply(a, b, z)


#: the opset-1 versions (attributes broadcast, axis) of the rows above that have one
LEGACY = tuple((op, 1, dtypes, fields) for op, dtypes, fields in (
    ("Equal", ("bool", "int32", "int64"), TABLE[0][3]), ("Less", FLOATS, TABLE[1][3]),
    ("Greater", FLOATS, TABLE[3][3]), ("And", ("bool",), TABLE[5][3]), ("Or", ("bool",), TABLE[6][3]),
    ("Xor", ("bool",), TABLE[7][3])))

make_classes(globals(), LegacyBinary, LEGACY,
             lambda r: f"C := {r[3]['ufunc'].__name__}(A, B), opset-1 broadcast attributes (numpy)")
