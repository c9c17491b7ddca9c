import numpy as np

from onnxep.ops._base import OpKernel


class Shape_1(OpKernel):
    """Y := the shape of X as int64, sliced [start:end] from opset 15 (opsets 1, 13, 15, 19, 21). Any tensor type."""

    domain, op_type, since = "", "Shape", 1
    start = 0
    end = None
    strided_inputs = (0,)      # (its shape only)

    @classmethod
    def supports(cls, op):
        vt = op.input_types[0] if op.input_types else None
        return vt is not None and vt.kind == "tensor"

    def compute(self, ctx):
        shape = ctx.input(0).shape
        r = len(shape)
        start = int(self.start)
        end = r if self.end is None else int(self.end)
        # ONNX clamps start/end to [0, rank] after adding rank to negatives
        start = min(max(start + r if start < 0 else start, 0), r)
        end = min(max(end + r if end < 0 else end, 0), r)
        dims = shape[start:end] if end > start else ()
        y = ctx.output(0, (len(dims),), np.int64)
        y[:] = dims
