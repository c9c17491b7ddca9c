"""AffineGrid (opset 20): the sampling grid of GridSample for a batch of affine matrices. theta (N, 2, 3) with size
(N, C, H, W) gives grid (N, H, W, 2); theta (N, 3, 4) with size (N, C, D, H, W) gives grid (N, D, H, W, 3). Each
point is theta[n] @ (x, y[, z], 1), the base coordinates normalized to [-1, 1]: pixel centres (-1 + (i + 1/2) 2 / d),
or the corner pixels at -1 and 1 with align_corners. An axis of one pixel with align_corners sits at -1, as the
spec's function body places D (and onnx.reference every axis); onnxruntime 1.32 gives 1, PyTorch 0. float16 / float32 / float64 / bfloat16 (16-bit types computed in float32); one matrix product for the batch."""
import numpy as np

from onnxep.graph.model import check_size
from onnxep.ops.math._numpy import NumpyKernel
from onnxep.ops.nn._helpers import bad

_OP = "AffineGrid"


def _axis(d, align_corners, dtype):
    """The d base coordinates of one axis: start + i * step, as the spec's function body computes them."""
    if align_corners:
        start, step = -1.0, (2.0 / (d - 1) if d > 1 else 0.0)
    else:
        step = 2.0 / d if d else 0.0
        start = -1.0 + step / 2
    return (dtype(start) + np.arange(d, dtype=dtype) * dtype(step)).astype(dtype)


class AffineGrid_20(NumpyKernel):
    domain, op_type, since = "", _OP, 20
    type_constraints = {"T1": ("float16", "float32", "float64", "bfloat16"), "T2": ("int64",)}
    align_corners = 0

    def compute(self, ctx):
        theta, size = ctx.input(0), ctx.input(1)
        if size.ndim != 1 or size.shape[0] not in (4, 5):
            raise bad(_OP, f"size must be (N, C, H, W) or (N, C, D, H, W), got shape {size.shape}")
        k = size.shape[0] - 2
        sz = [int(v) for v in size]
        if theta.shape != (sz[0], k, k + 1):
            raise bad(_OP, f"theta has shape {theta.shape}, expected {(sz[0], k, k + 1)} for size {sz}")
        if min(sz) < 0:
            raise bad(_OP, f"size must not be negative, got {sz}")
        spatial = sz[2:]
        shape = (sz[0], *spatial, k)
        check_size(shape, theta.dtype, f"{_OP} output")
        acc = np.float64 if theta.dtype == np.float64 else np.float32
        check_size((int(np.prod(spatial, dtype=np.int64)), k + 1), acc, f"{_OP} base grid")
        y = ctx.output(0, shape, theta.dtype)
        if y.size == 0:
            return
        # base[..., j]: x (last axis), y, [z], 1
        axes = [_axis(d, int(self.align_corners), acc) for d in spatial]
        mesh = np.meshgrid(*axes, indexing="ij")                        # spatial order (D,) H, W
        base = np.stack([*mesh[::-1], np.ones(spatial, acc)], axis=-1).reshape(-1, k + 1)
        th = theta.astype(acc, copy=False)
        out = np.matmul(base[None], np.swapaxes(th, 1, 2))             # (N, P, k)
        np.copyto(y.reshape(sz[0], -1, k), out, casting="unsafe")
