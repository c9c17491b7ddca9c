import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import NUM4, F32, as_2d, check_post, output, update_scores


class LinearRegressor_1(OpKernel):
    """Y [N, targets] := X @ coefficients.reshape(targets, F).T + intercepts (used when there is one per target),
    then the post transform as onnxruntime applies it (a single target: PROBIT only). float32 output; float64 X
    computes in float64."""

    domain, op_type, since = "ai.onnx.ml", "LinearRegressor", 1
    type_constraints = {"T": NUM4}
    coefficients = intercepts = None

    @classmethod
    def supports(cls, op):
        return check_post(op) and bool(op.node.attrs.get("coefficients"))

    def __init__(self, info):
        super().__init__(info)
        self._k = int(self.targets)
        self._coef = np.asarray(self.coefficients, np.float64)
        icp = list(self.intercepts or [])
        self._icp = np.asarray(icp, np.float64) if len(icp) == self._k else None

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"LinearRegressor node {self.name!r}"
        x2 = as_2d(x, what)
        n, f = x2.shape
        if self._k <= 0 or self._coef.size != self._k * f:
            raise InvalidArgument(f"{what}: {self._coef.size} coefficients do not make {self._k} targets of {f} "
                                  f"features (X shape {x.shape})")
        ct = np.float64 if x.dtype == np.float64 else F32
        s = x2.astype(ct, copy=False) @ self._coef.reshape(self._k, f).T.astype(ct)
        if self._icp is not None:
            s = s + self._icp.astype(ct)
        if self.post_transform != "NONE":
            s = update_scores(s, self.post_transform)
        y = output(ctx, 0, (n, self._k), F32, what)
        y[...] = s
