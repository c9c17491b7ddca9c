import numpy as np

from onnxep.graph.model import check_size
from onnxep.ops._base import OpKernel
from onnxep.ops.tensor._helpers import NUMERIC_BOOL_BF16


class ConstantOfShape_9(OpKernel):
    """Y := a tensor of the shape input filled with value (one-element tensor attribute, default float32 0)
    (opsets 9, 20, 21). The size is checked before anything is allocated."""

    domain, op_type, since = "", "ConstantOfShape", 9
    type_constraints = {"T2": NUMERIC_BOOL_BF16}
    value = None

    @classmethod
    def supports(cls, op):
        v = op.node.attrs.get("value")
        return v is None or (isinstance(v, np.ndarray) and v.size == 1 and v.dtype.name in NUMERIC_BOOL_BF16)

    def compute(self, ctx):
        shape = ctx.input(0)
        if shape.ndim != 1:
            raise ValueError(f"ConstantOfShape: the shape input must be 1-D, got shape {shape.shape}")
        value = np.zeros(1, np.float32) if self.value is None else np.asarray(self.value).reshape(-1)
        dims = tuple(int(d) for d in shape)
        check_size(dims, value.dtype, f"ConstantOfShape node {self.name!r}")
        y = ctx.output(0, dims, value.dtype)
        y.fill(value[0])
