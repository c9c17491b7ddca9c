"""NegativeLogLikelihoodLoss (opsets 12, 13, 22): loss[n, d] = -input[n, target[n, d], d] * weight[target[n, d]]
over input (N, C) or (N, C, d1..dk) and target (N) or (N, d1..dk), entries at ignore_index giving 0; reduction none
(target's shape), sum, or mean (divided by the sum of the applied weights). float16 / float32 / float64, bfloat16
(opset 22, computed in float32); int32 / int64 targets. Vectorized in _loss.nll."""
from onnxep.ops.math._numpy import NumpyKernel
from onnxep.ops.nn import _loss

_OP = "NegativeLogLikelihoodLoss"
_TIND = ("int32", "int64")


class _NegativeLogLikelihoodLoss(NumpyKernel):
    domain, op_type = "", _OP
    type_constraints = {"T": _loss.FLOATS, "Tind": _TIND}
    reduction = "mean"
    ignore_index = None

    def __init__(self, info):
        super().__init__(info)
        _loss.check_attrs(f"{_OP} node {self.name!r}", self.reduction)

    def compute(self, ctx):
        x = ctx.input(0)
        loss = _loss.nll(_OP, x, ctx.input(1), ctx.input(2), self.reduction,
                         None if self.ignore_index is None else int(self.ignore_index), x.dtype)
        ctx.output(0, loss.shape, x.dtype)[...] = loss


class NegativeLogLikelihoodLoss_12(_NegativeLogLikelihoodLoss):
    since = 12


class NegativeLogLikelihoodLoss_13(_NegativeLogLikelihoodLoss):
    since = 13


class NegativeLogLikelihoodLoss_22(_NegativeLogLikelihoodLoss):
    since = 22
    type_constraints = {"T": _loss.FLOATS + ("bfloat16",), "Tind": _TIND}
