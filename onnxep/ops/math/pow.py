import numpy as np

from onnxep import _kernels
from onnxep.ops import _c_steps
from onnxep.ops.math._broadcast import legacy_operand
from onnxep.ops.math._numpy import FLOATS, NUMERIC, NumpyKernel, broadcast_shape

_F64 = np.dtype(np.float64)


class Pow_7(NumpyKernel):
    """Z := A ** B with multidirectional broadcasting (opsets 7, 12, 13, 15), Z of A's dtype. B's dtype may differ
    from A's (opset 12): the power is computed in numpy's common type of the two (float64 for an integer base with a
    float exponent, as onnxruntime's std::pow) and cast to A's dtype; an integer base with a negative integer
    exponent goes through float64 too (2 ** -1 -> 0, as onnxruntime, where numpy would raise)."""

    domain, op_type, since = "", "Pow", 7
    type_constraints = {"T": FLOATS + ("int32", "int64"), "T1": NUMERIC}

    def compute(self, ctx):
        a, b = ctx.input(0), ctx.input(1)
        self.power(a, b, ctx.output(0, broadcast_shape(self.op_type, a.shape, b.shape), a.dtype))

    #: the exponent's value is baked into a C step: the run loop takes it only when it is a constant
    c_value_inputs = (1,)

    def c_step(self, ins, outs, nthreads):
        """The compiled run loop's entry for a float32 base and a one-element exponent 2 (x * x: RL_BINARY Mul), 3
        ((x * x) * x: RL_CUBE) or 0.5 (RL_UNARY sqrt), the loops `power` runs for them."""
        a, b, z = ins[0], ins[1], outs[0]
        if (type(self).compute is not Pow_7.compute or not _c_steps.plain(a, b, z) or a.dtype != np.float32
                or z.dtype != np.float32 or z.shape != a.shape or _square_or_root(a, b) is None):
            return None
        n = z.size
        k = _square_or_root(a, b)
        if k == 2:
            pad = [0] * (_kernels.RUNLOOP_LIMITS["bcast_dims"] - 1)
            return "binary", [0, 0, ~0], [2, 1, n, n, *pad, 1, *pad, 1, *pad], []
        if k == 3:
            return "cube", [0, ~0], [n], []
        return "unary", [0, ~0], [5, n], [0.0, 0.0]

    @staticmethod
    def power(a, b, z):
        if not z.size:
            return
        k = _square_or_root(a, b)
        if k is not None and z.dtype == np.float32 and z.shape == a.shape and a.flags.c_contiguous \
                and z.flags.c_contiguous:
            # the loops onnxruntime runs for these exponents (x * x, (x * x) * x, sqrt); 2 and 0.5 exact
            if k == 2:
                np.multiply(a, a, out=z)
            elif k == 3:
                if np.may_share_memory(a, z):
                    a = a.copy()
                np.multiply(a, a, out=z)
                np.multiply(z, a, out=z)
            else:
                _kernels.sqrt_f32(a.reshape(-1), z.reshape(-1), 1)
            return
        with np.errstate(all="ignore"):
            if a.dtype.kind == "f":
                dt = np.result_type(a.dtype, b.dtype) if b.dtype.kind == "f" else a.dtype
            elif b.dtype.kind == "f" or (b.dtype.kind == "i" and b.size and b.min() < 0):
                dt = _F64
            else:
                dt = a.dtype
            np.power(a, b, out=z, dtype=dt, casting="unsafe")


def _square_or_root(a, b):
    """2, 3 or 0.5 when a is float32 and b one float holding that value, else None."""
    if a.dtype != np.float32 or b.size != 1 or b.dtype.kind != "f":
        return None
    v = float(b.reshape(-1)[0])
    return 2 if v == 2.0 else 3 if v == 3.0 else 0.5 if v == 0.5 else None


class Pow_1(Pow_7):
    """opsets 1-6: B broadcasts to A only with broadcast=1, aligned at `axis` (legacy_operand); float types"""

    since = 1
    type_constraints = {"T": FLOATS}
    broadcast = 0
    axis = None

    def compute(self, ctx):
        a = ctx.input(0)
        self.power(a, legacy_operand(self, a, ctx.input(1)), ctx.output(0, a.shape, a.dtype))
