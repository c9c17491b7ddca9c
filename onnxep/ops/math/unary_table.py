"""Unary elementwise ops that are one numpy ufunc each. One class per row, <op>_<since> (ops/_registry.py registers
each); a new schema version that only widens the dtypes needs no new row (the class covers every later opset).
bfloat16 is not covered (left to another backend)."""
import numpy as np

from onnxep.ops.math._numpy import FLOATS, INTS, NUMERIC, NumpyUnary, make_classes

_BOOL = np.dtype(bool)

#: (op, since, dtypes of T, {ufunc, out_dtype}); out_dtype None: T
TABLE = (
    ("Not", 1, ("bool",), {"ufunc": staticmethod(np.logical_not)}),
    ("IsNaN", 9, FLOATS, {"ufunc": staticmethod(np.isnan), "out_dtype": _BOOL}),
    ("Sign", 9, NUMERIC, {"ufunc": staticmethod(np.sign)}),
    ("Floor", 6, FLOATS, {"ufunc": staticmethod(np.floor)}),
    ("Ceil", 6, FLOATS, {"ufunc": staticmethod(np.ceil)}),
    ("Round", 11, FLOATS, {"ufunc": staticmethod(np.rint)}),       # halves to even, as the spec
    ("Reciprocal", 6, FLOATS, {"ufunc": staticmethod(np.reciprocal)}),
    ("Log", 6, FLOATS, {"ufunc": staticmethod(np.log)}),
    ("Sin", 7, FLOATS, {"ufunc": staticmethod(np.sin)}),
    ("Cos", 7, FLOATS, {"ufunc": staticmethod(np.cos)}),
    ("Tan", 7, FLOATS, {"ufunc": staticmethod(np.tan)}),
    ("Asin", 7, FLOATS, {"ufunc": staticmethod(np.arcsin)}),
    ("Acos", 7, FLOATS, {"ufunc": staticmethod(np.arccos)}),
    ("Atan", 7, FLOATS, {"ufunc": staticmethod(np.arctan)}),
    ("Sinh", 9, FLOATS, {"ufunc": staticmethod(np.sinh)}),
    ("Cosh", 9, FLOATS, {"ufunc": staticmethod(np.cosh)}),
    ("Asinh", 9, FLOATS, {"ufunc": staticmethod(np.arcsinh)}),
    ("Acosh", 9, FLOATS, {"ufunc": staticmethod(np.arccosh)}),
    ("Atanh", 9, FLOATS, {"ufunc": staticmethod(np.arctanh)}),
    ("BitwiseNot", 18, INTS, {"ufunc": staticmethod(np.invert)}),
)

make_classes(globals(), NumpyUnary, TABLE,
             lambda r: f"Y := {r[3]['ufunc'].__name__}(X) elementwise (opsets {r[1]}+; numpy)")
