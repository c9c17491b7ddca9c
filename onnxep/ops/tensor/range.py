import math

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel


class Range_11(OpKernel):
    """Y := start, start + delta, ... below limit (above it for a negative delta): max(ceil((limit - start) / delta),
    0) elements (opsets 11, 27 (float16, bfloat16; computed in float64 here, whatever stash_type)). The length is
    checked before anything is allocated."""

    domain, op_type, since = "", "Range", 11
    type_constraints = {"T": ("float32", "float64", "int16", "int32", "int64", "float16", "bfloat16")}

    def compute(self, ctx):
        start, limit, delta = (ctx.input(i) for i in range(3))
        for name, v in (("start", start), ("limit", limit), ("delta", delta)):
            if v.size != 1:
                raise InvalidArgument(f"Range: {name} must be a scalar, got shape {v.shape}")
        dt = start.dtype
        s, l, d = start.reshape(()).item(), limit.reshape(()).item(), delta.reshape(()).item()
        if d == 0:
            raise InvalidArgument("Range: delta must not be 0")
        if dt.kind != "i":
            if not all(math.isfinite(v) for v in (s, l, d)):
                raise InvalidArgument(f"Range: start {s}, limit {l} and delta {d} must be finite")
            n = max(math.ceil((l - s) / d), 0)
        else:
            n = max(-((s - l) // d), 0)   # exact integer ceil division
        check_size((n,), dt, f"Range node {self.name!r} (start {s}, limit {l}, delta {d})")
        y = ctx.output(0, (n,), dt)
        if n:
            if dt.kind != "i":
                # start + i * delta in float64 (then rounded once to the output type)
                np.copyto(y, np.arange(n, dtype=np.float64) * d + s, casting="unsafe")
            else:
                np.multiply(np.arange(n, dtype=dt), dt.type(d), out=y)
                y += dt.type(s)
