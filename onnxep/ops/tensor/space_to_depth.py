import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import ALL_TYPES, new_output


class SpaceToDepth_1(OpKernel):
    """Y := X [N, C, H, W] with each blocksize x blocksize spatial block moved into channels, [N, C*b^2, H/b, W/b]
    in the order of mode DCR (block offsets before channels, the default) or CRD (opset 28) (opsets 1, 13, 28). One
    transposing copy."""

    domain, op_type, since = "", "SpaceToDepth", 1
    type_constraints = {"T": ALL_TYPES}
    mode = "DCR"

    def compute(self, ctx):
        x = ctx.input(0)
        b = int(self.blocksize)
        if x.ndim != 4 or b < 1 or x.shape[2] % b or x.shape[3] % b:
            raise InvalidArgument(f"SpaceToDepth: input must be 4-D with H and W divisible by blocksize {b}, got "
                                  f"shape {x.shape}")
        n, c, h, w = x.shape
        mode = self.mode
        if mode not in ("DCR", "CRD"):
            raise InvalidArgument(f"SpaceToDepth: mode must be DCR or CRD, got {mode!r}")
        perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
        t = x.reshape(n, c, h // b, b, w // b, b).transpose(perm)
        y = new_output(ctx, 0, (n, c * b * b, h // b, w // b), x.dtype, f"SpaceToDepth node {self.name!r}")
        np.copyto(y.reshape(t.shape), t)
