"""Elementwise activations with attributes, numpy in X's dtype (a few whole-array calls each): one class per row,
<op>_<since>, whose `apply(x, y)` is the row's function of (kernel, x, y); attributes are the kernel's (schema
defaults filled in by OpKernel). Y never shares X's memory here (inplace = ()), so a function may write Y before it
has read all of X."""
import numpy as np

from onnxep.ops.math._numpy import FLOATS, NUMERIC, NumpyUnary, make_classes


def _selu(k, x, y):
    """gamma * (x if x > 0 else alpha * (exp(x) - 1))"""
    np.exp(x, out=y)
    y -= 1
    y *= x.dtype.type(k.alpha)
    np.copyto(y, x, where=x > 0)
    y *= x.dtype.type(k.gamma)


def _elu(k, x, y):
    """x if x >= 0 else alpha * (exp(x) - 1)"""
    np.exp(x, out=y)
    y -= 1
    y *= x.dtype.type(k.alpha)
    np.copyto(y, x, where=x >= 0)


def _celu(k, x, y):
    """max(0, x) + min(0, alpha * (exp(x / alpha) - 1))"""
    a = x.dtype.type(k.alpha)
    np.divide(x, a, out=y)
    np.exp(y, out=y)
    y -= 1
    y *= a
    np.minimum(y, 0, out=y)
    y += np.maximum(x, 0)


def _softplus(k, x, y):
    """log(exp(x) + 1), without overflow for large x"""
    np.logaddexp(x, 0, out=y)


def _mish(k, x, y):
    """x * tanh(softplus(x))"""
    np.logaddexp(x, 0, out=y)
    np.tanh(y, out=y)
    y *= x


def _softsign(k, x, y):
    """x / (1 + |x|)"""
    np.absolute(x, out=y)
    y += 1
    np.divide(x, y, out=y)


def _shrink(k, x, y):
    """x + bias if x < -lambd, x - bias if x > lambd, else 0 (integers: computed in float64, truncated back as
    onnx.reference does)"""
    lambd, bias = float(k.lambd), float(k.bias)
    y[...] = 0
    np.add(x, bias, out=y, where=x < -lambd, casting="unsafe")
    np.subtract(x, bias, out=y, where=x > lambd, casting="unsafe")


def _thresholded_relu(k, x, y):
    """x if x > alpha else 0"""
    y[...] = 0
    np.copyto(y, x, where=x > float(k.alpha))


def _swish(k, x, y):
    """x * sigmoid(alpha * x)"""
    np.multiply(x, x.dtype.type(-k.alpha), out=y)
    np.exp(y, out=y)
    y += 1
    np.divide(x, y, out=y)


#: (op, since, dtypes of T, {apply, attribute defaults beside the schema's})
TABLE = (
    ("Selu", 6, FLOATS, {"fn": staticmethod(_selu)}),
    ("Elu", 6, FLOATS, {"fn": staticmethod(_elu)}),
    ("Celu", 12, FLOATS, {"fn": staticmethod(_celu)}),
    ("Mish", 18, FLOATS, {"fn": staticmethod(_mish)}),
    ("Softplus", 1, FLOATS, {"fn": staticmethod(_softplus)}),
    ("Softsign", 1, FLOATS, {"fn": staticmethod(_softsign)}),
    ("Shrink", 9, NUMERIC, {"fn": staticmethod(_shrink)}),
    ("ThresholdedRelu", 10, FLOATS, {"fn": staticmethod(_thresholded_relu)}),
    ("Swish", 24, FLOATS, {"fn": staticmethod(_swish)}),
)


class Activation(NumpyUnary):
    """Y := fn(kernel, X) for one row of TABLE."""

    inplace = ()
    fn = None

    def apply(self, x, y):
        self.fn(self, x, y)


make_classes(globals(), Activation, TABLE,
             lambda r: f"Y := {r[3]['fn'].__doc__.split(' (')[0]} (opsets {r[1]}+; numpy)")
