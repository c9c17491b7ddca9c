"""LpPool (opsets 2, 11, 18, 22) and the window geometry of MaxPool / AveragePool (ops/_pool_common.PoolAttrs):
Y[n, c, o] := (sum over window o of |X[n, c]|^p)^(1/p), the padding contributing zeros. float16 / float32 /
float64 (float16 summed in float32); the window sum is a loop over the kernel taps, each a strided slice add."""
import itertools

import numpy as np

from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops._pool_common import WindowPool, supports_pool
from onnxep.ops.nn._helpers import FLOATS, acc_dtype, bad


def _powered(x, p, acc):
    """|x|^p in the accumulation type."""
    a = np.abs(x).astype(acc, copy=False) if x.dtype != acc else np.abs(x)
    if p == 2:
        np.square(a, out=a)
    elif p != 1:
        np.power(a, p, out=a)
    return a


def _root(s, p):
    if p == 2:
        np.sqrt(s, out=s)
    elif p != 1:
        np.power(s, 1.0 / p, out=s)
    return s


class LpPool_2(WindowPool, OpKernel):
    domain, op_type, since = "", "LpPool", 2
    type_constraints = {"T": FLOATS}
    p = 2

    @classmethod
    def supports(cls, op):
        return int(op.node.attrs.get("p", 2)) >= 1 and supports_pool(op) is not None

    def compute(self, ctx):
        x = ctx.input(0)
        pa = self.pool
        if x.ndim != pa.rank + 2:
            raise bad("LpPool", f"input rank {x.ndim}, kernel_shape has {pa.rank} dims")
        try:
            out, pb, _ = pa.geometry(x.shape[2:])
        except ValueError as e:
            raise bad("LpPool", f"{e} (input shape {x.shape})") from None
        y = ctx.output(0, x.shape[:2] + tuple(out), x.dtype)
        if y.size == 0:
            return
        p = int(self.p)
        acc = acc_dtype(x.dtype)
        k, s, d = pa.kernel, pa.strides, pa.dilations
        # zero-padded |x|^p, long enough for every window (ceil_mode's overhang included)
        ext = [max(b + n, (o - 1) * st + (kk - 1) * dd + 1)
               for b, n, o, st, kk, dd in zip(pb, x.shape[2:], out, s, k, d)]
        check_size(x.shape[:2] + tuple(ext), acc, "LpPool padded input")
        xp = np.zeros(x.shape[:2] + tuple(ext), acc)
        lead = (slice(None), slice(None))
        xp[lead + tuple(slice(b, b + n) for b, n in zip(pb, x.shape[2:]))] = _powered(x, p, acc)
        total = np.zeros(y.shape, acc)
        for tap in itertools.product(*(range(kk) for kk in k)):
            total += xp[lead + tuple(slice(t * dd, t * dd + (o - 1) * st + 1, st)
                                     for t, dd, o, st in zip(tap, d, out, s))]
        np.copyto(y, _root(total, p), casting="same_kind")
