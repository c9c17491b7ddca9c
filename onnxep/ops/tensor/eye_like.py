import numpy as np
from onnx import helper

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import NUMERIC_BOOL_BF16


class EyeLike_9(OpKernel):
    """Y := zeros of X's 2-D shape with ones on the k-th diagonal, of type dtype (default X's) (opsets 9, 22)."""

    domain, op_type, since = "", "EyeLike", 9
    type_constraints = {"T1": NUMERIC_BOOL_BF16, "T2": NUMERIC_BOOL_BF16}
    dtype = None
    k = 0

    @classmethod
    def supports(cls, op):
        dt = op.node.attrs.get("dtype")
        if dt is None:
            return True
        try:
            return helper.tensor_dtype_to_np_dtype(dt).name in NUMERIC_BOOL_BF16
        except Exception:
            return False

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim != 2:
            raise InvalidArgument(f"EyeLike: the input must be 2-D, got shape {x.shape}")
        dt = x.dtype if self.dtype is None else helper.tensor_dtype_to_np_dtype(self.dtype)
        y = ctx.output(0, x.shape, dt)
        y.fill(0)
        k = int(self.k)
        view = y[:, k:] if k >= 0 else y[-k:, :]
        if view.size:
            np.fill_diagonal(view, 1)
