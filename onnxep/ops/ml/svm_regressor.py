import numpy as np

from onnxep.errors import InvalidArgument
from onnxep.ops._base import OpKernel
from onnxep.ops.ml._common import NUM4, F32, as_2d, output
from onnxep.ops.ml._svm import kernel_dot, kernel_params


class SVMRegressor_1(OpKernel):
    """Y [N, 1] float32 := sum_i coefficients[i] K(X, support_vectors[i]) + rho[0] (n_supports > 0), else the linear
    form X @ coefficients + rho[0]; one_class: the sign as +-1. post_transform is ignored, as onnxruntime does."""

    domain, op_type, since = "ai.onnx.ml", "SVMRegressor", 1
    type_constraints = {"T": NUM4}
    coefficients = support_vectors = rho = kernel_params = None

    @classmethod
    def supports(cls, op):
        a = op.node.attrs
        return bool(a.get("coefficients")) and bool(a.get("rho")) and \
            a.get("kernel_type", "LINEAR") in ("LINEAR", "POLY", "RBF", "SIGMOID")

    def __init__(self, info):
        super().__init__(info)
        self._coef = np.asarray(self.coefficients, F32)
        self._nsv = int(self.n_supports or 0)
        self._sv = np.asarray(self.support_vectors or [], F32)
        self._rho = F32(self.rho[0])
        self._g, self._c0, self._deg = kernel_params(self)

    def compute(self, ctx):
        x = ctx.input(0)
        what = f"SVMRegressor node {self.name!r}"
        x2 = as_2d(x, what)
        n, f = x2.shape
        if self._nsv > 0:
            if self._sv.size != self._nsv * f or self._coef.size < self._nsv:
                raise InvalidArgument(f"{what}: {self._sv.size} support vector values do not make {self._nsv} "
                                      f"vectors of {f} features (X shape {x.shape})")
            k = kernel_dot(self.kernel_type, x2, self._sv.reshape(self._nsv, f), self._g, self._c0, self._deg)
            s = k @ self._coef[:self._nsv] + self._rho
        else:
            if self._coef.size != f:
                raise InvalidArgument(f"{what}: {self._coef.size} coefficients for {f} features (X shape {x.shape})")
            s = x2.astype(F32, copy=False) @ self._coef + self._rho
        if self.one_class:
            s = np.where(s > 0, F32(1), F32(-1))
        y = output(ctx, 0, (n, 1), F32, what)
        y[:, 0] = s
