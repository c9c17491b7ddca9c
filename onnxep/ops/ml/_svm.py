"""The kernel evaluation shared by SVMClassifier and SVMRegressor (onnxruntime's SVMCommon), float32."""
from __future__ import annotations

import numpy as np

F32 = np.float32


def kernel_params(kernel):
    p = list(kernel.kernel_params or [])
    if not p:
        return F32(0), F32(0), F32(0)
    p = p + [0.0] * (3 - len(p))
    return F32(p[0]), F32(p[1]), F32(p[2])


def kernel_dot(kind, x, b, gamma, coef0, degree, c=0.0):
    """K(x, b) for every row of x [N, F] and row of b [M, F]: LINEAR x.b + c; POLY (gamma x.b + coef0)^degree;
    SIGMOID tanh(gamma x.b + coef0); RBF exp(-gamma |x - b|^2)."""
    x = x.astype(F32, copy=False)
    b = b.astype(F32, copy=False)
    if kind == "RBF":
        d = (x * x).sum(axis=1, dtype=F32)[:, None] - F32(2) * (x @ b.T) + (b * b).sum(axis=1, dtype=F32)[None, :]
        return np.exp(-gamma * np.maximum(d, F32(0))).astype(F32, copy=False)
    if kind == "LINEAR":
        k = x @ b.T
        return k + F32(c) if c != 0 else k
    k = gamma * (x @ b.T) + coef0
    if kind == "POLY":
        return np.power(k, degree).astype(F32, copy=False)
    return np.tanh(k).astype(F32, copy=False)
