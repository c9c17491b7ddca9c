"""SoftmaxCrossEntropyLoss (opsets 12, 13): the NegativeLogLikelihoodLoss of log(softmax(scores, axis=1)), scores
(N, C) or (N, C, d1..dk), labels (N) or (N, d1..dk), optional class weights, ignore_index, reduction none / sum /
mean; the optional second output is the log-probabilities (scores' shape). float16 / float32 / float64, bfloat16
(opset 13, computed in float32); int32 / int64 labels. Vectorized in _loss."""
from onnxep.ops.nn import _loss
from onnxep.ops.nn._helpers import bad

_OP = "SoftmaxCrossEntropyLoss"


class _SoftmaxCrossEntropyLoss(_loss.LossKernel):
    op_type = _OP

    def compute(self, ctx):
        x = ctx.input(0)
        if x.ndim < 2:
            raise bad(_OP, f"scores must have rank >= 2 (N, C, ...), got shape {x.shape}")
        logp = _loss.log_softmax_axis1(x)
        self.put_loss(ctx, logp, x.dtype)
        if ctx.has_output(1):
            ctx.output(1, x.shape, x.dtype)[...] = logp


class SoftmaxCrossEntropyLoss_12(_SoftmaxCrossEntropyLoss):
    since = 12


class SoftmaxCrossEntropyLoss_13(_SoftmaxCrossEntropyLoss):
    since = 13
    type_constraints = _loss.WITH_BFLOAT16
