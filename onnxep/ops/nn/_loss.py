"""The shared part of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: the weighted negative gather of the
target class's (log-)probability over (N, C, d1..dk) with ignore_index, and the reductions none / sum / mean.

    loss[n, d] = -input[n, target[n, d], d] * w[n, d],  w[n, d] = weight[target[n, d]] (1 without weight),
                 0 where target[n, d] == ignore_index
    none: loss (target's shape); sum: sum(loss); mean: sum(loss) / sum(w)

One take_along_axis and a few whole-array ops; accumulated in float32 (float16 input) or the input's type."""
from __future__ import annotations

import numpy as np

from onnxep.ops.math._numpy import NumpyKernel
from onnxep.ops.nn._helpers import acc_dtype, bad

REDUCTIONS = ("none", "sum", "mean")
#: the dtypes both ops compute (bfloat16 nodes run the float32 code through NumpyKernel's Float32Context)
FLOATS = ("float16", "float32", "float64")
TIND = ("int32", "int64")
#: type_constraints of the opsets that add bfloat16 (NegativeLogLikelihoodLoss-22, SoftmaxCrossEntropyLoss-13)
WITH_BFLOAT16 = {"T": FLOATS + ("bfloat16",), "Tind": TIND}


def check_attrs(op, reduction):
    if reduction not in REDUCTIONS:
        raise bad(op, f"reduction must be one of {', '.join(REDUCTIONS)}, got {reduction!r}")


class LossKernel(NumpyKernel):
    """The scaffold both ops share: the types, the attributes reduction (checked at construction) and ignore_index,
    and output 0, the loss of the (log-)probabilities at the targets (input 1) with the class weights (input 2)."""

    domain = ""
    type_constraints = {"T": FLOATS, "Tind": TIND}
    reduction = "mean"
    ignore_index = None

    def __init__(self, info):
        super().__init__(info)
        check_attrs(f"{self.op_type} node {self.name!r}", self.reduction)

    def put_loss(self, ctx, logp, dtype):
        """Output 0 := nll of `logp` (N, C, d1..dk) at the targets, of `dtype`."""
        loss = nll(self.op_type, logp, ctx.input(1), ctx.input(2), self.reduction,
                   None if self.ignore_index is None else int(self.ignore_index), dtype)
        ctx.output(0, loss.shape, dtype)[...] = loss


def nll(op, x, target, weight, reduction, ignore_index, out_dtype):
    """The loss of the (log-)probabilities `x` (N, C, d1..dk) at `target` (N, d1..dk): an array of target's shape
    (reduction none) or a 0-d array, of `out_dtype`."""
    if x.ndim < 2:
        raise bad(op, f"input must have rank >= 2 (N, C, ...), got shape {x.shape}")
    n, c = x.shape[0], x.shape[1]
    if target.shape != (n,) + x.shape[2:]:
        raise bad(op, f"target has shape {target.shape}, expected {(n,) + x.shape[2:]} for input {x.shape}")
    if weight is not None and weight.shape != (c,):
        raise bad(op, f"weight has shape {weight.shape}, expected ({c},)")
    acc = acc_dtype(x.dtype)
    t = target.reshape(n, -1)
    d = t.shape[1]
    x3 = x.reshape(n, c, d)
    keep = None if ignore_index is None else t != ignore_index
    valid = (t >= 0) & (t < c)
    if keep is not None:
        bad_t = ~valid & keep
    else:
        bad_t = ~valid
    if bad_t.any():
        v = t[bad_t][0]
        raise bad(op, f"target values must be in [0, {c})" + ("" if ignore_index is None else
                  f" or equal ignore_index {ignore_index}") + f", got {v}")
    ts = t if keep is None else np.where(keep, t, 0)
    picked = np.take_along_axis(x3, ts[:, None, :].astype(np.intp, copy=False), axis=1)[:, 0, :].astype(acc)
    if weight is not None:
        w = weight.astype(acc)[ts]
        if keep is not None:
            w[~keep] = 0
    elif keep is not None:
        w = keep.astype(acc)
    else:
        w = None
    loss = -picked if w is None else -(picked * w)
    if keep is not None:
        loss[~keep] = 0      # no -0.0 for ignored entries
    if reduction == "none":
        return loss.reshape(target.shape).astype(out_dtype, copy=False)
    total = loss.sum(dtype=acc)
    if reduction == "sum":
        return np.asarray(total, dtype=out_dtype)
    denom = acc(t.size) if w is None else w.sum(dtype=acc)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(total / denom, dtype=out_dtype)


def log_softmax_axis1(x):
    """log(softmax(x, axis=1)) in acc_dtype(x)."""
    acc = acc_dtype(x.dtype)
    xa = x.astype(acc)
    m = xa.max(axis=1, keepdims=True) if x.shape[1] else 0
    z = xa - m
    with np.errstate(divide="ignore"):
        z -= np.log(np.exp(z).sum(axis=1, keepdims=True))
    return z
