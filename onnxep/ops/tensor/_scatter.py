"""What ScatterElements and ScatterND share: the reduction attribute (none; add / mul from opset 16, max / min from
18), checked against the node's opset and the data's type, and the write of the updates."""
from __future__ import annotations

import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel

#: reduction -> numpy ufunc applied unbuffered at repeated indices (ufunc.at), per ONNX the updates combine in order
REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def reduction_ok(op) -> bool:
    """The reduction attribute exists at the node's opset: none only before 16, add / mul from 16, max / min from
    18."""
    r = op.node.attrs.get("reduction", "none")
    v = op.node.opset
    return r == "none" or (v >= 16 and r in ("add", "mul")) or (v >= 18 and r in ("max", "min"))


def scatter_into(y, pos, upd, reduction):
    """y[pos] := upd, or y[pos] op= upd for each update in turn (ufunc.at: repeated positions accumulate)."""
    if reduction == "none":
        y[pos] = upd
    else:
        REDUCE[reduction].at(y, pos, upd)


class ReducingScatter(OpKernel):
    """Base of ScatterElements / ScatterND: the reduction attribute, supported as reduction_ok says."""

    reduction = "none"

    @classmethod
    def supports(cls, op):
        return reduction_ok(op)

    def checked_reduction(self, x, what) -> str:
        """The node's reduction, or InvalidArgument when it combines strings (x holds the data)."""
        red = self.reduction
        if red != "none" and x.dtype.hasobject:
            raise InvalidArgument(f"{what}: reduction {red!r} on strings")
        return red
