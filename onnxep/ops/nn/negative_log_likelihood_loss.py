"""NegativeLogLikelihoodLoss (opsets 12, 13, 22): loss[n, d] = -input[n, target[n, d], d] * weight[target[n, d]]
over input (N, C) or (N, C, d1..dk) and target (N) or (N, d1..dk), entries at ignore_index giving 0; reduction none
(target's shape), sum, or mean (divided by the sum of the applied weights). float16 / float32 / float64, bfloat16
(opset 22, computed in float32); int32 / int64 targets. Vectorized in _loss.nll."""
from onnxep.ops.nn._loss import WITH_BFLOAT16, LossKernel


class _NegativeLogLikelihoodLoss(LossKernel):
    op_type = "NegativeLogLikelihoodLoss"

    def compute(self, ctx):
        x = ctx.input(0)
        self.put_loss(ctx, x, x.dtype)


class NegativeLogLikelihoodLoss_12(_NegativeLogLikelihoodLoss):
    since = 12


class NegativeLogLikelihoodLoss_13(_NegativeLogLikelihoodLoss):
    since = 13


class NegativeLogLikelihoodLoss_22(_NegativeLogLikelihoodLoss):
    since = 22
    type_constraints = WITH_BFLOAT16
