"""MaxUnpool (opsets 9, 11, 22): scatter X into zeros at the flat indices I (as MaxPool's Indices output gives them)
of the inferred shape ((in - 1) * stride - pads + kernel per spatial dim); with output_shape, that result sits at
the start of each dim of a zero tensor of output_shape (onnx.reference and the conformance case; onnxruntime instead
reads the indices in output_shape's layout). float16 / float32 / float64."""
import math

import numpy as np

from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops.nn._helpers import FLOATS, bad, ints

_OP = "MaxUnpool"


class MaxUnpool_9(OpKernel):
    domain, op_type, since = "", "MaxUnpool", 9
    type_constraints = {"T1": FLOATS, "T2": ("int64",)}
    kernel_shape = None
    pads = None
    strides = None

    def compute(self, ctx):
        x, idx, oshape = ctx.input(0), ctx.input(1), ctx.input(2)
        k = ints(self.kernel_shape)
        if k is None or x.ndim != len(k) + 2:
            raise bad(_OP, f"X of shape {x.shape} needs {x.ndim - 2} kernel dims, kernel_shape is {self.kernel_shape}")
        nsp = len(k)
        s = ints(self.strides, nsp, 1)
        p = ints(self.pads, 2 * nsp, 0)
        if idx.shape != x.shape:
            raise bad(_OP, f"I has shape {idx.shape}, expected X's shape {x.shape}")
        inferred = x.shape[:2] + tuple((x.shape[2 + i] - 1) * s[i] - p[i] - p[nsp + i] + k[i] for i in range(nsp))
        if min(inferred) < 0:
            raise bad(_OP, f"inferred output shape {inferred} is negative")
        if oshape is not None:
            shape = tuple(int(v) for v in oshape.reshape(-1))
            if len(shape) != x.ndim or any(a < b for a, b in zip(shape, inferred)):
                raise bad(_OP, f"output_shape {list(shape)} must have rank {x.ndim} and hold the inferred shape "
                               f"{list(inferred)}")
        else:
            shape = inferred
        y = ctx.output(0, shape, x.dtype)
        n = math.prod(inferred)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise bad(_OP, f"indices must be in [0, {n - 1}] (inferred shape {list(inferred)}), got values in "
                           f"[{idx.min()}, {idx.max()}]")
        if shape == inferred:
            y.fill(0)
            y.reshape(-1)[idx.reshape(-1)] = x.reshape(-1)
            return
        check_size(inferred, x.dtype, f"{_OP} inferred output")
        flat = np.zeros(n, x.dtype)
        flat[idx.reshape(-1)] = x.reshape(-1)
        y.fill(0)
        y[tuple(slice(0, d) for d in inferred)] = flat.reshape(inferred)
