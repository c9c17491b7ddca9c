"""Upsample (opsets 7, 9; 10 deprecates it): Resize-10's semantics -- nearest (onnxruntime's rounding: floor when
upsampling, ceil when downsampling) or linear, asymmetric coordinates, output dim floor(input dim * scale). Opset 7
reads the scales attribute, opset 9 the scales input."""
import numpy as np

from onnxep.ops.nn.resize import Resize_10


class Upsample_7(Resize_10):
    domain, op_type, since = "", "Upsample", 7
    type_constraints = {"T": Resize_10.type_constraints["T"]}
    scales = None

    @classmethod
    def supports(cls, op):
        return op.node.attrs.get("scales") is not None and super().supports(op)

    def _inputs(self, ctx):
        return ctx.input(0), None, np.asarray(self.scales, np.float32), None


class Upsample_9(Resize_10):
    domain, op_type, since, until = "", "Upsample", 9, 10
    type_constraints = {"T": Resize_10.type_constraints["T"]}
