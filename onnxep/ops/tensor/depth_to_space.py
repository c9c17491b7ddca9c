import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


class DepthToSpace_1(OpKernel):
    """Y := X [N, C, H, W] with its channels moved into blocksize x blocksize spatial blocks, [N, C/b^2, H*b, W*b];
    mode DCR (depth-column-row, the default) or CRD (opsets 1, 11 (mode), 13, 28). One transposing copy."""

    domain, op_type, since = "", "DepthToSpace", 1
    type_constraints = {"T": ALL_TYPES}
    mode = "DCR"

    def compute(self, ctx):
        x = ctx.input(0)
        b = int(self.blocksize)
        if x.ndim != 4 or b < 1 or x.shape[1] % (b * b):
            raise InvalidArgument(f"DepthToSpace: input must be 4-D with channels divisible by blocksize^2 = {b * b},"
                                  f" got shape {x.shape}")
        n, c, h, w = x.shape
        c2 = c // (b * b)
        mode = self.mode
        if mode == "DCR":
            t = x.reshape(n, b, b, c2, h, w).transpose(0, 3, 4, 1, 5, 2)
        elif mode == "CRD":
            t = x.reshape(n, c2, b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        else:
            raise InvalidArgument(f"DepthToSpace: mode must be DCR or CRD, got {mode!r}")
        y = new_output(ctx, 0, (n, c2, h * b, w * b), x.dtype, f"DepthToSpace node {self.name!r}")
        np.copyto(y.reshape(t.shape), t)
